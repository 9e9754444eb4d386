// The naive f32 baseline the bench compares against: scores materialized
// (Lq x Lk per head), Eigen GEMM, row softmax, Eigen GEMM. Fast per flop,
// O(Lq Lk) memory: the design attnimpl avoids.
#pragma once

#include <cstdint>

namespace attnimpl::bench {

/// Dense (b, l, h, d) f32 tensors; K/V have hkv heads; query head h uses h / (hq / hkv).
void naive_attention_f32(const float* q, const float* k, const float* v, float* o, std::int64_t b, std::int64_t hq,
                         std::int64_t hkv, std::int64_t lq, std::int64_t lk, std::int64_t d, bool causal, int threads);

}  // namespace attnimpl::bench
