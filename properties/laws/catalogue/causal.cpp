// The causal law: inputs a row cannot see (future keys, padded or masked
// slots, through the cache too) never change its bits.
#include <algorithm>
#include <bit>
#include <limits>

#include "attncheck/masked_fill.hpp"
#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

void prepare_causal(attn_case& c, const subject& s) {
  if (s.has(ATTNCHECK_FEATURE_CAUSAL)) c.causal = true;
  // One query sees every key under causal alone: cut keys off with padding so
  // some key is invisible (the decode shape of a padded batch).
  if (c.lq == 1 && c.key_len.empty() && !c.has_mask() && s.has(ATTNCHECK_FEATURE_PADDING)) {
    law_rng rng(c, 0xca05a2);
    for (std::int64_t b = 0; b < c.b; ++b) c.key_len.push_back(rng.below(c.lk));
  }
}

namespace {

// +-1e30, or the type's largest finite value where 1e30 does not fit (f16).
std::uint32_t huge_bits(dtype t, std::int64_t salt) {
  const double big = std::min(1e30, largest_finite(t));
  return encode(t, (salt & 1) ? -big : big);
}

}  // namespace

law_outcome invisible_inputs_never_change_outputs(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto base = s.attend(c);
  if (run_failed(base, o, "base run")) return o;
  law_rng rng(c, 0xca05a1);
  bool any_invisible = false;
  for (std::int64_t b = 0; b < c.b && !any_invisible; ++b)
    for (std::int64_t h = 0; h < c.hq && !any_invisible; ++h)
      for (std::int64_t i = 0; i < c.lq && !any_invisible; ++i)
        for (std::int64_t j = 0; j < c.lk && !any_invisible; ++j) any_invisible = !c.visible(b, h, i, j);
  if (!any_invisible) o.nothing_to_judge("every row sees every key");
  // A subject that weights masked keys by zero reads them: it gets finite
  // content no larger than the case's own (masked_fill.hpp), never NaN or +-1e30.
  const bool by_zero = s.weights_masked_by_zero();
  const finite_fill fill = by_zero ? finite_fill_of(c) : finite_fill{};
  const auto fill_at = [&](bool k, std::int64_t b, std::int64_t j, std::int64_t g, std::int64_t x, int variant) {
    return fill.bits_at(c, k ? fill_tensor::k : fill_tensor::v, b, j, g, x, variant);
  };
  // Poison one key position per batch element (the last valid key, then a
  // random one): every row that cannot see it must keep its bits.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::int64_t> pick(static_cast<std::size_t>(c.b));
    for (std::int64_t b = 0; b < c.b; ++b) {
      const std::int64_t n = c.valid_keys(b);
      pick[static_cast<std::size_t>(b)] = round == 0 ? std::max<std::int64_t>(n - 1, 0) : rng.below(c.lk);
    }
    attn_case p = c;
    for (auto* t : {&p.k, &p.v})
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t g = 0; g < c.hkv; ++g)
          for (std::int64_t x = 0; x < t->shape[3]; ++x)
            t->set_bits(b, pick[static_cast<std::size_t>(b)], g, x,
                        by_zero ? fill_at(t == &p.k, b, pick[static_cast<std::size_t>(b)], g, x, round) : nan_bits(c.type));
    const auto out = s.attend(p);
    if (run_failed(out, o, "poisoned run")) return o;
    o.add(std::string(by_zero ? "finite fill" : "NaN") + " in K,V at key " + std::to_string(pick[0]) +
              (c.b > 1 ? " (batch 0; per batch varies)" : ""),
          rows_claimed(s, c, base, out,
                       [&](auto b, auto h, auto i) { return !c.visible(b, h, i, pick[static_cast<std::size_t>(b)]); }));
  }
  // Huge finite values (+-1e30, or f16's max; the finite fill by zero-weighting
  // subjects) in every key from a cut on: scores that overflow, or that
  // dominate every other key, if they leak.
  std::vector<std::int64_t> cut(static_cast<std::size_t>(c.b));
  for (std::int64_t b = 0; b < c.b; ++b) cut[static_cast<std::size_t>(b)] = rng.below(std::max<std::int64_t>(1, c.valid_keys(b)));
  attn_case p = c;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t j = cut[static_cast<std::size_t>(b)]; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g) {
        for (std::int64_t x = 0; x < c.d; ++x)
          p.k.set_bits(b, j, g, x, by_zero ? fill_at(true, b, j, g, x, 2) : huge_bits(c.type, x + j));
        for (std::int64_t x = 0; x < c.dv; ++x)
          p.v.set_bits(b, j, g, x, by_zero ? fill_at(false, b, j, g, x, 2) : huge_bits(c.type, x + j + 1));
      }
  // A row keeps its bits when it sees no key at or past the cut.
  const auto before_cut = [&](const attn_case& cc, std::int64_t b, std::int64_t h, std::int64_t i) {
    for (std::int64_t j = cut[static_cast<std::size_t>(b)]; j < cc.lk; ++j)
      if (cc.visible(b, h, i, j)) return false;
    return true;
  };
  {
    const auto out = s.attend(p);
    if (run_failed(out, o, "run with huge future keys")) return o;
    o.add(std::string(by_zero                ? "finite fill"
                      : c.type == dtype::f16 ? "+-65504"
                                             : "+-1e30") +
              " in K,V of keys " + std::to_string(cut[0]) + ".. (batch 0)",
          rows_claimed(s, c, base, out, [&](auto b, auto h, auto i) { return before_cut(c, b, h, i); }));
  }
  // The same through the cache, chunk by chunk: a query at position pos sees
  // the cached keys up to pos.
  if (s.has(ATTNCHECK_FEATURE_CACHE) && c.causal && !c.has_mask()) {
    const cache_plan plan = plan_cache_steps(c);
    const auto cb = s.attend_cached(c, plan), cp = s.attend_cached(p, plan);
    if (run_failed(cb, o, "cached base run") || run_failed(cp, o, "cached run with huge future keys")) return o;
    comparison r;
    std::vector<std::int64_t> filled(static_cast<std::size_t>(c.b), 0);
    std::int64_t row0 = 0;
    const std::int64_t total = cb.o.shape[1];
    for (const auto& step : plan.steps) {
      for (std::int64_t b = 0; b < c.b; ++b) filled[static_cast<std::size_t>(b)] += step.append[static_cast<std::size_t>(b)];
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t i = 0; i < step.lq; ++i) {
          const std::int64_t pos = filled[static_cast<std::size_t>(b)] - step.lq + i;
          if (pos >= cut[static_cast<std::size_t>(b)]) continue;  // sees a poisoned key
          for (std::int64_t h = 0; h < c.hq; ++h) {
            const std::string where = "cached row " + std::to_string(row0 + i) + " (position " + std::to_string(pos) + ") ";
            for (std::int64_t e = 0; e < c.dv; ++e)
              r.exact(where + o_where(b, row0 + i, h, e), cb.o.bits_at(b, row0 + i, h, e), cp.o.bits_at(b, row0 + i, h, e),
                      cb.o.at(b, row0 + i, h, e), cp.o.at(b, row0 + i, h, e));
            if (!cb.lse.empty()) {
              const auto k = static_cast<std::size_t>((b * c.hq + h) * total + row0 + i);
              r.exact(where + "LSE", std::bit_cast<std::uint32_t>(cb.lse[k]), std::bit_cast<std::uint32_t>(cp.lse[k]), cb.lse[k],
                      cp.lse[k]);
            }
          }
        }
      row0 += step.lq;
    }
    o.add("through the cache: huge values in K,V of keys " + std::to_string(cut[0]) + ".. (batch 0)", r);
  }
  // A query row's inputs reach only that row: NaN, then huge values.
  const std::int64_t i0 = rng.below(c.lq);
  for (int kind = 0; kind < 2; ++kind) {
    attn_case q = c;
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t x = 0; x < c.d; ++x) q.q.set_bits(b, i0, h, x, kind == 0 ? nan_bits(c.type) : huge_bits(c.type, x + h));
    const auto out = s.attend(q);
    if (run_failed(out, o, "poisoned query run")) return o;
    o.add(std::string(kind == 0 ? "NaN" : "huge values") + " in Q row " + std::to_string(i0),
          rows_claimed(s, c, base, out, [&](auto, auto, auto i) { return i != i0; }));
  }
  return o;
}

}  // namespace attncheck::laws
