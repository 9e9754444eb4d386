// attnimpl backward: dQ, dK and dV of attention (docs/spec.md "Backward"),
// FlashAttention 2's algorithm on the CPU: key blocks outside, query blocks
// inside, P recomputed from the LSE handed in, D = rowsum(dO O) in a
// preprocessing pass, every sum in f32, each result rounded once to the
// storage type. The contract 1.1 score variants (window, chunk, softcap,
// ALiBi, bias, sinks) as the forward takes them, with the sinks' gradient.
// Deterministic: one fixed order of every sum, whatever the thread count or
// the CPU's vector width (docs/impl.md "Backward").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

#include "attnimpl/attention.hpp"

namespace attnimpl {

/// One backward call: the forward problem's inputs, the forward O and LSE
/// handed in, dO, and the three outputs (shapes of Q, K and V, any strides).
struct backward_args {
  shape dims;
  tensor_in q, k, v;
  tensor_in o;                               ///< forward O (b, lq, hq, dv), the storage type
  const float* lse = nullptr;                ///< forward LSE[b, h, i] (f32; -inf: the row sees nothing)
  std::array<std::int64_t, 3> lse_stride{};  ///< over (b, h, i)
  tensor_in d_o;                             ///< dO (b, lq, hq, dv)
  tensor_out dq, dk, dv;
  std::optional<float> scale;  ///< nullopt: default_scale(d)
  bool causal = false;
  const std::int64_t* key_len = nullptr;  ///< optional, b entries
  mask_in mask;                           ///< optional
  /// The forward's score variants (contract 1.1), the same fields and rules
  /// (check_variants): P is recomputed from the scores they define, the
  /// softcap's derivative 1 - tanh^2 enters dS, and the keys they hide are
  /// hidden here too.
  variants var;
  /// dL/dsinks (hq entries, f32): -sum over (b, i) of exp(sinks[h] - LSE) D
  /// for the rows that see a key (0 exactly for a sink of -inf). Must be set
  /// when var.sinks is; ignored (not written) otherwise.
  float* d_sinks = nullptr;
};

/// Block sizes of the backward pass; 0: 64 each.
struct backward_config {
  std::int64_t q_tile = 0;    ///< query rows per inner block
  std::int64_t k_tile = 0;    ///< keys per outer block
  int threads = 0;            ///< worker threads over (batch element, KV head); 0: hardware concurrency. Same bits at any count
  isa simd = isa::automatic;  ///< vector width of the loops; the same bits on each (an unsupported one: invalid_argument)
};

/// Computes dQ, dK, dV (and d_sinks with sinks). Keys no row sees get
/// dK = dV = 0; rows that see no key get dQ = 0 and add nothing. Returns
/// invalid_argument (and writes nothing) for bad shapes, null pointers,
/// hq % hkv != 0, key_len out of range, a bad variants field (named as
/// check_variants names it), sinks without d_sinks or a negative tile.
status attention_backward(const backward_args& args, const backward_config& cfg = {});

/// The block counts the backward bound needs (docs/bound.md "Backward"):
/// key blocks added into a row's dQ, and query blocks (over the G query
/// heads) added into one key's dK and dV.
std::pair<std::int64_t, std::int64_t> backward_blocks(const shape& dims, const backward_config& cfg = {});

}  // namespace attnimpl
