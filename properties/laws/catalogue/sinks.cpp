// The sink laws (docs/spec.md, "Attention sinks"): a sink sigma rescales the
// output without it, O_sink = O_plain * sigmoid(LSE_plain - sigma) and
// LSE_sink = logaddexp(LSE_plain, sigma) (sigma = -inf: no sink at all), and
// shifting every score and sigma by one constant changes nothing.
#include <algorithm>
#include <cmath>
#include <limits>

#include "attncheck/case_space.hpp"
#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

}  // namespace

// Sinks on every case, drawn where the generator left them off: the mixed
// recipe (each head normal, dominating, vanishing or -inf). One case in four
// becomes a long decode row at the subject's largest size hint + 1 (a split
// of the keys: the sink must be counted once across the split's parts),
// with a sink that matters (normal or dominating, never vanishing or -inf).
void prepare_sinks(attn_case& c, const subject& s) {
  score_variants& w = c.variants;
  if (!w.has_sinks()) w.sinks = sink_kind::mixed;
  law_rng rng(c, 0x5170c);
  if (rng.below(4) != 0) return;
  std::int64_t hint = 0;
  for (std::int64_t h : hint_lengths(s))
    if (h <= 4096) hint = std::max(hint, h);
  c.b = c.lq = 1;
  c.hq = c.hkv = 1;
  c.lk = (rng.below(2) ? 1 : 2) * hint + 1;
  c.d = std::min<std::int64_t>(c.d, 64), c.dv = std::min<std::int64_t>(c.dv, 64);
  c.key_len.clear();
  c.mask_shape = {}, c.mask.clear();
  if (w.has_bias()) w.bias_shape = {1, 1, 1, w.bias_shape[3] == 1 ? 1 : c.lk};
  if (w.sinks != sink_kind::normal && w.sinks != sink_kind::high) w.sinks = rng.below(2) ? sink_kind::normal : sink_kind::high;
}

law_outcome sink_rescales_plain_output(const subject& s, const attn_case& c) {
  law_outcome o;
  if (!c.variants.has_sinks()) return o.nothing_to_judge("no sinks");
  const attn_case plain = without_variant(c, ATTNCHECK_FEATURE3_SINKS);
  const auto a = s.attend(c), b = s.attend(plain);
  if (run_failed(a, o, "with sinks") || run_failed(b, o, "without sinks")) return o;
  const oracle_result ra = fast_bound(s, c), rb = fast_bound(s, plain);
  comparison r, rl;
  r.overflow_threshold = overflow_threshold(c.type);
  rl.overflow_threshold = overflow_threshold(dtype::f32);
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const double sigma = c.sink_of(h);
        const auto kl = rb.lse_index(bi, h, i);
        const double lp = lse_of(b, c, c.lq, bi, h, i), dl = rb.lse_bound[kl];
        const double la = lse_of(a, c, c.lq, bi, h, i), dla = ra.lse_bound[ra.lse_index(bi, h, i)];
        if (rb.lse[kl] == -inf) {  // no visible key: O = 0 and LSE = sigma exactly (the empty-row rule)
          for (std::int64_t e = 0; e < c.dv; ++e)
            r.element(o_where(bi, i, h, e) + " (row sees no key)", 0.0, a.o.at(bi, i, h, e), 0.0);
          rl.element(lse_where(bi, h, i) + " (row sees no key: sigma)", sigma, la, 0.0);
          continue;
        }
        // Outside the bound's domain (a non-finite visible input, a possible
        // overflow) or a plain run the differential law already judges.
        if (!std::isfinite(dl) || !std::isfinite(dla) || !std::isfinite(lp)) {
          r.unbounded += c.dv + 1;
          continue;
        }
        // sigmoid(LSE_plain - sigma) at the subject's LSE, and how far it may lie
        // from the one at the true LSE: the logistic's slope s(1 - s) changes
        // by at most e^|t| over a step t.
        const double sig = sigma == -inf ? 1.0 : 1.0 / (1.0 + std::exp(sigma - lp));
        const double dsig = sigma == -inf ? 0.0 : std::min(1.0, sig * (1 - sig) * dl * std::exp(dl));
        bool bounded = true;
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const double xp = b.o.at(bi, i, h, e), bp = rb.o_bound[rb.o_index(bi, i, h, e)];
          const double bs = ra.o_bound[ra.o_index(bi, i, h, e)];
          const double pred = xp * sig;
          const double bound = bs + bp * sig + (std::fabs(xp) + bp) * dsig + 0x1p-50 * std::fabs(pred);
          if (!std::isfinite(bound) || !std::isfinite(pred)) {
            ++r.unbounded, bounded = false;
            continue;
          }
          r.element(o_where(bi, i, h, e) + " against O_plain * sigmoid(LSE_plain - sigma)", pred, a.o.at(bi, i, h, e), bound);
        }
        if (!bounded) continue;
        // logaddexp is 1-Lipschitz in LSE_plain.
        const double m = std::max(lp, sigma);
        const double pred = sigma == -inf ? lp : m + std::log1p(std::exp(-std::fabs(lp - sigma)));
        rl.element(lse_where(bi, h, i) + " against logaddexp(LSE_plain, sigma)", pred, la,
                   dla + dl + 0x1p-50 * (std::fabs(pred) + 1));
      }
  r.merge(rl);
  o.add("sinks against the plain run rescaled", r);
  return o;
}

// Sinks on, softcap off (a cap does not commute with a shift of the score).
void prepare_sink_shift(attn_case& c, const subject& s) {
  prepare_sinks(c, s);
  c.variants.softcap = 0;
}

law_outcome common_shift_changes_nothing(const subject& s, const attn_case& c) {
  law_outcome o;
  if (!c.variants.has_sinks() || c.variants.has_softcap()) return o.nothing_to_judge("needs sinks and no softcap");
  const auto base = s.attend(c);
  if (run_failed(base, o, "base run")) return o;
  // An extra head dimension: Q[..., D] = t_h, K[..., D] = kappa adds
  // scale * kappa * t_h (exact in binary64) to every score of head h, and
  // sigma_h moves by the same amount, rounded to f32: the rounding delta_h
  // is a sink perturbation the comparison allows for. Half the cases shift by
  // small dyadic amounts, half by 1e3..1e4 (past exp's range).
  law_rng rng(c, 0x51a4c);
  const double sc = std::fabs(static_cast<double>(c.effective_scale()));
  const bool big = rng.below(2) == 1 && sc > 0;
  double kappa = 1.0;
  if (big)
    kappa = std::clamp(std::exp2(std::round(std::log2(std::sqrt(3e3 / sc)))), c.type == dtype::f16 ? 0x1p-14 : 0x1p-100,
                       c.type == dtype::f16 ? 0x1p14 : 0x1p100);
  const double tiny = c.type == dtype::f16 ? 0x1p-14 : 0x1p-126, top = largest_finite(c.type) / 2;
  std::vector<double> t(static_cast<std::size_t>(c.hq)), shift(t.size()), delta(t.size(), 0.0);
  attn_case p = c;
  p.d = c.d + 1;
  p.scale = c.effective_scale();
  for (std::size_t h = 0; h < t.size(); ++h) {
    t[h] = static_cast<double>(rng.below(33) - 16) / 2;
    if (big) {
      const double target = (1e3 + 9e3 * static_cast<double>(rng.below(1024)) / 1024.0) * (rng.below(2) ? -1 : 1);
      const double want = target / (static_cast<double>(c.effective_scale()) * kappa);
      const int e = std::ilogb(want);
      const double q = std::ldexp(std::round(std::ldexp(want, 3 - e)), e - 3);  // 4 significant bits
      if (std::fabs(q) >= tiny && std::fabs(q) <= top) t[h] = q;
    }
    shift[h] = static_cast<double>(c.effective_scale()) * kappa * t[h];
    const double sigma = c.variants.sink_logits[h];
    if (std::isfinite(sigma)) {
      const float moved = static_cast<float>(sigma + shift[h]);
      p.variants.sink_logits[h] = moved;
      delta[h] = static_cast<double>(moved) - (sigma + shift[h]);
      if (!std::isfinite(moved)) return o.nothing_to_judge("a shifted sink overflows f32");
    }
  }
  p.q = remake(c.type, {c.b, c.lq, c.hq, c.d + 1}, c.layout, [&](auto b, auto i, auto h, auto x) {
    return x < c.d ? c.q.bits_at(b, i, h, x) : encode(c.type, t[static_cast<std::size_t>(h)]);
  });
  p.k = remake(c.type, {c.b, c.lk, c.hkv, c.d + 1}, c.layout,
               [&](auto b, auto j, auto g, auto x) { return x < c.d ? c.k.bits_at(b, j, g, x) : encode(c.type, kappa); });
  const auto out = s.attend(p);
  if (run_failed(out, o, "shifted run")) return o;
  const oracle_result ra = fast_bound(s, c), rb = fast_bound(s, p);
  const double vmax = max_abs_v(c);
  within_bounds_options opt;
  // A sink logit off by delta moves each weight's share by at most |delta| e^|delta| / 4.
  opt.o_gap = [&](std::int64_t, std::int64_t h, std::int64_t) {
    const double d = std::fabs(delta[static_cast<std::size_t>(h)]);
    return d == 0 ? 0.0 : 2 * vmax * std::min(1.0, d * std::exp(d));
  };
  opt.lse_gap = [&](std::int64_t, std::int64_t h, std::int64_t) { return std::fabs(delta[static_cast<std::size_t>(h)]); };
  opt.lse_offset = [&](std::int64_t, std::int64_t h, std::int64_t) { return shift[static_cast<std::size_t>(h)]; };
  o.add(std::string("every score and sigma shifted by scale * kappa * t_h") + (big ? " (1e3..1e4)" : ""),
        compare_within_bounds(c, base, ra, out, rb, opt));
  return o;
}

std::string sinks_and_lse(const subject& s) {
  if (!(s.features_v3() & ATTNCHECK_FEATURE3_SINKS)) return "subject does not declare sinks";
  return s.has_lse() ? "" : "subject has no LSE";
}

}  // namespace attncheck::laws
