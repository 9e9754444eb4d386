// What the fudge-factor rules of other suites would accept, for comparison
// with the backward bound (docs/bound.md, "Backward"; docs/campaign.md,
// "Backward"): a same-precision reference backward and the two rules that
// judge a kernel by a multiple of that reference's error.
#pragma once

#include <vector>

#include "attncheck/case.hpp"

namespace attncheck {

/// Gradients in double, dense row-major as backward_result's:
/// dq (B, Lq, Hq, D), dk (B, Lk, Hkv, D), dv (B, Lk, Hkv, Dv).
struct gradient_values {
  std::vector<double> dq, dk, dv;
};

/// The same-precision reference the rules measure a kernel against: the
/// formulas evaluated naively in f32 (scores Q K^T scaled in f32, P from an
/// f32 softmax with the row maximum subtracted, D = sum_j P dP, dP = dO V^T,
/// dQ = scale dS K and dV = P^T dO summed over each row's visible keys in key
/// order, dK = scale dS^T Q summed over the KV head's rows in head-then-row
/// order), each gradient rounded once to the case's storage type. A row with
/// no visible key adds nothing; a key no row sees gets +0. For a validated,
/// materialized contract 1.0 case and its dO (draw_grad_output).
gradient_values same_precision_backward(const attn_case& c, const tensor& d_o);

/// PyTorch's rule (test_transformers.py, get_tolerances with fudge factor
/// 180 for the gradients): atol = 180 max(max |ref - exact|, 1e-5), rtol =
/// 180 max(max |ref - exact| / |exact|, 1.3e-6) (a NaN ratio counts 1.3e-6;
/// rtol over 1e30 falls back to 1.3e-6); `got` is accepted when |got - exact|
/// <= atol + rtol |exact| at every element. One tensor: ref and exact of
/// got's size.
bool pytorch_rule_accepts(const std::vector<double>& got, const std::vector<double>& ref, const std::vector<double>& exact);

/// FlashAttention's rule (test_flash_attn.py): max |got - exact| <= 2 max
/// |ref - exact| over the tensor (a NaN in got is never accepted).
bool flash_rule_accepts(const std::vector<double>& got, const std::vector<double>& ref, const std::vector<double>& exact);

}  // namespace attncheck
