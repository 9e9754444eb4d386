// The softcap laws (docs/spec.md, "Logit softcap"): with V = identity the
// weights are no larger (and no smaller) than scores capped at +-c allow, and
// a cap far above every score equals no cap.
#include <algorithm>
#include <cmath>
#include <limits>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

void prepare_distribution(attn_case& c, const subject& s);  // softmax.cpp: V = identity needs Dv = Lk <= 24

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

}  // namespace

// A cap on every case, from below typical scores to above them.
void prepare_capped(attn_case& c, const subject& s) {
  prepare_distribution(c, s);
  if (c.variants.has_bias() && c.variants.bias_shape[3] != 1) c.variants.bias_shape[3] = c.lk;
  if (!c.variants.has_softcap()) {
    law_rng rng(c, 0xcab);
    constexpr float caps[] = {0.5f, 1, 2, 5};
    c.variants.softcap = caps[rng.below(4)];
  }
}

namespace {

// log(sum_k exp(x_k)) over finite-or--inf terms.
double log_sum_exp(const std::vector<double>& x) {
  double m = -inf;
  for (double v : x) m = std::max(m, v);
  if (m == -inf) return -inf;
  double s = 0;
  for (double v : x) s += std::exp(v - m);
  return m + std::log(s);
}

}  // namespace

law_outcome weights_within_capped_range(const subject& s, const attn_case& c) {
  law_outcome o;
  if (!c.variants.has_softcap()) return o.nothing_to_judge("no softcap");
  // V = identity: output row i of head h is the weight row P[b,h,i,:].
  attn_case id = c;
  id.dv = c.lk;
  id.v = remake(c.type, {c.b, c.lk, c.hkv, c.lk}, c.layout,
                [&](auto, auto j, auto, auto e) { return encode(c.type, j == e ? 1.0 : 0.0); });
  const auto out = s.attend(id);
  if (run_failed(out, o, "V = identity")) return o;
  const oracle_result ref = fast_bound(s, id);
  const double cap = static_cast<double>(c.variants.softcap);
  comparison r;
  std::vector<std::int64_t> keys;
  std::vector<double> hi_terms, lo_terms;
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        keys.clear();
        for (std::int64_t j = 0; j < c.lk; ++j)
          if (c.visible(bi, h, i, j)) keys.push_back(j);
        if (keys.size() < 2) continue;  // one key: weight 1 (or its sink share) whatever the cap
        // Every capped score lies in [-c, c]; the positional terms t_j (ALiBi,
        // bias) are exact. The weight of key j is largest with its score at
        // +c and every other at -c, smallest the other way round.
        const double sigma = c.sink_of(h);
        for (std::int64_t j : keys) {
          const double tj = c.alibi_at(bi, h, i, j) + c.bias_at(bi, h, i, j);
          hi_terms.assign(1, sigma), lo_terms.assign(1, sigma);
          for (std::int64_t k : keys) {
            const double tk = c.alibi_at(bi, h, i, k) + c.bias_at(bi, h, i, k);
            hi_terms.push_back((k == j ? cap : -cap) + tk);
            lo_terms.push_back((k == j ? -cap : cap) + tk);
          }
          const double hi = std::exp(cap + tj - log_sum_exp(hi_terms)), lo = std::exp(-cap + tj - log_sum_exp(lo_terms));
          const auto k = ref.o_index(bi, i, h, j);
          // The binary64 evaluation of hi and lo: a few dozen roundings of 2^-53 each.
          const double bound = ref.o_bound[k] + 0x1p-40 * hi;
          if (!std::isfinite(bound) || std::isnan(hi) || std::isnan(lo)) {
            ++r.unbounded;
            continue;
          }
          const double w = out.o.at(bi, i, h, j);
          r.element(o_where(bi, i, h, j) + " (weight of key " + std::to_string(j) + ") within [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]",
                    std::clamp(w, lo, hi), w, bound);
        }
      }
  if (r.compared == 0) o.nothing_to_judge("no row sees two keys");
  o.add("V = identity: weights within what scores capped at +-" + std::to_string(cap) + " allow", r);
  return o;
}

law_outcome far_cap_equals_none(const subject& s, const attn_case& c) {
  law_outcome o;
  // |x| <= |scale| sum_d |q_d| |k_d| bounds every scaled score; with the cap
  // c >= 2^20 of that, c tanh(x / c) - x is at most |x|^3 / (3 c^2) <= 2^-40 |x|,
  // which the comparison allows for (|dO| <= 2 max|V| max|dS|, |dLSE| <= max|dS|).
  double xmax = 0;
  const double sc = std::fabs(static_cast<double>(c.effective_scale()));
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(bi, h, i, j)) continue;
          double raw = 0;
          for (std::int64_t d = 0; d < c.d; ++d)
            raw += std::fabs(c.q_value(bi, i, h, d)) * std::fabs(c.k_value(bi, j, c.kv_head(h), d));
          xmax = std::max(xmax, sc * raw);
        }
  if (!std::isfinite(xmax) || xmax > 0x1p90)
    return o.nothing_to_judge("scores too large (or not finite) for a cap far above them in f32");
  const double cap = std::exp2(std::ceil(std::log2(std::max(xmax, 0x1p-60) * 0x1p20)));
  attn_case a = c, b = without_variant(c, ATTNCHECK_FEATURE3_SOFTCAP);
  a.variants.softcap = static_cast<float>(cap);
  const double ds = xmax * 0x1p-40, vmax = max_abs_v(c);
  within_bounds_options opt;
  opt.o_gap = [&](std::int64_t, std::int64_t, std::int64_t) { return 2 * vmax * ds; };
  opt.lse_gap = [&](std::int64_t, std::int64_t, std::int64_t) { return ds; };
  add_runs_within_bounds(o, s, a, "far cap", b, "no cap",
                         "cap " + std::to_string(cap) + " (2^20 above every |score|) against no cap", opt);
  return o;
}

}  // namespace attncheck::laws
