// The oracle's fast tier: docs/spec.md's attention in binary64 over dense decoded
// inputs, with its own a-priori error bound (against the MPFR oracle's
// doubles) added to the bound of docs/bound.md. Derivation and constants: docs/oracle.md,
// "Tiers". reference() with oracle_precision::auto_tier uses it when accepted.
#pragma once

#include <string>
#include <vector>

#include "attncheck/oracle.hpp"

namespace attncheck::oracle_detail {

/// Every constant of the fast tier, each with its reason (docs/oracle.md, "Tiers").
namespace fast_constants {
/// Unit roundoff of binary64.
inline constexpr double u = 0x1p-53;
/// Declared accuracy of glibc's double exp and log, in ulps: 8 times the worst
/// error test_fast_tier measures against MPFR on the machine running the tests
/// (0.503 ulps for exp, 0.500 for log with glibc 2.36), which fails if it is exceeded.
/// One ulp of a normal result y is at most 2u |y|, so c ulps is 2 c u relative.
inline constexpr double exp_ulps = 4;
/// Declared accuracy of glibc's double tanh, in ulps (the softcap variant):
/// 8 times the worst error test_fast_tier measures against MPFR (1.98 ulps with
/// glibc 2.36 over 30,000 arguments), which fails if it is exceeded.
inline constexpr double tanh_ulps = 16;
/// Multiplies the first-order terms of the fast tier's own error: the dropped
/// second-order terms are products of perturbations that are all <= 2^-30
/// when a row is accepted (linear_limit), so 2 covers them with room to spare.
inline constexpr double safety_factor = 2;
/// A row is inside the first-order analysis only when every weight that is not
/// negligible has log-perturbation Phi64_j <= this, and so is b64.
inline constexpr double linear_limit = 0x1p-30;
/// Weights P_j below this are bounded from their logs instead of relatively:
/// exp may return a subnormal (absolute, not relative, error) below 2^-1022.
inline constexpr double p_floor = 0x1p-1000;
/// The bound of docs/bound.md evaluated at the fast values plus their slack is raised by
/// this relative margin: the formula's own evaluation in double (a few
/// roundings of relative 2^-53 each, libm's expm1/log1p/exp/log within a few
/// ulps) is then monotone in its inputs with room to spare.
inline constexpr double evaluation_margin = 0x1p-40;
/// A case is accepted only when, on every element, the fast tier's own error
/// is at most this share of the bound of docs/bound.md it is added to (half of
/// fast_tier_fraction: the other half absorbs the slack of evaluating the
/// bound at the fast values).
inline constexpr double own_share = fast_tier_fraction / 2;
}  // namespace fast_constants

/// What the fast tier produced for a case.
struct fast_tier_result {
  /// O, LSE (and P when asked) in binary64; o_bound and lse_bound are the
  /// combined bounds: docs/bound.md bound at the fast values plus slack, times
  /// 1 + evaluation_margin, plus the fast tier's own error.
  oracle_result r;
  /// The fast tier's own error bound per element, against the MPFR oracle's
  /// value rounded to double; +inf where the row is outside the analysis
  /// (non-finite values, perturbations above linear_limit). 0 in rows with no
  /// visible key (O = 0 and LSE = -inf exactly, or sigma exactly with a sink).
  std::vector<double> o_error, lse_error;
  /// True when every element's bound is finite and own error <= own_share of it.
  bool accepted = false;
  /// When not accepted: the first reason, e.g. "row 3: weights outside the linear range".
  std::string reason;
};

/// Test-only ways to make the fast tier wrong on purpose, so the self-check can
/// show it catches a fast tier that is less accurate than it claims.
struct fast_tier_hooks {
  /// exp results of odd-numbered visible keys (the 2nd, 4th, ... of a row)
  /// multiplied by (1 + this): a libm far worse than declared, which moves P, O and LSE.
  double exp_relative_error = 0;
  /// tanh results (softcap) of odd-numbered visible keys multiplied by (1 + this).
  double tanh_relative_error = 0;
  /// The sink's weight exp(sigma - m) multiplied by (1 + this).
  double sink_relative_error = 0;
};

/// Runs the fast tier on a validated, materialized case. Throws input_error
/// for an invalid opt.bound, as reference() does.
fast_tier_result fast_tier(const attn_case& c, const oracle_options& opt, const fast_tier_hooks& hooks = {});

}  // namespace attncheck::oracle_detail
