// The high-precision reference oracle: naive attention straight from docs/spec.md,
// plus the a-priori per-element error bound of docs/spec.md "The error bound".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attncheck/case.hpp"

namespace attncheck {

/// How a subject applies the scale (docs/bound.md, step 1): how many roundings
/// at the compute unit it adds to each term of a score.
enum class scale_mode : std::uint8_t {
  any,           ///< any way docs/spec.md allows (5: the sqrt split with log2 e folded in)
  after_dot,     ///< scale * (q . k): 1
  into_q,        ///< (scale q) . k: 1
  into_k,        ///< q . (scale k): 1
  sqrt_split,    ///< (r q) . (r k), r = fl(sqrt scale): 4
  log2e_folded,  ///< (q . k) * fl(scale log2 e), then exp2: 2
};

/// A stage-wise precision profile (docs/abi.md "Stage-wise precision
/// profile", docs/bound.md "Stage-wise profiles"): each stage's unit roundoff.
/// A unit of 0 is the compute unit (bound_params::u_compute), so the default
/// profile is the one-u declaration, and gives its bounds bit for bit.
struct stage_profile {
  double qk_product_u = 0;  ///< each product q_d k_d; exact_products for exact ones (bf16 or f16 into f32)
  bool exact_products = false;
  double qk_accum_u = 0;  ///< the dot product's additions
  scale_mode scale = scale_mode::any;
  double rescale_u = 0;             ///< the online softmax's rescale products and subtractions
  double p_u = 0;                   ///< P's format before P V: 0 keeps P at the compute unit (no rounding of its own)
  double p_eta = 0;                 ///< that format's smallest subnormal (its underflow)
  int p_factor_log2 = 0;            ///< P is multiplied by 2^this before the rounding (and divided after P V)
  bool row_sum_after_cast = false;  ///< L sums the rounded P (else the unrounded weights)
  double pv_accum_u = 0;            ///< the P V accumulation
  double lse_u = 0;                 ///< the LSE's log and add
  bool is_default() const {
    return qk_product_u == 0 && !exact_products && qk_accum_u == 0 && scale == scale_mode::any && rescale_u == 0 && p_u == 0 &&
           p_factor_log2 == 0 && !row_sum_after_cast && pv_accum_u == 0 && lse_u == 0;
  }
};

/// What the subject declares about its arithmetic, for the bound.
struct bound_params {
  double u_compute = 0x1p-24;   ///< unit roundoff of the compute type (f32)
  double exp_ulps = 1.0;        ///< c_exp: the declared accuracy of exp, in ulps
  std::int64_t key_blocks = 1;  ///< nb: online-softmax rescales (blocks + splits) over the longest row
  double tanh_ulps = 1.0;       ///< c_tanh: the declared accuracy of tanh, in ulps (used only with a softcap)
  stage_profile profile{};      ///< per-stage units; the default: every stage at u_compute
  /// Subnormals flushed to zero (docs/bound.md "Flushed subnormals"): every
  /// intermediate result (products, sums, exp, rescales, P's rounding), and O
  /// and LSE on storing. Each widens the underflow terms from half the
  /// smallest subnormal to the smallest normal of the stage's format.
  bool flush_intermediates = false;
  bool flush_outputs = false;
  /// Every input element below 2^-126 in magnitude (f32's smallest normal: a
  /// subnormal f32 or bf16, never an f16 value, which f32 holds normal) read
  /// as zero, as x86's DAZ or a GPU's ftz on loading: the oracle computes on
  /// the inputs so flushed (Q, K, V and the bias), so what the subject was
  /// handed is judged as it reads it.
  bool flush_inputs = false;
};

/// The probabilistic bound's stated failure probability per element of O or
/// LSE (docs/bound.md, "The probabilistic bound"): lambda is chosen per row so
/// that the union of the row's rounding-error events fails at most this often.
inline constexpr double prob_failure_per_element = 0x1p-40;

/// Precision the oracle computes in.
enum class oracle_precision : std::uint8_t {
  mpfr50,      ///< default: Boost.Multiprecision MPFR at 50 decimal digits (static_mpfr_float_50, 168 bits)
  mpfr100,     ///< self-check: mpfr_float_100
  cpp_bin100,  ///< self-check on another backend: cpp_bin_float_100
  binary64,    ///< plain double: for cost comparison and fast bound-only use, never as the oracle
  /// The oracle at a fraction of the cost: the fast binary64 tier, whose own
  /// error bound is added to o_bound and lse_bound, where that error is at most
  /// fast_tier_fraction of the bound on every element of the case; otherwise the
  /// whole case is computed by mpfr50 (docs/oracle.md, "Tiers"). With want_p
  /// always mpfr50: P carries no bound of its own.
  auto_tier,
};

/// Which computation produced an oracle_result.
enum class oracle_tier : std::uint8_t {
  multiprecision,  ///< the docs/spec.md loops in mpfr50 (default, and auto_tier's fallback), mpfr100 or cpp_bin100
  binary64,        ///< oracle_precision::binary64: the same loops in plain double, never the oracle
  fast_binary64,   ///< auto_tier's fast tier: its own error is inside o_bound and lse_bound
};

/// "multiprecision", "binary64" or "fast_binary64".
std::string_view name(oracle_tier t);

/// auto_tier accepts its fast tier only where, on every element, the bound it
/// returns exceeds the bound mpfr50 would return by at most this share of it
/// (its own error plus the slack of evaluating the bound at its values), and
/// its value lies within half this share of the bound from mpfr50's: a subject
/// it accepts is within (1 + 2^-19) times the MPFR bound of the MPFR value, and
/// every subject mpfr50 accepts, it accepts too (docs/oracle.md, "Tiers").
inline constexpr double fast_tier_fraction = 0x1p-20;

struct oracle_options {
  oracle_precision precision = oracle_precision::mpfr50;
  bool want_p = false;          ///< also return the weights P
  bound_params bound{};         ///< for o_bound and lse_bound
  dtype out_type = dtype::f32;  ///< storage type of O (u_out in the bound)
  /// Also return o_accuracy and lse_accuracy: what the tier that computed the
  /// result guarantees about it (costs one binary64 pass for an MPFR result).
  bool want_accuracy = false;
};

/// Dense results. O and bounds: (B, Lq, Hq, Dv) row-major; LSE: (B, Hq, Lq);
/// P: (B, Hq, Lq, Lk). Values are the high-precision results rounded once to
/// double. Fully masked rows: O = 0, P = 0, LSE = -inf.
/// Bounds (docs/bound.md) on |subject - oracle| per element: finite >= 0 when
/// every visible input of the element is finite; 0 in rows with no visible key
/// (O must be exactly 0, LSE exactly -inf); NaN when a visible input is NaN or
/// inf (no bound exists); +inf when the element may overflow its storage type
/// or an f32 intermediate, or the declared u is too coarse for the lengths.
/// A non-finite bound is never a pass: the caller decides such elements.
struct oracle_result {
  std::vector<double> o, o_bound;
  std::vector<double> lse, lse_bound;
  /// The probabilistic bound (docs/bound.md, "The probabilistic bound"): the
  /// same formula with each gamma_k replaced by min(gamma_k, gamma~_k) of
  /// Higham and Mary (2019), holding with probability at least
  /// 1 - prob_failure_per_element per element when rounding errors are
  /// independent and of mean zero. Same special values as o_bound/lse_bound.
  /// It never replaces the sound bound: the comparison uses it only where the
  /// sound bound is useless (o_sound_useless), as its own verdict.
  std::vector<double> o_pbound, lse_pbound;
  /// 1 where the sound bound is +inf or accepts every value the hull allows
  /// (O: bound >= |O_e| + max_j |V_je|; LSE: bound >= ln n + 1); 0 elsewhere.
  std::vector<std::uint8_t> o_sound_useless, lse_sound_useless;
  std::vector<double> p;
  /// With want_accuracy: per element, the guaranteed absolute distance of the
  /// returned double from the exact real value of docs/spec.md's attention,
  /// stated by the tier that computed it (oracle_accuracy_statement): for
  /// multiprecision, the "Accuracy" section's eps times the value's scale plus
  /// the one rounding to double; for fast_binary64, the tier's own error
  /// estimate E_own. 0 in rows with no visible key (exact O = 0, LSE = -inf);
  /// NaN where nothing is claimed (a non-finite visible input); empty for the
  /// binary64 precision (never claimed) and without want_accuracy.
  std::vector<double> o_accuracy, lse_accuracy;
  oracle_tier tier = oracle_tier::multiprecision;  ///< what produced O, LSE and P
  std::int64_t b = 0, hq = 0, lq = 0, lk = 0, dv = 0;

  std::size_t o_index(std::int64_t bi, std::int64_t i, std::int64_t h, std::int64_t e) const {
    return static_cast<std::size_t>(((bi * lq + i) * hq + h) * dv + e);
  }
  std::size_t lse_index(std::int64_t bi, std::int64_t h, std::int64_t i) const {
    return static_cast<std::size_t>((bi * hq + h) * lq + i);
  }
  std::size_t p_index(std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) const {
    return static_cast<std::size_t>(((bi * hq + h) * lq + i) * lk + j);
  }
};

/// Runs the oracle on a validated, materialized case.
oracle_result reference(const attn_case& c, const oracle_options& opt = {});

/// auto_tier's fast tier alone: its result (tier fast_binary64, its own error
/// inside o_bound and lse_bound) where auto_tier would return it, nullopt where
/// auto_tier would fall back to mpfr50. For callers that may leave a case
/// unjudged rather than pay for MPFR (the laws' required-effect checks).
/// opt.precision and opt.want_p are ignored.
std::optional<oracle_result> fast_oracle(const attn_case& c, const oracle_options& opt = {});

/// The accuracy the tier that produced a result states for it, as one
/// sentence whose numbers are those of that precision (printed by `attncheck
/// oracle` and in docs/oracle.md); o_accuracy and lse_accuracy are its per-element values.
std::string oracle_accuracy_statement(oracle_precision precision, oracle_tier tier);

/// "mpfr50", "mpfr100", "cpp_bin100", "binary64" or "auto".
std::string_view name(oracle_precision p);

}  // namespace attncheck
