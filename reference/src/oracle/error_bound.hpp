// The a-priori per-element error bound of docs/spec.md "The error bound", for O and
// LSE. Derivation, final formula and what it does not cover: docs/bound.md.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/dtype.hpp"
#include "attncheck/oracle.hpp"
#include "dense_inputs.hpp"

namespace attncheck::oracle_detail {

/// Every constant of the bound, each with its reason (proofs in docs/bound.md).
namespace bound_constants {
/// Multiplies the first-order terms. Covers the second-order remainder the
/// analysis drops (each dropped term is a product of two perturbations and at
/// most the first-order term it multiplies while every perturbation is <= 1/2;
/// exponential amplification is kept exactly via expm1/exp instead) plus the
/// oracle's own rounding to double and the bound's evaluation in double
/// (relative 2^-50 or less).
inline constexpr double safety_factor = 2.0;
/// The convex-hull fallback |O_hat| <= 2 max_j |V_j| needs
/// (1 + g)^2 (1 + u)(1 + u_out) / (1 - g) <= 2 for g = gamma_(Lk+nb+1); 0.1 gives <= 1.23 * (1 + 2^-8)^2.
inline constexpr double hull_gamma_limit = 0.1;
/// Accumulators and partial dot products hold values up to n * max|term|; a
/// headroom of 2 keeps the "may overflow" test conservative against their rounding.
inline constexpr double overflow_headroom = 2.0;
/// LSE is always stored as f32 (dtype.hpp).
inline constexpr dtype lse_type = dtype::f32;
}  // namespace bound_constants

/// Exponent range of the compute type. docs/spec.md "Types": compute is at least f32,
/// so any u >= 2^-24 (f32, tf32, bf16 compute) has f32's range; a finer u is
/// taken as binary64.
struct compute_range {
  double smallest_subnormal;  ///< absolute spacing near zero: underflow error <= half of it
  double largest_finite;
};
compute_range compute_range_of(double u_compute);

/// gamma_n = n u / (1 - n u) (Higham); +inf when n u >= 1 (no bound exists).
double gamma_n(double n, double u);

/// min(gamma_n, gamma~_n(lambda)) with Higham and Mary's (2019, Thm 2.4)
/// gamma~_n(lambda) = exp(lambda sqrt(n) u + n u^2 / (1 - u)) - 1: a product of
/// n factors (1 + delta_k), delta_k independent of mean zero and |delta_k| <= u,
/// lies within 1 +- gamma~ except with probability <= 2 exp(-lambda^2 (1-u)^2 / 2).
double gamma_prob(double n, double u, double lambda);

/// lambda such that `events` failures of probability 2 exp(-lambda^2 (1-u)^2 / 2)
/// each stay below prob_failure_per_element together (a union bound):
/// lambda = sqrt(2 ln(2 events / p)) / (1 - u), events >= 1.
double lambda_for(double events, double u);

/// Fills r.o_bound and r.lse_bound from the oracle's P (r.p, rounded to
/// double), O, LSE and the per-key gaps m - S_j and per-row log sums of
/// naive_result. Bounds: finite >= 0 when every visible input of the element is
/// finite; NaN when one is not (no bound exists: never a pass); +inf when the
/// element may overflow its storage type or an intermediate (the caller must
/// compare such elements by their own rule) or the declared precision is too
/// coarse for the lengths (gamma_n undefined). Rows with no visible key get 0:
/// O must be exactly 0 and LSE exactly -inf. Throws input_error when
/// opt.bound is invalid: u_compute outside (0, 1), exp_ulps negative or not
/// finite, key_blocks < 1.
/// With sinks (contract 1.1), sink_p and sink_above are naive_result's.
void fill_bounds(const attn_case& c, const oracle_options& opt, const std::vector<double>& gap,
                 const std::vector<double>& log_sum, oracle_result& r, const std::vector<double>& sink_p = {},
                 const std::vector<double>& sink_above = {});

// The row-level pieces of fill_bounds, shared with the fast tier (fast_tier.cpp),
// which evaluates the same formula at its own values plus their slack.

/// Per-case constants of the bound (validated declaration, types, gammas).
struct bound_setup {
  double c_tanh = 0;  ///< declared tanh ulps (softcap)
  double u = 0, c_exp = 0, nb = 0, u_out = 0, eta_out = 0, u_lse = 0, eta_lse = 0, lse_max = 0;
  double eta_c = 0, largest_c = 0, scale = 0, f = 0, d = 0;
  /// The stage-wise profile (docs/bound.md "Stage-wise profiles"), each unit
  /// resolved (0: u): the score's product and addition units (products exact:
  /// u_prod 0) and its scale roundings at u; the rescales' unit over u; P's
  /// rounding theta_p = u_P / (1 - u_P) and its underflow per weight eta_pw (in
  /// units of the largest weight, the pre-cast factor divided out); the P V
  /// accumulation unit; the LSE's arithmetic unit.
  double u_prod = 0, u_acc = 0, k_scale = 5, resc_ratio = 1, theta_p = 0, eta_pw = 0, u_pv = 0, u_lse_arith = 0;
  /// P's pre-cast factor 2^k: the P V accumulator holds the weights times it (its overflow).
  double p_factor = 1;
  /// The weights of sum_d |Q_d| and sum_d |K_jd| in the dot product's
  /// underflow (step 1), by how the scale is applied: folded into Q, scale *
  /// Q_d rounds and meets |K_jd| (fold_k 1); into K likewise (fold_q 1); split
  /// as r = sqrt(scale), both times max(1, r), which any way counts; applied
  /// after the dot product (log2 e folded or not), neither.
  double fold_q = 1, fold_k = 1;
  /// V's descale (fp8, docs/bound.md "fp8 storage"): one rounding at u of each
  /// term of the numerator, added to every key's Phi_j (0 without one). Q's
  /// and K's descales add one rounding each to k_scale.
  double v_descale_u = 0;
  bool row_sum_after_cast = false;
  /// 1 where intermediates flush (docs/bound.md "Flushed subnormals"): then a
  /// sum may flush too, so the dot product's D - 1 additions and the P V
  /// accumulation's n - 1 additions and nb rescales count in the underflow
  /// terms (0: sums of subnormals are exact under gradual underflow).
  double flushed_sums = 0;
  /// The probabilistic bound (docs/bound.md): each gamma_k of a row becomes
  /// gamma_prob(k, u, lambda) with lambda = lambda_for(n (D + 2), u).
  bool probabilistic = false;
};
/// r's bounds (sound and probabilistic) and useless flags, one per O and LSE
/// entry of r.o and r.lse, all 0 before the rows fill them.
void zero_bounds(oracle_result& r);
/// Validates opt.bound (input_error as fill_bounds) and derives the constants;
/// probabilistic selects the probabilistic bound's gammas.
bound_setup make_bound_setup(const attn_case& c, const oracle_options& opt, bool probabilistic = false);

/// The gammas of a row with n visible keys: g_dot for the scores, g_sum for
/// the sums through the rescales (n additions at most: masked keys add exact
/// zeros). +inf where undefined (k u >= 1, sound only).
struct row_gammas {
  double g_dot = 0, g_sum = 0;
  double g_num = 0;  ///< the numerator's sums at the P V accumulation unit (g_sum's where the profile has none)
};
row_gammas gammas_of_row(const bound_setup& s, double n);

/// How far the values a row's bound is evaluated at may lie from the MPFR
/// oracle's (docs/oracle.md, "Tiers"). All zero: they are the oracle's own, and
/// the bound is fill_bounds' bit for bit. Each field widens the formula's
/// inputs in the direction that can only raise the bound.
struct row_slack {
  double p_rel = 0;    ///< for P_j >= p_floor: P_oracle_j <= P_j (1 + p_rel)
  double p_floor = 0;  ///< below it P_j is bounded by exp(-gap_lo_j - log_sum_lo) instead
  double gap_rel = 0;  ///< |gap_oracle_j - gap_j| <= gap_rel gap_j + gap_abs
  double gap_abs = 0;
  double log_sum_abs = 0;  ///< |log_sum_oracle - log_sum| <= log_sum_abs
  double lse_abs = 0;      ///< |LSE_oracle - LSE| <= lse_abs
};

/// One row's per-key terms of the bound and what the O and LSE formulas need.
struct row_terms {
  std::vector<double> p, phi, pk;  ///< per listed key: P_j (raised by the slack), Phi_j, P_j expm1(Phi_j)
  double b = 0, phi_bar = 0;
  double b_den = 0;  ///< b of the denominator alone (the LSE's): without P's rounding where L sums the weights before it
  row_gammas g;      ///< the row's gammas (gammas_of_row)
  double nv = 0;
  bool scores_finite = true;
  bool unbounded = false;  ///< out of domain or a score may overflow: +inf
  /// max(1, s_v) of the row's V descale (fp8): O's absolute underflow terms in raw units (docs/bound.md "fp8 storage").
  double v_underflow = 1;
  double worst_score_error = 0;
};

/// The sink of a row (contract 1.1) as the bound sees it: one more term of the
/// denominator, with an exact score sigma and no value (docs/bound.md, "Variants").
struct sink_term {
  double p = 0;    ///< the sink's share exp(sigma - m) / L of the oracle's denominator
  double gap = 0;  ///< |sigma - max_j S_j|: the subtraction a subject shifting by either one rounds
};

/// What the score variants add to a key's score error and magnitude
/// (docs/bound.md, "Variants"): softcap, ALiBi and bias terms.
struct variant_score {
  double error = 0;      ///< added to the score's absolute error bound gamma_(D+5) T_j + zeta_j
  double magnitude = 0;  ///< an upper bound on |s_j| and its partial sums (overflow test)
};

/// The variant terms of key j in row (bi, h, i) with T_j = t_j; zero for a contract 1.0 case.
variant_score variant_score_terms(const bound_setup& s, const attn_case& c, std::int64_t bi, std::int64_t h, std::int64_t i,
                                  std::int64_t j, double t_j);

/// Computes the per-key terms of row (bi, h, i) whose visible keys are `keys`:
/// raw[k] = sum_d |Q_d K_jd| of keys[k] (d in order), q_abs_sum / q_abs_max of
/// the query row, p_row and gap_row indexed by key j, log_sum of the row.
/// With variants, score_extra[k] holds keys[k]'s variant_score (NULL: none),
/// and a row with a sink appends it after the keys in t.p, t.phi and t.pk.
void row_key_terms(const bound_setup& s, const attn_case& c, const dense_inputs& x, std::size_t key_base,
                   const std::vector<std::int64_t>& keys, const double* raw, double q_abs_sum, double q_abs_max,
                   const double* p_row, const double* gap_row, double log_sum, const row_slack& slack, row_terms& t,
                   const variant_score* score_extra = nullptr, const sink_term* sink = nullptr);

/// Per-column sums over the row's keys, in key order: sum_j pk_j |V_je| (terms
/// with pk_j or V_je zero skipped: never 0 * inf), sum_j |V_je|, max_j |V_je|.
struct column_sums {
  std::vector<double> weighted, v_sum, v_max;
};
void row_column_sums(const dense_inputs& x, std::size_t key_base, const std::vector<std::int64_t>& keys, const double* pk,
                     column_sums& out);

/// The LSE bound of a row at |LSE| <= lse_abs_hi and log L <= log_sum_hi.
double row_lse_bound(const bound_setup& s, const row_terms& t, double log_sum_hi, double lse, double lse_abs_hi);

/// The O bound of column e at |O_e| <= o_abs_hi.
double row_o_bound(const bound_setup& s, const row_terms& t, const column_sums& cs, std::size_t e, double o_abs_hi);

/// True where a sound bound judges nothing useful: +inf, NaN excluded (no
/// bound exists there for either kind), or at least the hull's width, so that
/// every value a normalized combination of the visible V (O) or scores (LSE)
/// can take passes: O: bound >= |O_e| + max_j |V_je|; LSE: bound >= ln n + 1.
inline bool o_bound_useless(double bound, double o_abs, double v_max) { return bound >= o_abs + v_max; }
inline bool lse_bound_useless(double bound, double n) { return bound >= std::log(n) + 1; }

/// sum_d |q_d k_d| in d order (the bound's T_j before the scale).
inline double abs_dot(const double* q, const double* k, std::int64_t d) {
  double raw = 0;
  for (std::int64_t i = 0; i < d; ++i) raw += std::fabs(q[i]) * std::fabs(k[i]);
  return raw;
}

}  // namespace attncheck::oracle_detail
