#include "error_bound.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace attncheck::oracle_detail {

compute_range compute_range_of(double u_compute) {
  if (u_compute >= 0x1p-24) return {0x1p-149, 0x1.fffffep127};
  return {std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max()};
}

double gamma_n(double n, double u) {
  const double nu = n * u;
  return nu < 1 ? nu / (1 - nu) : std::numeric_limits<double>::infinity();
}

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// An analytic term that came out NaN from 0 * inf (finite inputs) is unbounded.
double unbounded_if_nan(double x) { return std::isnan(x) ? inf : x; }

// What the bound needs of one key of a row, all in double.
struct key_terms {
  std::int64_t j;
  double p;      // P_j (oracle, rounded to double)
  double phi;    // Phi_j of SPEC.md plus the dot-product underflow term
  double pk;     // P_j * expm1(Phi_j): the key's weight perturbation, exactly amplified
};

}  // namespace

void fill_bounds(const attn_case& c, const oracle_options& opt, const std::vector<double>& gap,
                 const std::vector<double>& log_sum, oracle_result& r) {
  namespace k = bound_constants;
  if (!(opt.bound.u_compute > 0 && opt.bound.u_compute < 1))
    throw input_error("bound.u_compute", "must lie in (0, 1), e.g. 2^-24 for f32");
  if (!(opt.bound.exp_ulps >= 0 && std::isfinite(opt.bound.exp_ulps)))
    throw input_error("bound.exp_ulps", "must be finite and >= 0");
  if (opt.bound.key_blocks < 1) throw input_error("bound.key_blocks", "must be >= 1 (one block: no rescale)");
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  const double u = opt.bound.u_compute;
  const double c_exp = opt.bound.exp_ulps;
  const double nb = static_cast<double>(opt.bound.key_blocks);
  const double u_out = unit_roundoff(opt.out_type);
  const double eta_out = smallest_subnormal(opt.out_type);
  const double u_lse = unit_roundoff(k::lse_type);
  const double eta_lse = smallest_subnormal(k::lse_type);
  const double lse_max = largest_finite(k::lse_type);
  const compute_range range = compute_range_of(u);
  const double eta_c = range.smallest_subnormal;
  const double g_dot = gamma_n(static_cast<double>(c.d) + 2, u);
  const double g_sum = gamma_n(static_cast<double>(c.lk) + nb + 1, u);
  const double scale = std::fabs(static_cast<double>(c.effective_scale()));
  const double f = k::safety_factor;
  // A declared precision too coarse for these lengths (n u >= 1) has no bound.
  const bool in_domain = std::isfinite(g_dot) && std::isfinite(g_sum);

  r.o_bound.assign(r.o.size(), 0.0);
  r.lse_bound.assign(r.lse.size(), 0.0);
  std::vector<key_terms> keys;
  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    for (std::int64_t h = 0; h < c.hq; ++h) {
      const std::int64_t g = c.kv_head(h);
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::size_t row = r.lse_index(bi, h, i);
        keys.clear();
        bool scores_finite = true;
        double worst_partial = 0;  // largest |partial dot| the subject can hold
        double worst_score_error = 0;  // max_j |S_hat_j - S_j| <= gamma_(D+2) T_j + underflow
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(bi, h, i, j)) continue;
          double raw = 0, q_abs = 0, k_abs = 0, qk_max = 0;
          for (std::int64_t d = 0; d < c.d; ++d) {
            const double qd = std::fabs(c.q.at(bi, i, h, d)), kd = std::fabs(c.k.at(bi, j, g, d));
            raw += qd * kd;
            q_abs += qd;
            k_abs += kd;
            qk_max = std::max({qk_max, qd, kd});
          }
          // SPEC allows the scale folded into Q or K first: scale * q_d or
          // scale * k_d must not overflow either, even where every product is finite.
          worst_partial = std::max(worst_partial, scale * qk_max);
          const double t = scale * raw;  // T_j of SPEC.md
          // Underflow in the dot product: each of the D products and the scale
          // multiply may round to a subnormal (error <= eta_c/2 each, in raw
          // units times |scale|); a scale folded into Q or K first rounds
          // scale*q_d (or scale*k_d) with error <= eta_c/2, times |k_d| (|q_d|).
          // Sums of subnormals are exact (gradual underflow).
          const double dot_underflow =
              eta_c / 2 * ((static_cast<double>(c.d) + 1) * scale + 1 + q_abs + k_abs);
          const double gap_j = gap[row * n(c.lk) + n(j)];
          const double p_j = r.p[r.p_index(bi, h, i, j)];
          if (!std::isfinite(raw) || !std::isfinite(t) || !std::isfinite(dot_underflow) ||
              !std::isfinite(gap_j) || !std::isfinite(p_j)) {
            scores_finite = false;
          }
          worst_partial = std::max({worst_partial, raw, t});
          worst_score_error = std::max(worst_score_error, g_dot * t + dot_underflow);
          const double phi = g_dot * t + 2 * u * gap_j + (c_exp + 2) * u * (nb + 1) + g_sum + dot_underflow;
          // P_j * (exp(Phi_j) - 1); when P_j underflowed in double, the same
          // product from logs, so a far key never turns 0 * inf into NaN.
          const double pk = p_j > 0 ? p_j * std::expm1(phi) : std::exp(phi - gap_j - log_sum[row]);
          keys.push_back({j, p_j, phi, pk});
        }
        if (keys.empty()) continue;  // bounds stay 0: O exactly 0, LSE exactly -inf

        const double nv = static_cast<double>(keys.size());
        double b = 0, phi_bar = 0;
        for (const key_terms& kt : keys) {
          b += kt.pk;
          phi_bar += kt.p * kt.phi;
        }
        b = unbounded_if_nan(b);
        phi_bar = unbounded_if_nan(phi_bar);
        const bool scores_may_overflow = worst_partial > range.largest_finite / k::overflow_headroom;
        const bool unbounded = !in_domain || scores_may_overflow;

        // LSE = m + log L: the weights' log-perturbation averages to at most
        // log1p(b) (Jensen); log and the final add round relative to their results.
        const double lse = r.lse[row];
        double lse_bound = nan;
        if (scores_finite && std::isfinite(lse)) {
          lse_bound = f * (std::log1p(b) + c_exp * u * std::fabs(log_sum[row]) + (u + u_lse) * std::fabs(lse)) +
                      f * eta_c * (nb + 2) * nv + eta_lse / 2;
          // Any weights: LSE_hat and LSE both lie within log(n) above their
          // maxima m_hat and m, which differ by at most one score's error.
          const double hull = f * (worst_score_error + std::log(nv) + 2 * g_sum + c_exp * u +
                                   (u + u_lse) * std::fabs(lse)) +
                              eta_lse / 2;
          lse_bound = std::min(unbounded_if_nan(lse_bound), g_sum <= k::hull_gamma_limit ? hull : inf);
          if (unbounded || std::fabs(lse) + lse_bound > lse_max) lse_bound = inf;
        }
        r.lse_bound[row] = lse_bound;

        for (std::int64_t e = 0; e < c.dv; ++e) {
          const std::size_t oi = r.o_index(bi, i, h, e);
          const double o_abs = std::fabs(r.o[oi]);
          double weighted = 0, v_sum = 0, v_max = 0;
          for (const key_terms& kt : keys) {
            const double v = std::fabs(c.v.at(bi, kt.j, g, e));
            if (kt.pk > 0 && v > 0) weighted += kt.pk * v;  // never 0 * inf
            v_sum += v;
            v_max = std::max(v_max, v);
          }
          if (!scores_finite || !std::isfinite(v_sum) || !std::isfinite(o_abs)) {
            r.o_bound[oi] = nan;
            continue;
          }
          // Numerator and denominator weights perturbed by factors in
          // [exp(-Phi_j), exp(Phi_j)]; the denominator is >= exp(-phi_bar).
          const double analytic = unbounded_if_nan(
              f * ((weighted + o_abs * b) * std::exp(phi_bar) + (u + u_out) * o_abs) +
              f * eta_c * ((nb + 2) * (v_sum + nv * o_abs) + (nv + 1) / 2) + eta_out / 2);
          // Any weights: O_hat is a normalized combination of the visible V.
          const double hull =
              g_sum <= k::hull_gamma_limit ? o_abs + f * (v_max + eta_c * (nv + 1)) + eta_out / 2 : inf;
          double bound = std::min(analytic, hull);
          const bool accumulator_may_overflow = nv * v_max > range.largest_finite / k::overflow_headroom;
          // |O| + bound past the output type's largest value stays finite: the
          // element may then round to +-inf, which check.cpp accepts (docs/bound.md).
          if (unbounded || accumulator_may_overflow) bound = inf;
          r.o_bound[oi] = bound;
        }
      }
    }
  }
}

}  // namespace attncheck::oracle_detail
