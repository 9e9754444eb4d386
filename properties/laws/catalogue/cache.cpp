// Cache equivalence: one-shot causal attention equals filling the subject's
// cache chunk by chunk (a prefill of any length, chunks up to the whole
// sequence, single tokens; sequences of a batch advancing unevenly; shuffled
// pages), and both equal the oracle within the bound.
#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>

#include "attncheck/generators.hpp"
#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// A case whose prefill of every position costs at most this many
// multiply-adds gets Lq = Lk: every position is queried. Larger cases keep
// their Lq (decode: the last token); their chunks still cover the whole
// sequence. The oracle's cost follows this number (~0.1 s at 2e5 in MPFR).
constexpr std::int64_t full_prefill_work = 200'000;
// Attend calls per case: a prefill, chunks, single tokens. Each call costs a
// pass over the cached keys, so more steps make a long sequence quadratic.
constexpr std::size_t max_steps = 12;

// Chunk sizes of sequence b over its n tokens: any_chunking's, with the
// leading chunks that hold no queried position (position < first_queried)
// merged into the prefill, and the prefill growing until at most max_steps remain.
std::vector<std::int64_t> sequence_chunks(std::int64_t n, std::int64_t first_queried, std::uint64_t seed) {
  const auto raw = any_chunking(n, seed);
  std::vector<std::int64_t> out;
  std::int64_t prefill = 0;
  std::size_t k = 0;
  while (k < raw.size() && prefill + raw[k] <= first_queried) prefill += raw[k++];
  if (k < raw.size()) prefill += raw[k++];  // the prefill reaches a queried position
  if (prefill > 0) out.push_back(prefill);
  for (; k < raw.size(); ++k) out.push_back(raw[k]);
  while (out.size() > max_steps) {
    out[0] += out[1];
    out.erase(out.begin() + 1);
  }
  return out;
}

}  // namespace

void prepare_cache(attn_case& c, const subject&) {
  c.causal = true;
  c.mask_shape = {};  // the cache entry point takes no boolean mask
  c.mask.clear();
  if (c.b * c.hq * c.lk * c.lk * (c.d + c.dv) <= full_prefill_work) c.lq = c.lk;
  if (c.variants.has_bias() && c.variants.bias_shape[2] != 1) c.variants.bias_shape[2] = c.lq;
}

cache_plan plan_cache_steps(const attn_case& c) {
  law_rng rng(c, 0xcac4e);
  cache_plan plan;
  constexpr std::int64_t page_sizes[] = {1, 2, 3, 5, 7, 16, 64, 256};
  plan.page_size = page_sizes[rng.below(c.lk >= 256 ? 8 : 6)];
  const std::int64_t pages_per_seq = (c.lk + plan.page_size - 1) / plan.page_size;
  plan.page_order.resize(static_cast<std::size_t>(pages_per_seq * c.b));
  std::iota(plan.page_order.begin(), plan.page_order.end(), 0);
  for (std::int64_t i = static_cast<std::int64_t>(plan.page_order.size()) - 1; i > 0; --i)
    std::swap(plan.page_order[static_cast<std::size_t>(i)], plan.page_order[static_cast<std::size_t>(rng.below(i + 1))]);
  // Each sequence its own chunking: sequences advance unevenly, and one that
  // is done keeps being queried (appending nothing) while others grow.
  std::vector<std::vector<std::int64_t>> chunks;
  std::size_t steps = 1;
  for (std::int64_t b = 0; b < c.b; ++b) {
    const std::int64_t n = c.valid_keys(b);
    chunks.push_back(sequence_chunks(n, std::max<std::int64_t>(0, n - c.lq), rng.next()));
    steps = std::max(steps, chunks.back().size());
  }
  std::vector<std::int64_t> filled(static_cast<std::size_t>(c.b), 0);
  for (std::size_t t = 0; t < steps; ++t) {
    cache_step step;
    step.lq = 1;
    for (std::int64_t b = 0; b < c.b; ++b) {
      const auto& ch = chunks[static_cast<std::size_t>(b)];
      const std::int64_t a = t < ch.size() ? ch[t] : 0;
      step.append.push_back(a);
      auto& f = filled[static_cast<std::size_t>(b)];
      // Query every appended position that has a row in the case (the rows
      // are the last Lq positions), and at least the last token.
      const std::int64_t first_queried = std::max(f, c.valid_keys(b) - c.lq);
      f += a;
      step.lq = std::max(step.lq, f - first_queried);
    }
    step.lq = std::min(step.lq, std::max<std::int64_t>(1, c.lq));
    plan.steps.push_back(step);
  }
  return plan;
}

law_outcome chunked_cache_equals_prefill(const subject& s, const attn_case& c) {
  law_outcome o;
  if (!c.causal || c.has_mask()) {
    o.fail("case does not fit this law (needs causal, no boolean mask): " + to_line(c));
    return o;
  }
  const auto whole = s.attend(c);
  if (run_failed(whole, o, "one-shot call")) return o;
  const cache_plan plan = plan_cache_steps(c);
  const auto chunked = s.attend_cached(c, plan);
  if (run_failed(chunked, o, "chunked run through the cache")) return o;
  const bool bitwise = s.claims(ATTNCHECK_CLAIM_CACHE);
  const oracle_result ref = oracle_of(s, c);
  comparison vs_whole, vs_oracle, empty;
  vs_whole.overflow_threshold = vs_oracle.overflow_threshold = overflow_threshold(c.type);
  std::vector<std::int64_t> filled(static_cast<std::size_t>(c.b), 0);
  std::int64_t row0 = 0;
  const std::int64_t total = chunked.o.shape[1];
  std::int64_t judged_rows = 0;
  for (const auto& step : plan.steps) {
    for (std::int64_t b = 0; b < c.b; ++b) filled[static_cast<std::size_t>(b)] += step.append[static_cast<std::size_t>(b)];
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t i = 0; i < step.lq; ++i) {
        const std::int64_t pos = filled[static_cast<std::size_t>(b)] - step.lq + i;  // absolute position of this query
        const std::int64_t wi = pos - c.valid_keys(b) + c.lq;                        // its row in the one-shot call
        if (pos >= 0 && wi < 0) continue;  // a position the case has no query for (zero Q): nothing to compare
        ++judged_rows;
        for (std::int64_t h = 0; h < c.hq; ++h) {
          const auto where = [&](std::int64_t e) {
            return "chunk row " + std::to_string(row0 + i) + " (position " + std::to_string(pos) + ") " + o_where(b, wi, h, e);
          };
          const float lse = chunked.lse.empty() ? 0.0f : chunked.lse[static_cast<std::size_t>((b * c.hq + h) * total + row0 + i)];
          // A row that sees no key and has no sink, where the subject declares its own values (docs/abi.md "Conventions").
          const auto& declared = chunked.empty_rows;
          const bool own_empty = !declared.is_default() && !std::isfinite(c.sink_of(h));
          if (pos < 0) {  // precedes the sequence: sees nothing (its LSE is the sink's logit, or -inf)
            const element_where lse_at = lse_of_row(where(0)) + " (a row before the sequence)";
            if (own_empty) {
              for (std::int64_t e = 0; e < c.dv; ++e) empty.empty_row_o(where(e), chunked.o.at(b, row0 + i, h, e), declared);
              if (!chunked.lse.empty()) empty.empty_row_lse(lse_at, lse, declared);
            } else {
              for (std::int64_t e = 0; e < c.dv; ++e) empty.element(where(e), 0.0, chunked.o.at(b, row0 + i, h, e), 0.0);
              if (!chunked.lse.empty()) empty.element(lse_at, c.sink_of(h), lse, 0.0);
            }
            continue;
          }
          const auto w_lse = static_cast<std::size_t>((b * c.hq + h) * c.lq + wi);
          // The host reads an unspecified value of the one-shot call's as the contract's, not the chunked run's:
          // excused here, where an infinite Q or K element empties the row too (row_has_no_mass).
          if (own_empty && (ref.lse[ref.lse_index(b, h, wi)] == -std::numeric_limits<double>::infinity() ||
                            (declared.any_unspecified() && row_has_no_mass(c, b, h, wi)))) {
            for (std::int64_t e = 0; e < c.dv; ++e) vs_oracle.empty_row_o(where(e), chunked.o.at(b, row0 + i, h, e), declared);
            if (!chunked.lse.empty()) vs_oracle.empty_row_lse(lse_of_row(where(0)), lse, declared);
            continue;
          }
          for (std::int64_t e = 0; e < c.dv; ++e) {
            const double got = chunked.o.at(b, row0 + i, h, e);
            const auto k = ref.o_index(b, wi, h, e);
            if (bitwise)
              vs_whole.exact(where(e), whole.o.bits_at(b, wi, h, e), chunked.o.bits_at(b, row0 + i, h, e),
                             whole.o.at(b, wi, h, e), got);
            else if (std::isfinite(ref.o_bound[k]) &&
                     !vs_whole.overflowed(where(e), ref.o[k], 2 * ref.o_bound[k], whole.o.at(b, wi, h, e), got))
              vs_whole.element(where(e), whole.o.at(b, wi, h, e), got, 2 * ref.o_bound[k]);
            if (std::isnan(ref.o[k]) || std::isnan(ref.o_bound[k]))
              vs_oracle.without_bound(where(e), ref.o[k], got,
                                      every_visible_score_is_minus_inf(c, b, h, wi) ? empty_row_o_value(declared) : std::nan(""));
            else
              vs_oracle.element(where(e), ref.o[k], got, ref.o_bound[k]);
          }
          if (!chunked.lse.empty() && !whole.lse.empty()) {
            const float w = whole.lse[w_lse];
            const auto k = ref.lse_index(b, h, wi);
            if (bitwise)
              vs_whole.exact(lse_of_row(where(0)), std::bit_cast<std::uint32_t>(w), std::bit_cast<std::uint32_t>(lse), w, lse);
            else if (std::isfinite(ref.lse_bound[k]))
              vs_whole.element(lse_of_row(where(0)), w, lse, 2 * ref.lse_bound[k]);
            comparison l;
            l.overflow_threshold = overflow_threshold(dtype::f32);
            if (std::isnan(ref.lse[k]) || std::isnan(ref.lse_bound[k]))
              l.without_bound(lse_of_row(where(0)), ref.lse[k], lse,
                              every_visible_score_is_minus_inf(c, b, h, wi) ? empty_row_lse_value(declared) : std::nan(""));
            else
              l.element(lse_of_row(where(0)), ref.lse[k], lse, ref.lse_bound[k]);
            vs_oracle.merge(l);
          }
        }
      }
    row0 += step.lq;
  }
  std::string chunks;
  for (const auto& st : plan.steps) {
    std::string a;
    for (std::int64_t x : st.append) a += (a.empty() ? "" : "/") + std::to_string(x);
    chunks += (chunks.empty() ? "" : ", ") + a + " q" + std::to_string(st.lq);
  }
  const std::string how = "appends [" + chunks + "], page size " + std::to_string(plan.page_size) + ", shuffled pages";
  o.add(std::string(bitwise ? "bitwise" : "within two bounds") + " vs the one-shot call, " + how, vs_whole);
  o.add("against the oracle, " + how, vs_oracle);
  o.add("rows before the sequence, " + how, empty);
  if (judged_rows == 0) o.nothing_to_judge("no chunked row has a query in the case");
  return o;
}

}  // namespace attncheck::laws
