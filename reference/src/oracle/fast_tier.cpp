// The fast tier (docs/oracle.md, "Tiers"): one pass per row over dense
// decoded inputs computes S, P, O and LSE in binary64, the tier's own error
// bound, and the bound of docs/bound.md evaluated at those values widened by their slack.
#include "fast_tier.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "dense_inputs.hpp"
#include "error_bound.hpp"

namespace attncheck::oracle_detail {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// Scores this far from zero or this close to it leave the argument that no
// binary64 score overflows or underflows (inputs are f32 values at most:
// nonzero products are >= 2^-298, sums of D of them <= D 2^256). Never met by
// f32, f16 or bf16 inputs; the guard keeps the proof's premise checked.
constexpr double score_floor = 0x1p-1000;
constexpr double score_ceiling = 0x1p1000;

struct row_scratch {
  std::vector<std::int64_t> keys;
  std::vector<double> s, raw, e, w, p_row, gap_row, phi64, pk64, acc, own_weighted;
  std::vector<variant_score> extra;
  row_terms t;
  column_sums cs;
};

}  // namespace

fast_tier_result fast_tier(const attn_case& c, const oracle_options& opt, const fast_tier_hooks& hooks) {
  namespace fc = fast_constants;
  const bound_setup bs = make_bound_setup(c, opt);
  const bound_setup bsp = make_bound_setup(c, opt, true);
  const dense_inputs x = decode_dense(c);
  const auto n = [](std::int64_t v) { return static_cast<std::size_t>(v); };
  const double u = fc::u;
  const double f = fc::safety_factor;
  const double c2 = 2 * fc::exp_ulps * u;  // exp or log: c ulps <= 2 c u relative
  // Absolute error of one weight that exp returned subnormal or 0 (c ulps of
  // 2^-1074 plus the result itself when flushed), plus one underflowing
  // product w V and the final quotient: each <= 2^-1075.
  const double alpha = (fc::exp_ulps + 2) * std::numeric_limits<double>::denorm_min();
  const double g_dot = gamma_n(static_cast<double>(c.d) + 5, u);  // step 1 of docs/bound.md, sqrt(scale) split included
  const double scale = static_cast<double>(c.effective_scale());
  // Contract 1.1 (docs/oracle.md, "Variants in the fast tier"): windows and
  // chunks act through visible_keys alone; softcap, ALiBi and bias change the
  // scores, each with its own error e_j; a sink is one more denominator term.
  const score_variants& vars = c.variants;
  const bool variant_scores = vars.has_softcap() || vars.has_alibi() || vars.has_bias();
  const double cap = static_cast<double>(vars.softcap);
  const double c_tanh = 2 * fc::tanh_ulps * u;  // tanh: c ulps <= 2 c u relative
  const double g_add = gamma_n(2, u);           // alibi and bias added: two roundings

  fast_tier_result out;
  oracle_result& r = out.r;
  r.b = c.b;
  r.hq = c.hq;
  r.lq = c.lq;
  r.lk = c.lk;
  r.dv = c.dv;
  r.tier = oracle_tier::fast_binary64;
  r.o.assign(n(c.b * c.lq * c.hq * c.dv), 0.0);
  out.o_error.assign(r.o.size(), 0.0);
  r.lse.assign(n(c.b * c.hq * c.lq), -std::numeric_limits<double>::infinity());
  out.lse_error.assign(r.lse.size(), 0.0);
  zero_bounds(r);
  if (opt.want_p) r.p.assign(n(c.b * c.hq * c.lq * c.lk), 0.0);
  out.accepted = true;
  const auto reject = [&](std::size_t row, const char* why) {
    if (!out.accepted) return;
    out.accepted = false;
    out.reason = "row " + std::to_string(row) + ": " + why;
  };

  row_scratch z;
  z.p_row.assign(n(c.lk), 0.0);
  z.gap_row.assign(n(c.lk), 0.0);
  z.acc.resize(n(c.dv));
  z.own_weighted.resize(n(c.dv));
  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    for (std::int64_t h = 0; h < c.hq; ++h) {
      const std::size_t kb = x.key_base(c, bi, c.kv_head(h));
      // The sink sigma of this head, -inf for none: exact (an f32 input).
      const double sigma = c.sink_of(h);
      const bool sink = sigma > -inf;
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::size_t row = r.lse_index(bi, h, i);
        visible_keys(c, bi, h, i, z.keys);
        if (z.keys.empty()) {
          if (!sink) continue;  // O = 0, LSE = -inf, bounds 0: exact, as the oracle
          // O = 0 and LSE = sigma exactly, as the oracle: own error 0, and the
          // bound is the oracle's own expression at the same inputs (the sink
          // alone, P_sigma = 1, log L = 0), bit for bit.
          r.lse[row] = sigma;
          const sink_term alone{1.0, 0.0};
          row_key_terms(bs, c, x, kb, z.keys, nullptr, 0, 0, nullptr, nullptr, 0.0, row_slack{}, z.t, nullptr, &alone);
          r.lse_bound[row] = row_lse_bound(bs, z.t, 0.0, sigma, std::fabs(sigma));
          r.lse_pbound[row] = r.lse_bound[row];
          r.lse_sound_useless[row] = lse_bound_useless(r.lse_bound[row], z.t.nv);
          if (!std::isfinite(r.lse_bound[row])) reject(row, "LSE: docs/bound.md bound not finite");
          continue;
        }
        const std::size_t nk = z.keys.size();
        const double nv = static_cast<double>(nk);
        // Terms of the denominator: the keys and the sink.
        const double nt = nv + (sink ? 1 : 0);
        const double* q = x.q_row(c, bi, i, h);
        double q_abs_sum = 0, q_abs_max = 0;
        for (std::int64_t d = 0; d < c.d; ++d) {
          q_abs_sum += std::fabs(q[d]);
          q_abs_max = std::max(q_abs_max, std::fabs(q[d]));
        }

        // Scores, their magnitudes T_j / |scale| and their own errors e_j
        // (|s_j - S_j| <= e_j) in one pass over K.
        z.s.resize(nk);
        z.raw.resize(nk);
        z.e.resize(nk);
        double s_max = -inf;
        bool finite = true;
        for (std::size_t kk = 0; kk < nk; ++kk) {
          const std::int64_t j = z.keys[kk];
          const double* k = &x.k[(kb + n(j)) * n(c.d)];
          double dot = 0, raw = 0;
          for (std::int64_t d = 0; d < c.d; ++d) {
            dot += q[d] * k[d];
            raw += std::fabs(q[d]) * std::fabs(k[d]);
          }
          double sj = scale * dot;
          const double as = std::fabs(sj);
          // The guard of step 1 is on scale * q.k, the only product that could underflow.
          if (!std::isfinite(raw) || !(as <= score_ceiling) || (as != 0 && as < score_floor)) finite = false;
          const double t_j = std::fabs(scale) * raw;
          double e = g_dot * t_j;
          if (variant_scores) {
            if (vars.has_softcap()) {
              // c tanh(x / c): x / c rounds (u |x| <= u T_j after the factor c),
              // tanh within tanh_ulps, c * tanh rounds; |tanh'| <= 1 carries e through.
              double th = std::tanh(sj / cap);
              if (hooks.tanh_relative_error != 0 && kk % 2 == 1) th *= 1 + hooks.tanh_relative_error;
              sj = cap * th;
              e += 2 * u * t_j + (c_tanh + 2 * u) * std::fabs(sj);
            }
            if (vars.has_alibi() || vars.has_bias()) {
              // Both terms are exact doubles; each addition rounds once, relative
              // to a partial sum of at most |softcap(x)| + A_j + B_j.
              const double a = c.alibi_at(bi, h, i, j), b = c.bias_at(bi, h, i, j);
              const double mag = std::fabs(sj) + std::fabs(a) + std::fabs(b);
              sj = sj + a;
              sj = sj + b;
              e += g_add * mag;
            }
            if (!std::isfinite(sj) || !(std::fabs(sj) <= score_ceiling)) finite = false;
          }
          z.s[kk] = sj;
          z.raw[kk] = raw;
          z.e[kk] = e;
          s_max = std::max(s_max, sj);
        }
        if (!finite) {
          reject(row, "a score is not finite or leaves binary64's safe range");
          continue;
        }
        // The shift: the largest score, or sigma when larger (as the oracle).
        const double m = sink ? std::max(s_max, sigma) : s_max;

        // Shifted weights, their sum, P, O and LSE.
        z.w.resize(nk);
        double l = 0;
        for (std::size_t kk = 0; kk < nk; ++kk) {
          const double xk = z.s[kk] - m;  // <= 0; rounds once
          z.gap_row[n(z.keys[kk])] = -xk;
          double w = std::exp(xk);
          if (hooks.exp_relative_error != 0 && kk % 2 == 1) w *= 1 + hooks.exp_relative_error;
          z.w[kk] = w;
          l += w;
        }
        // The sink's weight: sigma is exact, sigma - m rounds once, exp.
        const double sink_gap = sink ? -(sigma - m) : 0.0;
        double w_sink = 0;
        if (sink) {
          w_sink = std::exp(-sink_gap);
          if (hooks.sink_relative_error != 0) w_sink *= 1 + hooks.sink_relative_error;
          l += w_sink;
        }
        const double p_sink = w_sink / l;
        for (std::size_t kk = 0; kk < nk; ++kk) z.p_row[n(z.keys[kk])] = z.w[kk] / l;
        std::fill(z.acc.begin(), z.acc.end(), 0.0);
        for (std::size_t kk = 0; kk < nk; ++kk) {
          const double* v = &x.v[(kb + n(z.keys[kk])) * n(c.dv)];
          const double w = z.w[kk];
          for (std::int64_t e = 0; e < c.dv; ++e) z.acc[n(e)] += w * v[e];
        }
        double* o = &r.o[r.o_index(bi, i, h, 0)];
        for (std::int64_t e = 0; e < c.dv; ++e) o[e] = z.acc[n(e)] / l;
        const double log_sum = std::log(l);
        const double lse = m + log_sum;
        r.lse[row] = lse;
        if (opt.want_p)
          for (std::size_t kk = 0; kk < nk; ++kk) r.p[r.p_index(bi, h, i, z.keys[kk])] = z.p_row[n(z.keys[kk])];

        // The fast tier's own error (docs/oracle.md, "Tiers"): per key the
        // log-perturbation Phi64_j of its weight in numerator and denominator.
        const double g_sum = gamma_n(nt + 1, u);
        double e_s = 0;  // max_j |s_j - S_j|
        for (std::size_t kk = 0; kk < nk; ++kk) e_s = std::max(e_s, z.e[kk]);
        z.phi64.resize(nk);
        z.pk64.resize(nk);
        double b64 = 0, phi_max = 0;
        for (std::size_t kk = 0; kk < nk; ++kk) {
          const double gap = z.gap_row[n(z.keys[kk])];
          const double p = z.p_row[n(z.keys[kk])];
          const double phi = z.e[kk] + u * gap + c2 + g_sum;
          z.phi64[kk] = phi;
          if (p >= fc::p_floor) {
            z.pk64[kk] = p * std::expm1(phi);
            phi_max = std::max(phi_max, phi);
          } else {  // P_j <= exp(-gap_j) exactly (log L >= 0): bound P_j (e^Phi - 1) by its logs
            const double gap_lo = std::max(0.0, gap * (1 - 3 * u) - 2 * e_s);
            z.pk64[kk] = std::exp(phi - gap_lo);
          }
          b64 += z.pk64[kk];
        }
        // The sink: one more weight, exact score, no value (e_sigma = 0).
        double pk64_sink = 0, sink_gap_lo = 0;
        if (sink) {
          const double phi = u * sink_gap + c2 + g_sum;
          sink_gap_lo = std::max(0.0, sink_gap * (1 - 3 * u) - 2 * e_s);
          if (p_sink >= fc::p_floor) {
            pk64_sink = p_sink * std::expm1(phi);
            phi_max = std::max(phi_max, phi);
          } else {
            pk64_sink = std::exp(phi - sink_gap_lo);
          }
          b64 += pk64_sink;
        }
        const bool values_finite = std::isfinite(lse) && std::isfinite(l);
        if (!values_finite || !(phi_max <= fc::linear_limit) || !(b64 <= fc::linear_limit)) {
          reject(row, values_finite ? "weights outside the first-order range (Phi64_j or b64 > 2^-30)"
                                    : "LSE or the sum of weights not finite");
          std::fill(&out.o_error[r.o_index(bi, i, h, 0)], &out.o_error[r.o_index(bi, i, h, 0)] + c.dv, inf);
          out.lse_error[row] = inf;
          continue;
        }
        const double lse_err = f * (std::log1p(b64) + c2 * std::fabs(log_sum) + 2 * u * std::fabs(lse)) + f * alpha * nt;
        out.lse_error[row] = lse_err;

        // The bound of docs/bound.md at the fast values, widened by how far they may lie
        // from the MPFR oracle's.
        row_slack slack;
        slack.p_rel = 4 * (phi_max + b64 + u);
        slack.p_floor = fc::p_floor;
        // gap = fl(m - s_j) against the MPFR gap rounded to double: both scores
        // off by <= e_s, one rounding each side.
        slack.gap_rel = 3 * u;
        slack.gap_abs = 2 * e_s * (1 + 4 * u);
        slack.log_sum_abs = lse_err + e_s;
        slack.lse_abs = lse_err;
        // The variant terms at the same T_j as the oracle's (the same raw, d in order): identical.
        z.extra.resize(variant_scores ? nk : 0);
        for (std::size_t kk = 0; kk < z.extra.size(); ++kk)
          z.extra[kk] = variant_score_terms(bs, c, bi, h, i, z.keys[kk], bs.scale * z.raw[kk]);
        const variant_score* ex = variant_scores ? z.extra.data() : nullptr;
        // The sink as fill_bounds passes it, widened: P_sigma raised like the
        // keys' P_j (from its log below p_floor: P_sigma <= exp(sigma - M), L >= 1),
        // |sigma - max_j S_j| and log L's extra max(0, sigma - max_j S_j) raised by e_s.
        sink_term st;
        double log_sum_hi = std::fabs(log_sum) + slack.log_sum_abs;
        if (sink) {
          const double above = sigma - s_max;  // rounds once
          st.p = p_sink >= fc::p_floor ? p_sink * (1 + slack.p_rel) : std::min(1.0, std::exp(-sink_gap_lo) * (1 + 8 * u));
          st.gap = (std::fabs(above) + e_s) * (1 + 4 * u);
          log_sum_hi += std::max(0.0, (above + 2 * u * std::fabs(above) + e_s) * (1 + 2 * u));
        }
        const sink_term* sk = sink ? &st : nullptr;
        row_key_terms(bs, c, x, kb, z.keys, z.raw.data(), q_abs_sum, q_abs_max, z.p_row.data(), z.gap_row.data(), log_sum, slack,
                      z.t, ex, sk);
        const double lse_spec = row_lse_bound(bs, z.t, log_sum_hi, lse, std::fabs(lse) + lse_err);
        r.lse_bound[row] = lse_spec * (1 + fc::evaluation_margin) + lse_err;
        if (!std::isfinite(lse_spec)) reject(row, "LSE: docs/bound.md bound not finite");
        if (!(lse_err <= fc::own_share * lse_spec)) reject(row, "LSE: fast error above its share of the bound of docs/bound.md");

        row_column_sums(x, kb, z.keys, z.t.pk.data(), z.cs);
        std::fill(z.own_weighted.begin(), z.own_weighted.end(), 0.0);
        for (std::size_t kk = 0; kk < nk; ++kk) {
          const double* v = &x.v[(kb + n(z.keys[kk])) * n(c.dv)];
          const double pk = z.pk64[kk];
          if (pk > 0)
            for (std::int64_t e = 0; e < c.dv; ++e) z.own_weighted[n(e)] += pk * std::fabs(v[e]);
        }
        const double amplify = std::exp(b64);  // exp(phi64_bar) <= exp(b64)
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const std::size_t oi = r.o_index(bi, i, h, e);
          const double o_abs = std::fabs(o[e]);
          const double own = f * ((z.own_weighted[n(e)] + o_abs * b64) * amplify + 2 * u * o_abs) +
                             f * alpha * (z.cs.v_sum[n(e)] + nt * o_abs + nt + 2);
          out.o_error[oi] = std::isfinite(o_abs) ? own : inf;
          const double spec = row_o_bound(bs, z.t, z.cs, n(e), o_abs + own);
          r.o_bound[oi] = spec * (1 + fc::evaluation_margin) + own;
          if (!std::isfinite(spec)) reject(row, "O: docs/bound.md bound not finite");
          // The share counts what the own error adds to the bound through |O_e| + E_O too:
          // about 2 b exp(phi) E_O, negligible unless b is large (a sink far above every
          // key has a huge Phi_sigma at P_sigma ~ 1), where it may exceed E_O itself.
          const double through_o = spec - row_o_bound(bs, z.t, z.cs, n(e), o_abs);
          if (!std::isfinite(own) || !(own + std::max(0.0, through_o) <= fc::own_share * spec))
            reject(row, "O: fast error above its share of the bound of docs/bound.md");
          r.o_sound_useless[oi] = o_bound_useless(r.o_bound[oi], o_abs, z.cs.v_max[n(e)]);
        }
        // The probabilistic bound at the same values and slack, plus the
        // fast tier's own error, for rows where the sound one is useless.
        r.lse_sound_useless[row] = lse_bound_useless(r.lse_bound[row], z.t.nv);
        bool any_useless = r.lse_sound_useless[row] != 0;
        for (std::int64_t e = 0; e < c.dv; ++e) any_useless = any_useless || r.o_sound_useless[r.o_index(bi, i, h, e)] != 0;
        r.lse_pbound[row] = r.lse_bound[row];
        for (std::int64_t e = 0; e < c.dv; ++e) r.o_pbound[r.o_index(bi, i, h, e)] = r.o_bound[r.o_index(bi, i, h, e)];
        if (!any_useless) continue;
        row_key_terms(bsp, c, x, kb, z.keys, z.raw.data(), q_abs_sum, q_abs_max, z.p_row.data(), z.gap_row.data(), log_sum, slack,
                      z.t, ex, sk);
        r.lse_pbound[row] =
            row_lse_bound(bsp, z.t, log_sum_hi, lse, std::fabs(lse) + lse_err) * (1 + fc::evaluation_margin) + lse_err;
        row_column_sums(x, kb, z.keys, z.t.pk.data(), z.cs);
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const std::size_t oi = r.o_index(bi, i, h, e);
          const double o_abs = std::fabs(o[e]);
          r.o_pbound[oi] =
              row_o_bound(bsp, z.t, z.cs, n(e), o_abs + out.o_error[oi]) * (1 + fc::evaluation_margin) + out.o_error[oi];
        }
      }
    }
  }
  return out;
}

}  // namespace attncheck::oracle_detail
