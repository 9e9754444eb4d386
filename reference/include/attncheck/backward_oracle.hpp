// The backward oracle: dQ, dK and dV of the attention contract's O in high
// precision (docs/oracle.md, "Backward"), and the output gradient dO a case
// draws from its seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "attncheck/case.hpp"

namespace attncheck {

// grad_kind, name(grad_kind) and parse_grad_kind(): attncheck/case.hpp (a case carries its dO recipe).

/// dO for case c: shape (B, Lq, Hq, Dv), c's storage type and layout (the
/// padded layout's gaps hold gap_sentinel), every element drawn from c.seed
/// on its own stream and rounded once to the type. The same header and kind
/// give the same bits on every machine; Q, K, V and the mask are not read.
tensor draw_grad_output(const attn_case& c, grad_kind kind);

/// Gradients of L = sum dO * O, each rounded once to double, dense row-major:
/// dq (B, Lq, Hq, D), dk (B, Lk, Hkv, D), dv (B, Lk, Hkv, Dv); with sinks,
/// d_sinks (Hq): the gradient of each query head's sink logit.
struct backward_result {
  dims4 dq_shape{}, dk_shape{}, dv_shape{};
  std::vector<double> dq, dk, dv;
  std::vector<double> d_sinks;  ///< Hq entries with sinks, else empty
  /// A-priori bounds on |subject - oracle| per element (docs/bound.md,
  /// "Backward"), same shapes; empty unless reference_backward() was given a
  /// backward_bound_params. Finite >= 0 where judged; 0 where the gradient
  /// must be exactly 0 (rows with no visible key, keys no row sees); NaN where
  /// a visible input of the element is not finite (no bound exists); +inf
  /// where an intermediate may overflow the compute type or the declared u is
  /// too coarse for the lengths. A non-finite bound is never a pass.
  std::vector<double> dq_bound, dk_bound, dv_bound;
  /// The bound on |subject - oracle| of each d_sinks entry (returned in f32,
  /// whatever the storage type), with the same meaning; empty without sinks.
  std::vector<double> d_sinks_bound;
  /// The forward oracle's O (B, Lq, Hq, Dv) and LSE (B, Hq, Lq) of the same
  /// run, each rounded once to double, dense row-major: what a backward
  /// subject is handed (rounded to the storage type and to f32) in the bound's class.
  std::vector<double> o, lse;

  /// Position of element (i0, i1, i2, i3) in the dense row-major array of `shape`.
  static std::size_t index(const dims4& shape, std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    return static_cast<std::size_t>(((i0 * shape[1] + i1) * shape[2] + i2) * shape[3] + i3);
  }
};

/// Runs the backward oracle (MPFR at 168 bits, the forward oracle's type and
/// loops) on a validated, materialized case and its dO: P and O recomputed by
/// the forward oracle, then dP = dO V^T, D = rowsum(dO O), dS = P (dP - D),
/// with a softcap c dX = dS (1 - tanh^2(scale q.k / c)) (else dX = dS),
/// dQ = scale dX K, dK = scale dX^T Q (summed over a KV head's G query heads),
/// dV = P^T dO, and with sinks d(sink)_h = -sum_(b,i) exp(sigma_h - LSE) D.
/// Every contract 1.1 variant is covered (window and chunk as visibility,
/// ALiBi and bias as additive terms whose gradient is dS). Masked and padded
/// keys get exactly 0; a row with no visible key contributes nothing (its dO
/// is not read) and its dQ is 0. Throws input_error ("d_o") when dO's shape or
/// type is not the case's or its view leaves its storage.
backward_result reference_backward(const attn_case& c, const tensor& d_o);

/// What a backward subject declares about its arithmetic, for the bound
/// (docs/bound.md, "Backward"). The subject is handed the oracle's O rounded
/// to the case's storage type and its LSE rounded to f32, and returns dQ, dK
/// and dV rounded once to the case's storage type.
struct backward_bound_params {
  double u_compute =
      0x1p-24;             ///< unit roundoff of the compute type (f32); a P or dS rounded to a narrower type declares that type's
  double exp_ulps = 1.0;   ///< c_exp: the declared accuracy of exp, in ulps, as the forward bound counts it
  double tanh_ulps = 1.0;  ///< c_tanh: the declared accuracy of tanh, in ulps (used only with a softcap)
  std::int64_t dq_blocks = 1;   ///< key blocks whose partial sums are added into a row's dQ
  std::int64_t dkv_blocks = 1;  ///< query blocks (over all G query heads of a KV head) added into one key's dK and dV
};

/// reference_backward(c, d_o) plus dq_bound, dk_bound and dv_bound. Throws
/// input_error naming the field when the declaration is invalid (u_compute
/// outside (0, 1), exp_ulps or tanh_ulps negative or not finite, a block count < 1).
backward_result reference_backward(const attn_case& c, const tensor& d_o, const backward_bound_params& bound);

/// The O and LSE a backward subject is handed when they are not the oracle's
/// (e.g. the subject's own forward pass): per element, a bound on their
/// distance from the exact O, dense (B, Lq, Hq, Dv), and from the exact LSE,
/// dense (B, Hq, Lq), each after its rounding to the storage type (O) and to
/// f32 (LSE): for a subject's own forward within its bound, the forward
/// oracle's o_bound and lse_bound (docs/bound.md "Backward", "Handed its own
/// forward"). A NaN error gives its row NaN bounds (no bound exists), an
/// infinite one +inf bounds; rows with no visible key are not read.
struct backward_handed_errors {
  std::vector<double> o, lse;
};

/// reference_backward(c, d_o, bound), its bounds for a subject handed O and
/// LSE within `handed` of the exact ones in place of the oracle's rounded
/// once: E_O,e is handed.o and e_L is handed.lse plus the log2(e) multiply's
/// u (|LSE| + handed.lse). Throws input_error ("handed") when a vector's size
/// is not the case's, besides reference_backward's errors.
backward_result reference_backward(const attn_case& c, const tensor& d_o, const backward_bound_params& bound,
                                   const backward_handed_errors& handed);

}  // namespace attncheck
