// The backward bound of docs/bound.md "Backward", per element of dQ, dK and
// dV, from the MPFR oracle's P, O, LSE, dP - D and dS. The forward bound's
// pieces (bound_setup, gamma_n, the dot-product and underflow terms, the
// overflow headroom) are reused as they are; nothing of the forward changes.
#include "backward_bound.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "../oracle/dense_inputs.hpp"
#include "../oracle/error_bound.hpp"

namespace attncheck::oracle_detail {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

std::size_t z(std::int64_t x) { return static_cast<std::size_t>(x); }

// What the rows that see one key (b, KV head, j) add to its dK and dV terms.
struct key_sums {
  double m = 0;            // rows (over the KV head's G query heads) that see the key
  double ds_abs_sum = 0;   // sum_r |dS_hat_rj| (upper bound)
  bool no_bound = false;   // a row that sees it has a non-finite input: NaN
  bool unbounded = false;  // a row that sees it may overflow: +inf
};

}  // namespace

void check_backward_bound_params(const backward_bound_params& bp) {
  if (!(bp.u_compute > 0 && bp.u_compute < 1)) throw input_error("bound.u_compute", "must lie in (0, 1), e.g. 2^-24 for f32");
  if (!(bp.exp_ulps >= 0 && std::isfinite(bp.exp_ulps))) throw input_error("bound.exp_ulps", "must be finite and >= 0");
  if (!(bp.tanh_ulps >= 0 && std::isfinite(bp.tanh_ulps))) throw input_error("bound.tanh_ulps", "must be finite and >= 0");
  if (bp.dq_blocks < 1) throw input_error("bound.dq_blocks", "must be >= 1 (the key blocks summed into dQ)");
  if (bp.dkv_blocks < 1) throw input_error("bound.dkv_blocks", "must be >= 1 (the query blocks summed into dK and dV)");
}

void fill_backward_bounds(const attn_case& c, const tensor& d_o, const naive_result<mpfr50>& fwd, const backward_bound_params& bp,
                          backward_result& r, const backward_handed_errors* handed) {
  check_backward_bound_params(bp);
  oracle_options opt;
  opt.bound.u_compute = bp.u_compute;
  opt.bound.exp_ulps = bp.exp_ulps;
  opt.bound.tanh_ulps = bp.tanh_ulps;
  opt.out_type = c.type;  // dQ, dK, dV and the handed-in O are stored in the case's type
  const bound_setup s = make_bound_setup(c, opt);
  const dense_inputs x = decode_dense(c);

  const double u = s.u, f = s.f, half_eta = s.eta_c / 2, scale = s.scale;
  const double big = s.largest_c / bound_constants::overflow_headroom;
  const double dd = static_cast<double>(c.d), dv = static_cast<double>(c.dv);
  const double nk = static_cast<double>(bp.dq_blocks), nq = static_cast<double>(bp.dkv_blocks);
  const double g_dot = gamma_n(dd + 5, u);   // the score, as the forward's step 1
  const double g_dv = gamma_n(dv, u);        // dP_j and D = rowsum(dO O_in): Dv products and Dv - 1 additions
  const double g_sub = gamma_n(2, u);        // S_hat - LSE_in: the subtraction, and a log2(e) multiply of it
  const double g_exp = gamma_n(s.c_exp, u);  // exp's own error as a log-perturbation
  const score_variants& w = c.variants;
  const bool variant_scores = w.has_softcap() || w.has_alibi() || w.has_bias();
  const double cap = static_cast<double>(w.softcap);
  const mpfr50 scale_m = mpfr50(static_cast<double>(c.effective_scale())), cap_m = mpfr50(cap);
  // The handed-in O: the oracle's rounded once to the storage type, or within
  // handed->o of the exact O (the subject's own forward, its o_bound).
  const auto o_in_error = [&](double o, std::size_t at) {
    return handed ? handed->o[at] : s.u_out * std::fabs(o) + s.eta_out / 2;
  };
  // The element's bound from its compute-type error ec: F ec, then the one
  // rounding to the storage type (exact, not multiplied by F). Where the
  // interval reaches the storage type's overflow, the subject may return an
  // infinity of either sign (a gradient's sign is not fixed near 0, unlike O's):
  // +inf, out of the judged domain, so that no comparison demands a sign.
  const double out_max = largest_finite(c.type);
  const auto element_bound = [&](double ec, double value) {
    const double b = f * ec + s.u_out * (std::fabs(value) + f * ec) + s.eta_out / 2;
    return std::fabs(value) + b >= out_max ? inf : b;
  };

  r.dq_bound.assign(r.dq.size(), 0.0);
  r.dk_bound.assign(r.dk.size(), 0.0);
  r.dv_bound.assign(r.dv.size(), 0.0);
  const std::size_t keys_total = z(c.b * c.hkv * c.lk);
  std::vector<key_sums> ks(keys_total);
  // Per key and column: sum_r E_dS |Q_rd|, sum_r |dS_hat| |Q_rd|, sum_r |Q_rd|;
  // sum_r E_P |dO_re|, sum_r |P_hat| |dO_re|.
  std::vector<double> dk_err(keys_total * z(c.d)), dk_mag(dk_err.size()), dk_qsum(dk_err.size());
  std::vector<double> dv_err(keys_total * z(c.dv)), dv_mag(dv_err.size());
  // Per query head with a sink (step 8): sum_r E_term, sum_r |term_hi|, rows, and the head's state.
  std::vector<key_sums> sink_sums(w.has_sinks() ? z(c.hq) : 0);
  std::vector<double> sink_err(sink_sums.size(), 0.0), sink_mag(sink_sums.size(), 0.0);

  std::vector<std::int64_t> keys;
  std::vector<double> d_out(z(c.dv)), e_ds, ds_hi, e_p, p_hi;
  std::vector<mpfr50> d_out_m(z(c.dv));
  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    for (std::int64_t h = 0; h < c.hq; ++h) {
      const std::int64_t g = c.kv_head(h);
      const std::size_t kb = x.key_base(c, bi, g);
      const double sigma = c.sink_of(h);
      key_sums* sink = sink_sums.empty() || !(sigma > -inf) ? nullptr : &sink_sums[z(h)];
      for (std::int64_t i = 0; i < c.lq; ++i) {
        visible_keys(c, bi, h, i, keys);
        if (keys.empty()) continue;  // dQ must be exactly 0; the row adds nothing to dK, dV or d(sink)
        const std::size_t row = z((bi * c.hq + h) * c.lq + i);
        const std::size_t nkeys = keys.size();
        const double n = static_cast<double>(nkeys);
        double* dq_b = &r.dq_bound[z(((bi * c.lq + i) * c.hq + h) * c.d)];
        const double* dq_v = &r.dq[z(((bi * c.lq + i) * c.hq + h) * c.d)];
        const double* q = x.q_row(c, bi, i, h);

        // Non-finite visible inputs: no bound for the row's dQ and its keys' dK, dV.
        bool finite = true;
        for (std::int64_t e = 0; e < c.dv; ++e) {
          d_out[z(e)] = d_o.at(bi, i, h, e);
          finite = finite && std::isfinite(d_out[z(e)]);
        }
        for (std::int64_t d = 0; d < c.d; ++d) finite = finite && std::isfinite(q[d]);
        for (const std::int64_t j : keys) {
          for (std::int64_t d = 0; d < c.d; ++d) finite = finite && std::isfinite(x.k[(kb + z(j)) * z(c.d) + z(d)]);
          for (std::int64_t e = 0; e < c.dv; ++e) finite = finite && std::isfinite(x.v[(kb + z(j)) * z(c.dv) + z(e)]);
          finite = finite && std::isfinite(c.bias_at(bi, h, i, j));  // +inf or NaN bias: no bound (-inf hides the key)
        }
        // Handed O and LSE errors: NaN (the forward has no bound: no bound here
        // either) or +inf (the forward's analysis says nothing: nor does this one).
        bool handed_unbounded = false;
        if (handed) {
          const auto take = [&](double e) {
            finite = finite && !std::isnan(e);
            handed_unbounded = handed_unbounded || std::isinf(e);
          };
          take(handed->lse[row]);
          for (std::int64_t e = 0; e < c.dv; ++e) take(handed->o[z(((bi * c.lq + i) * c.hq + h) * c.dv + e)]);
        }
        if (!finite) {
          for (std::int64_t d = 0; d < c.d; ++d) dq_b[d] = nan;
          for (const std::int64_t j : keys) ks[kb + z(j)].no_bound = true;
          if (sink) sink->no_bound = true;
          continue;
        }

        // D = rowsum(dO O) from the handed-in O (step 3, variant a).
        const double lse = static_cast<double>(fwd.lse[row]);
        const double log_sum = fwd.log_sum[row];
        mpfr50 big_d = 0;
        double e_d_a = dv * half_eta, do_o_in = 0, q_abs_sum = 0, q_abs_max = 0;
        for (std::int64_t e = 0; e < c.dv; ++e) {
          d_out_m[z(e)] = mpfr50(d_out[z(e)]);
          const std::size_t at = z(((bi * c.lq + i) * c.hq + h) * c.dv + e);
          const mpfr50& o_m = fwd.o[at];
          big_d += d_out_m[z(e)] * o_m;
          const double o = std::fabs(static_cast<double>(o_m)), a = std::fabs(d_out[z(e)]);
          const double e_o = o_in_error(o, at);
          e_d_a += a * e_o;
          do_o_in += a * (o + e_o);
        }
        e_d_a += g_dv * do_o_in;
        for (std::int64_t d = 0; d < c.d; ++d) {
          q_abs_sum += std::fabs(q[d]);
          q_abs_max = std::max(q_abs_max, std::fabs(q[d]));
        }
        // LSE_in = fl32(LSE), and a kernel may multiply it by log2(e): (u_lse + u) |LSE|.
        // A handed LSE within e_h of LSE: e_h, and the multiply's u |LSE_in| <= u (|LSE| + e_h).
        const double e_l =
            handed ? handed->lse[row] + u * (std::fabs(lse) + handed->lse[row]) : (s.u_lse + u) * std::fabs(lse) + s.eta_lse / 2;

        // Per key: the weight's error (step 1), dP (step 2), and the terms of D's variant b.
        e_ds.assign(nkeys, 0.0);
        ds_hi.assign(nkeys, 0.0);
        e_p.assign(nkeys, 0.0);
        p_hi.assign(nkeys, 0.0);
        std::vector<double> delta(nkeys), dp_abs(nkeys), e_dp(nkeys), ds(nkeys), p(nkeys);
        // With a softcap (step 4b): g_j = 1 - tanh^2(x_j / c) and the bound e_g_j on the kernel's g_hat_j.
        std::vector<double> soft_g(nkeys, 1.0), soft_e(nkeys, 0.0);
        double worst = 0, e_d_b = n * half_eta, pdp_sum = 0;
        for (std::size_t kk = 0; kk < nkeys; ++kk) {
          const std::int64_t j = keys[kk];
          const std::size_t key = kb + z(j);
          const double* k = &x.k[key * z(c.d)];
          const double raw = abs_dot(q, k, c.d);
          const double t_j = scale * raw;
          worst = std::max({worst, raw, t_j, scale * std::max(q_abs_max, x.k_abs_max[key])});
          const double zeta = half_eta * ((dd + 1) * scale + 1 + q_abs_sum + x.k_abs_sum[key]);
          double sigma = g_dot * t_j + zeta;  // |S_hat_j - S_j|
          if (variant_scores) {
            // The variants' terms of the score (the forward bound's own: softcap, ALiBi, bias).
            const variant_score vs = variant_score_terms(s, c, bi, h, i, j, t_j);
            worst = std::max(worst, vs.magnitude);
            if (w.has_softcap()) {
              // t = tanh(x / c) as the kernel evaluates it: its argument off by the
              // score's error e_x plus the division's (2u: x times a rounded 1/c),
              // tanh 1-Lipschitz, then its own c_tanh ulps (2 c_tanh u |t|), or t
              // recovered from the capped score c tanh divided by c (2u |t| more).
              const double e_x = sigma;
              const double t_cap = std::min(1.0, (t_j + e_x) / cap);
              const double e_arg = (e_x + 2 * u * (t_j + e_x)) / cap + s.eta_c;
              const double e_t = e_arg + (2 * s.c_tanh + 2) * u * t_cap + 2 * s.eta_c;
              // g = 1 - t^2 in at most three roundings (t^2, the subtraction, or an fma): |t_hat^2 - t^2| + gamma_3.
              mpfr50 dot = 0;
              for (std::int64_t d = 0; d < c.d; ++d) dot += mpfr50(q[d]) * mpfr50(k[d]);
              const mpfr50 th = tanh(scale_m * dot / cap_m);
              soft_g[kk] = static_cast<double>(mpfr50(1) - th * th);
              soft_e[kk] = e_t * (2 * t_cap + e_t) + gamma_n(3, u) * (1 + t_cap * t_cap) + s.eta_c;
            }
            sigma += vs.error;
          }
          const double dist = fwd.gap[row * z(c.lk) + z(j)] + log_sum;  // |S_j - LSE| = (m - S_j) + log L
          const double psi = sigma + e_l + g_sub * (dist + sigma + e_l) + g_exp;
          const mpfr50& p_m = fwd.p[row * z(c.lk) + z(j)];
          p[kk] = static_cast<double>(p_m);
          // |P_hat - P| <= P expm1(Psi) + eta_c / 2 (exp may underflow); from logs where P underflowed in double.
          const double pk = p[kk] > 0 ? p[kk] * std::expm1(psi) : std::exp(psi - dist);
          e_p[kk] = pk + half_eta;
          p_hi[kk] = p[kk] + e_p[kk];
          mpfr50 dp = 0;
          double mp = 0;
          for (std::int64_t e = 0; e < c.dv; ++e) {
            const double v = x.v[key * z(c.dv) + z(e)];
            dp += d_out_m[z(e)] * mpfr50(v);
            mp += std::fabs(d_out[z(e)]) * std::fabs(v);
          }
          const mpfr50 diff = dp - big_d;
          delta[kk] = static_cast<double>(diff);
          ds[kk] = static_cast<double>(p_m * diff);
          dp_abs[kk] = std::fabs(static_cast<double>(dp));
          e_dp[kk] = g_dv * mp + dv * half_eta;
          worst = std::max(worst, mp);
          e_d_b += e_p[kk] * (dp_abs[kk] + e_dp[kk]) + p[kk] * e_dp[kk];
          pdp_sum += p_hi[kk] * (dp_abs[kk] + e_dp[kk]);
        }
        // D = sum_j P_hat dP_hat (variant b): n products and n - 1 additions.
        const double g_n = gamma_n(n, u);
        e_d_b += g_n * pdp_sum;
        const double e_d = std::max(e_d_a, e_d_b);
        worst = std::max({worst, do_o_in, pdp_sum});
        // dS (step 4).
        bool terms_finite = true;
        for (std::size_t kk = 0; kk < nkeys; ++kk) {
          const double e_delta = (1 + u) * (e_dp[kk] + e_d) + u * std::fabs(delta[kk]);
          const double a = std::fabs(delta[kk]) + e_delta;  // >= |fl(dP_hat - D_hat)|
          // A kernel may fold the scale into dS before its products with K and
          // Q (g_j = scale P_j (dP_j - D), as autograd's fused order and the
          // Triton tutorial's backward do): scale a >= |scale dS_hat| and
          // |scale fl(dP_hat - D_hat)| must stay in range too.
          worst = std::max({worst, a, scale * a});
          if (w.has_softcap()) {
            // dX = P (dP - D) g: the kernel's three factors, each within its error,
            // multiplied in any order (gamma_2), with one underflow each.
            const double g_hi = soft_g[kk] + soft_e[kk];
            e_ds[kk] = g_hi * (e_p[kk] * a + p[kk] * e_delta) + p_hi[kk] * a * soft_e[kk] + gamma_n(2, u) * p_hi[kk] * a * g_hi +
                       2 * half_eta;
            ds[kk] *= soft_g[kk];
          } else {
            e_ds[kk] = e_p[kk] * a + p[kk] * e_delta + u * p_hi[kk] * a + half_eta;
          }
          ds_hi[kk] = std::fabs(ds[kk]) + e_ds[kk];
          // A weight's error that is not finite (Psi_j huge: |LSE| near 1e38) bounds nothing,
          // and would turn 0 * inf into NaN below: the row is unbounded, not unboundable.
          terms_finite = terms_finite && std::isfinite(e_ds[kk]) && std::isfinite(p_hi[kk]);
        }
        const bool row_unbounded = handed_unbounded || worst > big || !terms_finite || !std::isfinite(g_dot) ||
                                   !std::isfinite(g_dv) || !std::isfinite(g_n) || !std::isfinite(g_exp) || !std::isfinite(e_d);
        if (row_unbounded) {
          for (std::int64_t d = 0; d < c.d; ++d) dq_b[d] = inf;
          for (const std::int64_t j : keys) ks[kb + z(j)].unbounded = true;
          if (sink) sink->unbounded = true;
          continue;
        }
        if (sink) {
          // d(sink) (step 8): this row's term -P_sink D, P_sink = exp(sigma - LSE_in)
          // with the weights' error (sigma exact, no score error), D within e_d.
          const mpfr50 p_s = exp(mpfr50(sigma) - fwd.lse[row]);
          const double ps = static_cast<double>(p_s), dist_s = std::fabs(static_cast<double>(fwd.lse[row] - mpfr50(sigma)));
          const double psi_s = e_l + g_sub * (dist_s + e_l) + g_exp;
          const double e_ps = (ps > 0 ? ps * std::expm1(psi_s) : std::exp(psi_s - dist_s)) + half_eta;
          const double d_abs = std::fabs(static_cast<double>(big_d)), d_hi = d_abs + e_d;
          sink->m += 1;
          sink_err[z(h)] += e_ps * d_hi + ps * e_d + u * (ps + e_ps) * d_hi + half_eta;
          sink_mag[z(h)] += (ps + e_ps) * d_hi;
          if (!std::isfinite(e_ps) || !std::isfinite(sink_err[z(h)])) sink->unbounded = true;
        }

        // dQ (step 5): n products, at most n - 1 additions inside and across the nk blocks, the scale.
        const double g_q = gamma_n(n + nk + 1, u);
        double ds_sum = 0;
        for (std::size_t kk = 0; kk < nkeys; ++kk) ds_sum += ds_hi[kk];
        for (std::int64_t d = 0; d < c.d; ++d) {
          double err = 0, mag = 0, k_sum = 0;
          for (std::size_t kk = 0; kk < nkeys; ++kk) {
            const double a = std::fabs(x.k[(kb + z(keys[kk])) * z(c.d) + z(d)]);
            err += e_ds[kk] * a;
            mag += ds_hi[kk] * a;
            k_sum += a;
          }
          if (!std::isfinite(g_q) || std::max(1.0, scale) * mag > big) {
            dq_b[d] = inf;
            continue;
          }
          const double ec = scale * (err + g_q * mag) + half_eta * (n * (scale + 1) + 1 + k_sum + ds_sum);
          dq_b[d] = element_bound(ec, dq_v[d]);
        }

        // dK and dV (steps 6, 7): this row's terms of every key it sees.
        for (std::size_t kk = 0; kk < nkeys; ++kk) {
          const std::size_t key = kb + z(keys[kk]);
          key_sums& t = ks[key];
          t.m += 1;
          t.ds_abs_sum += ds_hi[kk];
          for (std::int64_t d = 0; d < c.d; ++d) {
            const double a = std::fabs(q[d]);
            dk_err[key * z(c.d) + z(d)] += e_ds[kk] * a;
            dk_mag[key * z(c.d) + z(d)] += ds_hi[kk] * a;
            dk_qsum[key * z(c.d) + z(d)] += a;
          }
          for (std::int64_t e = 0; e < c.dv; ++e) {
            const double a = std::fabs(d_out[z(e)]);
            dv_err[key * z(c.dv) + z(e)] += e_p[kk] * a;
            dv_mag[key * z(c.dv) + z(e)] += p_hi[kk] * a;
          }
        }
      }
    }
  }

  // d(sink)_h (step 8): the sum of its rows' terms in any order (gamma_(m+1)),
  // returned in f32 whatever the storage type. A head whose sink is -inf, or
  // whose rows see no key, must return exactly 0.
  if (w.has_sinks()) {
    constexpr double u32 = 0x1p-24, eta32 = 0x1p-149, max32 = 0x1.fffffep127;
    r.d_sinks_bound.assign(r.d_sinks.size(), 0.0);
    for (std::size_t h = 0; h < sink_sums.size(); ++h) {
      const key_sums& t = sink_sums[h];
      if (t.no_bound || t.unbounded) {
        r.d_sinks_bound[h] = t.no_bound ? nan : inf;
        continue;
      }
      if (t.m == 0) continue;
      const double g_s = gamma_n(t.m + 1, u);
      if (!std::isfinite(g_s) || sink_mag[h] > big) {
        r.d_sinks_bound[h] = inf;
        continue;
      }
      const double ec = sink_err[h] + g_s * sink_mag[h];
      const double value = std::fabs(r.d_sinks[h]);
      const double b = f * ec + u32 * (value + f * ec) + eta32 / 2;
      r.d_sinks_bound[h] = value + b >= max32 ? inf : b;
    }
  }

  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    for (std::int64_t g = 0; g < c.hkv; ++g) {
      const std::size_t kb = x.key_base(c, bi, g);
      for (std::int64_t j = 0; j < c.lk; ++j) {
        const std::size_t key = kb + z(j);
        const key_sums& t = ks[key];
        double* dk_b = &r.dk_bound[z(((bi * c.lk + j) * c.hkv + g) * c.d)];
        double* dv_b = &r.dv_bound[z(((bi * c.lk + j) * c.hkv + g) * c.dv)];
        const double* dk_v = &r.dk[z(((bi * c.lk + j) * c.hkv + g) * c.d)];
        const double* dv_v = &r.dv[z(((bi * c.lk + j) * c.hkv + g) * c.dv)];
        if (t.no_bound || t.unbounded) {
          const double b = t.no_bound ? nan : inf;
          std::fill(dk_b, dk_b + c.d, b);
          std::fill(dv_b, dv_b + c.dv, b);
          continue;
        }
        if (t.m == 0) continue;  // no row sees the key: dK = dV = 0 exactly
        const double g_k = gamma_n(t.m + nq + 1, u), g_v = gamma_n(t.m + nq, u);
        for (std::int64_t d = 0; d < c.d; ++d) {
          const std::size_t at = key * z(c.d) + z(d);
          if (!std::isfinite(g_k) || std::max(1.0, scale) * dk_mag[at] > big) {
            dk_b[d] = inf;
            continue;
          }
          const double ec =
              scale * (dk_err[at] + g_k * dk_mag[at]) + half_eta * (t.m * (scale + 1) + 1 + dk_qsum[at] + t.ds_abs_sum);
          dk_b[d] = element_bound(ec, dk_v[d]);
        }
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const std::size_t at = key * z(c.dv) + z(e);
          if (!std::isfinite(g_v) || dv_mag[at] > big) {
            dv_b[e] = inf;
            continue;
          }
          const double ec = dv_err[at] + g_v * dv_mag[at] + t.m * half_eta;
          dv_b[e] = element_bound(ec, dv_v[e]);
        }
      }
    }
  }
}

}  // namespace attncheck::oracle_detail

namespace attncheck {

// The handed errors change only the bound: the oracle's values are
// reference_backward(c, d_o)'s (which validates c and dO),
// and the forward oracle runs once more for the bound's P, O and gaps
// (run_backward in backward_oracle.cpp keeps its own run private).
backward_result reference_backward(const attn_case& c, const tensor& d_o, const backward_bound_params& bound,
                                   const backward_handed_errors& handed) {
  oracle_detail::check_backward_bound_params(bound);
  backward_result r = reference_backward(c, d_o);
  if (handed.o.size() != r.o.size()) throw input_error("handed", "o must hold B*Lq*Hq*Dv errors, dense (B, Lq, Hq, Dv)");
  if (handed.lse.size() != r.lse.size()) throw input_error("handed", "lse must hold B*Hq*Lq errors, dense (B, Hq, Lq)");
  const auto fwd = oracle_detail::naive_attention<oracle_detail::mpfr50>(c);
  oracle_detail::fill_backward_bounds(c, d_o, fwd, bound, r, &handed);
  return r;
}

}  // namespace attncheck
