#include "error_bound.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace attncheck::oracle_detail {

compute_range compute_range_of(double u_compute) {
  // f32's exponent range at u's precision: p = -log2(u) significand bits put the
  // smallest subnormal at 2^(-126 - p + 1) = 2^-125 u (2^-149 for f32, 2^-133 for bf16).
  if (u_compute >= 0x1p-24) return {std::max(0x1p-149, 0x1p-125 * u_compute), 0x1.fffffep127};
  return {std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max()};
}

double gamma_n(double n, double u) {
  const double nu = n * u;
  return nu < 1 ? nu / (1 - nu) : std::numeric_limits<double>::infinity();
}

double gamma_prob(double n, double u, double lambda) {
  // Higham & Mary (2019), Theorem 2.4; the sound gamma_n always holds too.
  return std::min(gamma_n(n, u), std::expm1(lambda * std::sqrt(n) * u + n * u * u / (1 - u)));
}

double lambda_for(double events, double u) {
  return std::sqrt(2 * std::log(2 * std::max(1.0, events) / prob_failure_per_element)) / (1 - u);
}

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// An analytic term that came out NaN from 0 * inf (finite inputs) is unbounded.
double unbounded_if_nan(double x) { return std::isnan(x) ? inf : x; }

}  // namespace

bound_setup make_bound_setup(const attn_case& c, const oracle_options& opt, bool probabilistic) {
  namespace k = bound_constants;
  if (!(opt.bound.u_compute > 0 && opt.bound.u_compute < 1))
    throw input_error("bound.u_compute", "must lie in (0, 1), e.g. 2^-24 for f32");
  if (!(opt.bound.exp_ulps >= 0 && std::isfinite(opt.bound.exp_ulps)))
    throw input_error("bound.exp_ulps", "must be finite and >= 0");
  if (opt.bound.key_blocks < 1) throw input_error("bound.key_blocks", "must be >= 1 (one block: no rescale)");
  if (!(opt.bound.tanh_ulps >= 0 && std::isfinite(opt.bound.tanh_ulps)))
    throw input_error("bound.tanh_ulps", "must be finite and >= 0");
  bound_setup s;
  s.c_tanh = opt.bound.tanh_ulps;
  s.u = opt.bound.u_compute;
  s.c_exp = opt.bound.exp_ulps;
  // A sink may be merged after the keys (LSE' = logaddexp(LSE, sigma), O' = O exp(LSE - LSE')),
  // as one more split would be: one block more (docs/bound.md, "Variants").
  s.nb = static_cast<double>(opt.bound.key_blocks) + (c.variants.has_sinks() ? 1 : 0);
  s.u_out = unit_roundoff(opt.out_type);
  s.eta_out = smallest_subnormal(opt.out_type);
  s.u_lse = unit_roundoff(k::lse_type);
  s.eta_lse = smallest_subnormal(k::lse_type);
  s.lse_max = largest_finite(k::lse_type);
  const compute_range range = compute_range_of(s.u);
  s.eta_c = range.smallest_subnormal;
  s.largest_c = range.largest_finite;
  s.d = static_cast<double>(c.d);
  s.scale = std::fabs(static_cast<double>(c.effective_scale()));
  s.f = k::safety_factor;
  s.probabilistic = probabilistic;
  // The stage-wise profile: a unit of 0 is the compute unit (docs/bound.md "Stage-wise profiles").
  const stage_profile& pr = opt.bound.profile;
  const auto unit = [&](double x, const char* field) {
    if (!(x >= 0 && x < 1)) throw input_error(std::string("bound.profile.") + field, "must be 0 (the compute unit) or in (0, 1)");
    return x == 0 ? s.u : x;
  };
  s.u_prod = pr.exact_products ? 0.0 : unit(pr.qk_product_u, "qk_product_u");
  s.u_acc = unit(pr.qk_accum_u, "qk_accum_u");
  s.resc_ratio = unit(pr.rescale_u, "rescale_u") / s.u;
  s.u_pv = unit(pr.pv_accum_u, "pv_accum_u");
  s.u_lse_arith = unit(pr.lse_u, "lse_u");
  // A stage at a coarser unit with f32's exponent range has a coarser subnormal
  // spacing: every underflow term takes the coarsest stage's (the same as the
  // compute unit's where every stage is at u).
  for (const double x : {s.u_prod, s.u_acc, s.resc_ratio * s.u, s.u_pv, s.u_lse_arith})
    if (x > 0) s.eta_c = std::max(s.eta_c, compute_range_of(x).smallest_subnormal);
  // The scale's roundings at the compute unit, per score term (step 1).
  constexpr double scale_roundings[] = {5, 1, 1, 1, 4, 2};
  s.k_scale = scale_roundings[static_cast<int>(pr.scale)];
  switch (pr.scale) {
    case scale_mode::any:
    case scale_mode::sqrt_split: s.fold_q = s.fold_k = std::max(1.0, std::sqrt(s.scale)); break;
    case scale_mode::into_q: s.fold_q = 0, s.fold_k = 1; break;
    case scale_mode::into_k: s.fold_q = 1, s.fold_k = 0; break;
    case scale_mode::after_dot:
    case scale_mode::log2e_folded: s.fold_q = s.fold_k = 0; break;
  }
  // fp8 descales (docs/bound.md "fp8 storage"): applying Q's or K's descale
  // rounds once per score term (x s rounded, or s folded into the scale);
  // V's once per weight's term in the numerator (v s rounded, or O s).
  const quantization& z = c.quant;
  s.k_scale += (z.q_scale != descale_granularity::none ? 1 : 0) + (z.k_scale != descale_granularity::none ? 1 : 0);
  s.v_descale_u = z.v_scale != descale_granularity::none ? s.u : 0.0;
  if (!(pr.p_u >= 0 && pr.p_u < 1)) throw input_error("bound.profile.p_u", "must be 0 (P not rounded) or in (0, 1)");
  if (!(pr.p_eta >= 0 && pr.p_eta < 1)) throw input_error("bound.profile.p_eta", "must be in [0, 1)");
  s.theta_p = pr.p_u / (1 - pr.p_u);
  s.eta_pw = std::ldexp(pr.p_eta / 2, -pr.p_factor_log2);
  s.p_factor = std::ldexp(1.0, pr.p_factor_log2);
  s.row_sum_after_cast = pr.row_sum_after_cast;
  // Flushed subnormals (docs/bound.md "Flushed subnormals"): a result below the
  // smallest normal N becomes 0, an absolute error below N where gradual
  // underflow's is half the smallest subnormal. So each eta / 2 becomes N: eta
  // = 2 N, with N = eta / (2 u) of the format (2^-126 for f32's range, 2^-14 for
  // f16, 2^-1022 for binary64's).
  if (opt.bound.flush_intermediates) {
    s.eta_c = std::max(s.eta_c, s.u >= 0x1p-24 ? 0x1p-125 : 0x1p-1021);
    if (pr.p_u > 0) s.eta_pw = std::ldexp(pr.p_eta / (2 * pr.p_u), -pr.p_factor_log2);
    s.flushed_sums = 1;
  }
  // LSE's last add is an intermediate's operation as much as an output's.
  if (opt.bound.flush_outputs || opt.bound.flush_intermediates) s.eta_lse = s.eta_lse / s.u_lse;
  if (opt.bound.flush_outputs) {
    s.eta_out = s.eta_out / s.u_out;
  }
  return s;
}

namespace {

// gamma (sound, or probabilistic at lambda > 0) of k roundings at unit u.
double gamma_at(double k, double u, double lambda) {
  if (k <= 0 || u == 0) return 0.0;
  return lambda > 0 ? gamma_prob(k, u, lambda) : gamma_n(k, u);
}

// A term that passes k_1 roundings at u_1, k_2 at u_2 and k_3 at u_3: gamma of
// the total where the units agree (the one-u declaration, bit for bit), else
// (1 + gamma_1)(1 + gamma_2)(1 + gamma_3) - 1 (Higham, Lemma 3.3, per unit).
double gamma_stages(double k1, double u1, double k2, double u2, double k3, double u3, double lambda) {
  if (u1 == u2 && u2 == u3) return gamma_at(k1 + k2 + k3, u1, lambda);
  return (1 + gamma_at(k1, u1, lambda)) * (1 + gamma_at(k2, u2, lambda)) * (1 + gamma_at(k3, u3, lambda)) - 1;
}

}  // namespace

row_gammas gammas_of_row(const bound_setup& s, double n) {
  // Each term of L and of acc_e passes at most n - 1 additions (keys outside
  // the row add exact zeros, or nothing), its rescales and one product w V:
  // gamma_(n+nb+1) keeps one rounding to spare (docs/bound.md, step 4), at the
  // compute unit for L and at the P V accumulation's for acc_e. A score's term
  // passes its product, D - 1 additions and the scale's roundings: D + 5 in
  // all, the scale applied any way the contract allows (step 1), or the
  // profile's units and scale mode ("Stage-wise profiles").
  const double k_sum = n + s.nb + 1;
  // Per element: n scores of D terms, n terms in L, n in acc_e: n (D + 5) events.
  const double lambda = s.probabilistic ? lambda_for(n * (s.d + 5), s.u) : 0.0;
  // A product entering an accumulator of another unit rounds on entry too: D
  // roundings at the accumulator's unit then (D - 1 additions where the units agree).
  const double prod_roundings = s.u_prod == 0 ? 0.0 : 1.0, prod_unit = s.u_prod == 0 ? s.u_acc : s.u_prod;
  const double acc_roundings = s.u_prod != 0 && s.u_prod == s.u_acc ? s.d - 1 : s.d;
  row_gammas g;
  g.g_dot = gamma_stages(prod_roundings, prod_unit, acc_roundings, s.u_acc, s.k_scale, s.u, lambda);
  g.g_sum = gamma_at(k_sum, s.u, lambda);
  g.g_num = s.u_pv == s.u ? g.g_sum : gamma_at(k_sum, s.u_pv, lambda);
  return g;
}

variant_score variant_score_terms(const bound_setup& s, const attn_case& c, std::int64_t bi, std::int64_t h, std::int64_t i,
                                  std::int64_t j, double t_j) {
  const score_variants& w = c.variants;
  variant_score v;
  double capped = t_j;  // |softcap(x)| <= min(c, |x|) and |x| <= T_j
  if (w.has_softcap()) {
    const double cap = static_cast<double>(w.softcap);
    capped = std::min(cap, t_j);
    // x / c rounds, or x times a rounded 1/c (scale / c) rounds twice (2u |x / c|,
    // times c and |tanh'| <= 1: 2u T_j); tanh is c_tanh ulps of its result
    // (<= 2 c_tanh u relative); c * tanh rounds (u |s|); each of the four
    // operations may underflow (eta_c / 2).
    v.error += 2 * s.u * t_j + (2 * s.c_tanh + 1) * s.u * capped + 2 * s.eta_c;
  }
  const double alibi = std::fabs(c.alibi_at(bi, h, i, j));
  const double bias = std::fabs(c.bias_at(bi, h, i, j));
  v.magnitude = capped + alibi + bias;
  if (w.has_alibi() || w.has_bias()) {
    // m_h * (j - p) rounds once ((j - p) is an exact integer), then the three
    // terms are added in any order (gamma_2), with one rounding to spare for
    // a log2(e) multiply of the sum (gamma_3); the product may underflow.
    v.error += s.u * alibi + s.eta_c / 2 + gamma_n(3, s.u) * v.magnitude;
  }
  return v;
}

void row_key_terms(const bound_setup& s, const attn_case& c, const dense_inputs& x, std::size_t key_base,
                   const std::vector<std::int64_t>& keys, const double* raw_of, double q_abs_sum, double q_abs_max,
                   const double* p_row, const double* gap_row, double log_sum, const row_slack& slack, row_terms& t,
                   const variant_score* score_extra, const sink_term* sink) {
  namespace k = bound_constants;
  const auto n = [](std::int64_t v) { return static_cast<std::size_t>(v); };
  const std::size_t terms = keys.size() + (sink ? 1 : 0);  // the sink: one more term of the denominator
  t.p.resize(terms);
  t.phi.resize(terms);
  t.pk.resize(terms);
  t.scores_finite = true;
  t.worst_score_error = 0;
  t.g = gammas_of_row(s, static_cast<double>(terms));
  const double g_dot = t.g.g_dot, g_sum = std::max(t.g.g_sum, t.g.g_num);
  // The denominator's own budget differs where its sums run at another unit than
  // the numerator's, or L sums the weights before P's rounding ("Stage-wise profiles").
  const double theta_den = s.row_sum_after_cast ? s.theta_p : 0.0;
  const bool split_den = t.g.g_sum != g_sum || theta_den != s.theta_p;
  t.b_den = 0;
  double worst_partial = 0;  // largest |partial dot| the subject can hold
  // The smallest log L the oracle's row can have (log L >= 0: the maximum key contributes exp(0) = 1).
  const double log_sum_lo = std::max(0.0, log_sum - slack.log_sum_abs);
  // fp8 descales (docs/bound.md "fp8 storage"): a kernel may compute on the
  // raw stored values and apply the descales after (folded into the scale as
  // c = fl(fl(s_q s_k) scale), O times s_v), so its absolute underflow errors
  // are in raw units: s_q s_k |scale| (scores) and s_v (O) times a value's.
  // qk_descale takes the largest Q descale of the KV head's query heads (the
  // row's head is not passed); both are 1 without descales, and the bound the
  // same bits then. A folded c outside f32's normal range rounds by more than
  // u: no bound there.
  const std::int64_t kv_stride = std::max<std::int64_t>(c.lk, 1);
  const std::int64_t row_b = static_cast<std::int64_t>(key_base) / (c.hkv * kv_stride);
  const std::int64_t row_g = static_cast<std::int64_t>(key_base) / kv_stride % c.hkv;
  double q_descale = 0;
  for (std::int64_t h = row_g * c.group(); h < (row_g + 1) * c.group(); ++h)
    q_descale = std::max(q_descale, c.q_descale_of(row_b, h));
  const double qk_descale = q_descale * c.k_descale_of(row_b, row_g);
  t.v_underflow = std::max(1.0, c.v_descale_of(row_b, row_g));
  const double folded_scale = qk_descale * s.scale;
  const bool fold_outside = qk_descale != 1 && s.scale != 0 && !(folded_scale >= 0x1p-126 && folded_scale <= 0x1p127);
  for (std::size_t kk = 0; kk < keys.size(); ++kk) {
    const std::size_t key = key_base + n(keys[kk]);
    const double raw = raw_of[kk];
    // docs/spec.md allows the scale folded into Q or K first: scale * q_d or
    // scale * k_d must not overflow either, even where every product is finite.
    worst_partial = std::max(worst_partial, s.scale * std::max(q_abs_max, x.k_abs_max[key]));
    const double t_j = s.scale * raw;  // T_j of docs/spec.md
    // Underflow in the dot product: each of the D products and the scale
    // multiply may round to a subnormal (error <= eta_c/2 each, in raw
    // units times |scale|); a scale folded into Q or K first rounds
    // scale*q_d (or scale*k_d) with error <= eta_c/2, times |k_d| (|q_d|);
    // a scale split as r = sqrt(scale) rounds r*q_d and r*k_d (eta_c/2 times
    // r |k_d| and r |q_d|) and their product (eta_c/2 each, in score units).
    // Sums of subnormals are exact (gradual underflow); where intermediates
    // flush, each of the D - 1 additions may flush too (flushed_sums).
    const double d = static_cast<double>(c.d);
    // (Equal weights multiply the sum, as before the scale modes: the same bits for any way.)
    const double folded =
        s.fold_q == s.fold_k ? s.fold_q * (q_abs_sum + x.k_abs_sum[key]) : s.fold_q * q_abs_sum + s.fold_k * x.k_abs_sum[key];
    const double dot_underflow =
        s.eta_c / 2 * ((d + 1 + s.flushed_sums * (d - 1)) * std::max({s.scale, folded_scale, 1.0}) + 1 + folded);
    const double gap_j = gap_row[keys[kk]];
    const double p_j = p_row[keys[kk]];
    if (!std::isfinite(raw) || !std::isfinite(t_j) || !std::isfinite(dot_underflow) || !std::isfinite(gap_j) ||
        !std::isfinite(p_j)) {
      t.scores_finite = false;
    }
    worst_partial = std::max({worst_partial, raw, t_j});
    // The variants' score error (softcap, ALiBi, bias), added last so that a
    // contract 1.0 case evaluates the same expression as before, bit for bit.
    const double extra = score_extra ? score_extra[kk].error : 0.0;
    if (score_extra) {
      worst_partial = std::max(worst_partial, score_extra[kk].magnitude);
      if (!std::isfinite(extra)) t.scores_finite = false;
    }
    t.worst_score_error = std::max(t.worst_score_error, g_dot * t_j + dot_underflow + extra);
    const double gap_hi = gap_j * (1 + slack.gap_rel) + slack.gap_abs;
    // The weight's budget before its sums; then the sums and P's rounding before P V.
    const double shared = g_dot * t_j + 2 * s.u * gap_hi + (s.c_exp + 2 * s.resc_ratio) * s.u * (s.nb + 1);
    const double phi = shared + g_sum + dot_underflow + extra + s.theta_p + s.v_descale_u;
    // P_j * (exp(Phi_j) - 1); when P_j underflowed in double, the same
    // product from logs, so a far key never turns 0 * inf into NaN.
    const bool p_usable = p_j > 0 && p_j >= slack.p_floor;
    const double gap_lo = std::max(0.0, gap_j * (1 - slack.gap_rel) - slack.gap_abs);
    const auto weighted = [&](double budget) {
      return p_usable ? p_j * (1 + slack.p_rel) * std::expm1(budget) : std::exp(budget - gap_lo - log_sum_lo);
    };
    t.phi[kk] = phi;
    t.p[kk] = p_usable ? p_j * (1 + slack.p_rel) : p_j;
    t.pk[kk] = weighted(phi);
    if (split_den) t.b_den += weighted(shared + t.g.g_sum + dot_underflow + extra + theta_den);
  }
  if (sink) {
    // Its score sigma is an exact input: only the shift, exp, rescales and sums round.
    // P's rounding reaches it only where L sums the rounded weights.
    const double shared = 2 * s.u * sink->gap + (s.c_exp + 2 * s.resc_ratio) * s.u * (s.nb + 1);
    const double phi = shared + g_sum + theta_den;
    t.phi[keys.size()] = phi;
    t.p[keys.size()] = sink->p;
    t.pk[keys.size()] = sink->p * std::expm1(phi);
    if (split_den) t.b_den += sink->p * std::expm1(shared + t.g.g_sum + theta_den);
    if (!std::isfinite(sink->gap) || !std::isfinite(sink->p)) t.scores_finite = false;
  }
  t.nv = static_cast<double>(terms);
  t.b = 0;
  t.phi_bar = 0;
  for (std::size_t kk = 0; kk < terms; ++kk) {
    t.b += t.pk[kk];
    t.phi_bar += t.p[kk] * t.phi[kk];
  }
  t.b = unbounded_if_nan(t.b);
  t.phi_bar = unbounded_if_nan(t.phi_bar);
  t.b_den = split_den ? unbounded_if_nan(t.b_den) : t.b;
  const bool scores_may_overflow = worst_partial > s.largest_c / k::overflow_headroom;
  // A declared precision too coarse for these lengths (k u >= 1) has no bound.
  t.unbounded = !std::isfinite(g_dot) || !std::isfinite(t.g.g_sum) || scores_may_overflow || fold_outside;
}

void row_column_sums(const dense_inputs& x, std::size_t key_base, const std::vector<std::int64_t>& keys, const double* pk,
                     column_sums& out) {
  const std::size_t dv = static_cast<std::size_t>(x.dv);
  out.weighted.assign(dv, 0.0);
  out.v_sum.assign(dv, 0.0);
  out.v_max.assign(dv, 0.0);
  for (std::size_t kk = 0; kk < keys.size(); ++kk) {
    const double* v = &x.v[(key_base + static_cast<std::size_t>(keys[kk])) * dv];
    const double w = pk[kk];
    for (std::size_t e = 0; e < dv; ++e) {
      const double a = std::fabs(v[e]);
      if (w > 0 && a > 0) out.weighted[e] += w * a;  // never 0 * inf
      out.v_sum[e] += a;
      out.v_max[e] = std::max(out.v_max[e], a);
    }
  }
}

double row_lse_bound(const bound_setup& s, const row_terms& t, double log_sum_hi, double lse, double lse_abs_hi) {
  namespace k = bound_constants;
  if (!t.scores_finite || !std::isfinite(lse)) return nan;
  // LSE = m + log L: the weights' log-perturbation averages to at most
  // log1p(b) (Jensen); log and the final add round relative to their results.
  // Where L sums the rounded P, its format's underflow perturbs L (>= 1) too.
  const double p_under = s.row_sum_after_cast ? s.eta_pw * t.nv : 0.0;
  const double analytic =
      s.f * (std::log1p(t.b_den) + s.c_exp * s.u_lse_arith * std::fabs(log_sum_hi) + (s.u_lse_arith + s.u_lse) * lse_abs_hi) +
      s.f * s.eta_c * (s.nb + 2) * t.nv + s.eta_lse / 2 + s.f * p_under;
  // Any weights: LSE_hat and LSE both lie within log(n) above their
  // maxima m_hat and m, which differ by at most one score's error.
  const double p_hull = s.row_sum_after_cast ? s.theta_p + p_under : 0.0;
  const double hull = s.f * (t.worst_score_error + std::log(t.nv) + 2 * t.g.g_sum + s.c_exp * s.u_lse_arith +
                             (s.u_lse_arith + s.u_lse) * lse_abs_hi + p_hull) +
                      s.eta_lse / 2;
  double bound = std::min(unbounded_if_nan(analytic), t.g.g_sum <= k::hull_gamma_limit ? hull : inf);
  if (t.unbounded || lse_abs_hi + bound > s.lse_max) bound = inf;
  return bound;
}

double row_o_bound(const bound_setup& s, const row_terms& t, const column_sums& cs, std::size_t e, double o_abs) {
  namespace k = bound_constants;
  if (!t.scores_finite || !std::isfinite(cs.v_sum[e]) || !std::isfinite(o_abs)) return nan;
  // Numerator and denominator weights perturbed by factors in
  // [exp(-Phi_j), exp(Phi_j)]; the denominator is >= exp(-phi_bar).
  // P's format may round a weight into its subnormals (or flush it): eta_pw
  // each, in the numerator's |V_je| and the denominator's |O_e|.
  const double p_under = s.eta_pw * (cs.v_sum[e] + t.nv * o_abs);
  // With V's descale applied to the accumulated raw values, their underflow is in raw units: t.v_underflow = max(1, s_v).
  const double analytic =
      unbounded_if_nan(s.f * ((cs.weighted[e] + o_abs * t.b) * std::exp(t.phi_bar) + (s.u + s.u_out) * o_abs) +
                       s.f * s.eta_c * t.v_underflow *
                           ((s.nb + 2) * (cs.v_sum[e] + t.nv * o_abs) + (t.nv + 1 + s.flushed_sums * (t.nv + s.nb)) / 2) +
                       s.eta_out / 2 + s.f * p_under);
  // Any weights: O_hat is a normalized combination of the visible V, its
  // weights within gamma (P's rounding included) of each other's.
  const double g_sum = std::max(t.g.g_sum, t.g.g_num);
  const double g_hull = s.theta_p == 0 ? g_sum : (1 + g_sum) * (1 + s.theta_p) - 1;
  const double hull = g_hull <= k::hull_gamma_limit
                          ? o_abs +
                                s.f * (cs.v_max[e] * (1 + s.eta_pw * t.nv) +
                                       s.eta_c * t.v_underflow * (t.nv + 1 + s.flushed_sums * (t.nv + s.nb))) +
                                s.eta_out / 2
                          : inf;
  const double bound = std::min(analytic, hull);
  // The accumulator sums P V with P times its pre-cast factor (docs/bound.md "P before P V").
  const bool accumulator_may_overflow = t.nv * cs.v_max[e] * std::max(1.0, s.p_factor) > s.largest_c / k::overflow_headroom;
  // |O| + bound past the output type's largest value stays finite: the
  // element may then round to +-inf, which check.cpp accepts (docs/bound.md).
  return t.unbounded || accumulator_may_overflow ? inf : bound;
}

void zero_bounds(oracle_result& r) {
  r.o_bound.assign(r.o.size(), 0.0);
  r.lse_bound.assign(r.lse.size(), 0.0);
  r.o_pbound.assign(r.o.size(), 0.0);
  r.lse_pbound.assign(r.lse.size(), 0.0);
  r.o_sound_useless.assign(r.o.size(), 0);
  r.lse_sound_useless.assign(r.lse.size(), 0);
}

void fill_bounds(const attn_case& c, const oracle_options& opt, const std::vector<double>& gap,
                 const std::vector<double>& log_sum, oracle_result& r, const std::vector<double>& sink_p,
                 const std::vector<double>& sink_above) {
  const bound_setup s = make_bound_setup(c, opt);
  const bound_setup sp = make_bound_setup(c, opt, true);
  const dense_inputs x = decode_dense(c);
  const auto n = [](std::int64_t v) { return static_cast<std::size_t>(v); };
  zero_bounds(r);
  const row_slack none{};
  const bool variant_scores = c.variants.has_softcap() || c.variants.has_alibi() || c.variants.has_bias();
  std::vector<std::int64_t> keys;
  std::vector<double> raw;
  std::vector<variant_score> extra;
  row_terms t;
  column_sums cs;
  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    for (std::int64_t h = 0; h < c.hq; ++h) {
      const std::size_t kb = x.key_base(c, bi, c.kv_head(h));
      // A finite sink of this head (contract 1.1): one more term of every row's denominator.
      const bool sink = !sink_p.empty() && c.sink_of(h) > -std::numeric_limits<double>::infinity();
      for (std::int64_t i = 0; i < c.lq; ++i) {
        visible_keys(c, bi, h, i, keys);
        // Bounds stay 0 in a row with no visible key: O exactly 0, LSE exactly -inf (or sigma, bounded below).
        if (keys.empty() && !sink) continue;
        const std::size_t row = r.lse_index(bi, h, i);
        const double* q = x.q_row(c, bi, i, h);
        double q_abs_sum = 0, q_abs_max = 0;
        for (std::int64_t d = 0; d < c.d; ++d) {
          q_abs_sum += std::fabs(q[d]);
          q_abs_max = std::max(q_abs_max, std::fabs(q[d]));
        }
        raw.resize(keys.size());
        for (std::size_t kk = 0; kk < keys.size(); ++kk) raw[kk] = abs_dot(q, &x.k[(kb + n(keys[kk])) * n(c.d)], c.d);
        extra.resize(variant_scores ? keys.size() : 0);
        for (std::size_t kk = 0; kk < extra.size(); ++kk)
          extra[kk] = variant_score_terms(s, c, bi, h, i, keys[kk], s.scale * raw[kk]);
        const variant_score* ex = variant_scores ? extra.data() : nullptr;
        // The sink: its share of the denominator, and how far sigma sits from the scores' maximum,
        // which a subject shifting by that maximum adds to its log L.
        sink_term st;
        double log_sum_hi = log_sum[row];
        if (sink) {
          st.p = sink_p[row];
          st.gap = keys.empty() ? 0.0 : std::fabs(sink_above[row]);
          if (!keys.empty()) log_sum_hi += std::max(0.0, sink_above[row]);
        }
        const sink_term* sk = sink ? &st : nullptr;
        row_key_terms(s, c, x, kb, keys, raw.data(), q_abs_sum, q_abs_max, &r.p[row * n(c.lk)], &gap[row * n(c.lk)], log_sum[row],
                      none, t, ex, sk);
        r.lse_bound[row] = row_lse_bound(s, t, log_sum_hi, r.lse[row], std::fabs(r.lse[row]));
        r.lse_sound_useless[row] = lse_bound_useless(r.lse_bound[row], t.nv);
        if (keys.empty()) {  // the sink alone: O exactly 0, LSE = sigma within its bound
          r.lse_pbound[row] = r.lse_bound[row];
          continue;
        }
        row_column_sums(x, kb, keys, t.pk.data(), cs);
        bool any_useless = r.lse_sound_useless[row] != 0;
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const std::size_t oi = r.o_index(bi, i, h, e);
          r.o_bound[oi] = row_o_bound(s, t, cs, n(e), std::fabs(r.o[oi]));
          r.o_sound_useless[oi] = o_bound_useless(r.o_bound[oi], std::fabs(r.o[oi]), cs.v_max[n(e)]);
          any_useless = any_useless || r.o_sound_useless[oi] != 0;
        }
        // The probabilistic bound, for the rows where the sound one says nothing useful.
        if (!any_useless) {
          r.lse_pbound[row] = r.lse_bound[row];
          for (std::int64_t e = 0; e < c.dv; ++e) r.o_pbound[r.o_index(bi, i, h, e)] = r.o_bound[r.o_index(bi, i, h, e)];
          continue;
        }
        row_key_terms(sp, c, x, kb, keys, raw.data(), q_abs_sum, q_abs_max, &r.p[row * n(c.lk)], &gap[row * n(c.lk)],
                      log_sum[row], none, t, ex, sk);
        r.lse_pbound[row] = row_lse_bound(sp, t, log_sum_hi, r.lse[row], std::fabs(r.lse[row]));
        row_column_sums(x, kb, keys, t.pk.data(), cs);
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const std::size_t oi = r.o_index(bi, i, h, e);
          r.o_pbound[oi] = row_o_bound(sp, t, cs, n(e), std::fabs(r.o[oi]));
        }
      }
    }
  }
}

}  // namespace attncheck::oracle_detail
