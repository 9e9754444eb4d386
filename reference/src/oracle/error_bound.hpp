// The a-priori per-element error bound of SPEC.md "The error bound", for O and
// LSE. Derivation, final formula and what it does not cover: docs/bound.md.
#pragma once

#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/dtype.hpp"
#include "attncheck/oracle.hpp"

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

/// Exponent range of the compute type. SPEC "Types": compute is at least f32,
/// so any u >= 2^-24 (f32, tf32, bf16 compute) has f32's range; a finer u is
/// taken as binary64.
struct compute_range {
  double smallest_subnormal;  ///< absolute spacing near zero: underflow error <= half of it
  double largest_finite;
};
compute_range compute_range_of(double u_compute);

/// gamma_n = n u / (1 - n u) (Higham); +inf when n u >= 1 (no bound exists).
double gamma_n(double n, double u);

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
void fill_bounds(const attn_case& c, const oracle_options& opt, const std::vector<double>& gap,
                 const std::vector<double>& log_sum, oracle_result& r);

}  // namespace attncheck::oracle_detail
