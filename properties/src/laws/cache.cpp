// Cache equivalence: one-shot causal prefill equals filling the subject's
// cache chunk by chunk (single tokens included) with shuffled pages.
#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

void prepare_cache(attn_case& c, const subject&) {
  c.causal = true;
  c.mask_shape = {};  // the cache entry point takes no boolean mask
  c.mask.clear();
  c.lq = c.lk;  // one-shot prefill of the whole sequence
}

law_outcome chunked_cache_equals_prefill(const subject& s, const attn_case& c) {
  law_outcome o;
  if (!c.causal || c.has_mask() || c.lq != c.lk) {
    o.fail("case does not fit this law (needs causal, no boolean mask, lq == lk): " + to_line(c));
    return o;
  }
  const auto whole = s.attend(c);
  if (run_failed(whole, o, "one-shot prefill")) return o;
  law_rng rng(c, 0xcac4e);
  // A random chunking: a prefill of any length, then chunks of 1..4 tokens.
  cache_plan plan;
  constexpr std::int64_t page_sizes[] = {1, 2, 3, 5, 7, 16};
  plan.page_size = page_sizes[rng.below(6)];
  const std::int64_t pages_per_seq = (c.lk + plan.page_size - 1) / plan.page_size;
  plan.page_order.resize(static_cast<std::size_t>(pages_per_seq * c.b));
  std::iota(plan.page_order.begin(), plan.page_order.end(), 0);
  for (std::int64_t i = static_cast<std::int64_t>(plan.page_order.size()) - 1; i > 0; --i)
    std::swap(plan.page_order[static_cast<std::size_t>(i)], plan.page_order[static_cast<std::size_t>(rng.below(i + 1))]);
  std::vector<std::int64_t> left(static_cast<std::size_t>(c.b));
  for (std::int64_t b = 0; b < c.b; ++b) left[static_cast<std::size_t>(b)] = c.valid_keys(b);
  std::int64_t longest = *std::max_element(left.begin(), left.end());
  bool first = true;
  while (longest > 0) {
    const std::int64_t chunk = first ? 1 + rng.below(longest) : 1 + rng.below(std::min<std::int64_t>(4, longest));
    first = false;
    cache_step step;
    step.lq = chunk;
    for (auto& n : left) {
      const std::int64_t take = std::min(n, chunk);
      step.append.push_back(take);
      n -= take;
    }
    plan.steps.push_back(step);
    longest = *std::max_element(left.begin(), left.end());
  }
  if (plan.steps.empty()) {  // every sequence empty: one query against an empty cache
    plan.steps.push_back({1, std::vector<std::int64_t>(static_cast<std::size_t>(c.b), 0)});
  }
  const auto chunked = s.attend_cached(c, plan);
  if (run_failed(chunked, o, "chunked run through the cache")) return o;
  const bool bitwise = s.claims(ATTNCHECK_CLAIM_CACHE);
  const oracle_result ref = fast_bound(s, c);
  comparison r;
  std::vector<std::int64_t> filled(static_cast<std::size_t>(c.b), 0);
  std::int64_t row0 = 0;
  const std::int64_t total = chunked.o.shape[1];
  for (const auto& step : plan.steps) {
    for (std::int64_t b = 0; b < c.b; ++b) filled[static_cast<std::size_t>(b)] += step.append[static_cast<std::size_t>(b)];
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t i = 0; i < step.lq; ++i) {
        const std::int64_t pos = filled[static_cast<std::size_t>(b)] - step.lq + i;  // absolute position of this query
        const std::int64_t wi = pos - c.valid_keys(b) + c.lq;                        // its row in the one-shot run
        for (std::int64_t h = 0; h < c.hq; ++h) {
          const auto where = [&](std::int64_t e) {
            return "chunk row " + std::to_string(row0 + i) + " (position " + std::to_string(pos) + ") " + o_where(b, wi, h, e);
          };
          const float lse = chunked.lse.empty() ? 0.0f : chunked.lse[static_cast<std::size_t>((b * c.hq + h) * total + row0 + i)];
          if (pos < 0) {  // precedes the sequence: sees nothing
            for (std::int64_t e = 0; e < c.dv; ++e) r.element(where(e), 0.0, chunked.o.at(b, row0 + i, h, e), 0.0);
            if (!chunked.lse.empty() && !(std::isinf(lse) && lse < 0)) r.fail("LSE of a row before the sequence is not -inf");
            continue;
          }
          for (std::int64_t e = 0; e < c.dv; ++e) {
            if (bitwise)
              r.exact(where(e), whole.o.bits_at(b, wi, h, e), chunked.o.bits_at(b, row0 + i, h, e), whole.o.at(b, wi, h, e),
                      chunked.o.at(b, row0 + i, h, e));
            else
              r.element(where(e), whole.o.at(b, wi, h, e), chunked.o.at(b, row0 + i, h, e), 2 * ref.o_bound[ref.o_index(b, wi, h, e)]);
          }
          if (!chunked.lse.empty() && !whole.lse.empty()) {
            const float w = whole.lse[static_cast<std::size_t>((b * c.hq + h) * c.lq + wi)];
            if (bitwise)
              r.exact("LSE of " + where(0), std::bit_cast<std::uint32_t>(w), std::bit_cast<std::uint32_t>(lse), w, lse);
            else
              r.element("LSE of " + where(0), w, lse, 2 * ref.lse_bound[ref.lse_index(b, h, wi)]);
          }
        }
      }
    row0 += step.lq;
  }
  std::string chunks;
  for (const auto& st : plan.steps) chunks += (chunks.empty() ? "" : ",") + std::to_string(st.lq);
  o.add(std::string(bitwise ? "bitwise" : "within two bounds") + ", chunks [" + chunks + "], page size " +
            std::to_string(plan.page_size) + ", shuffled pages",
        r);
  return o;
}

}  // namespace attncheck::laws
