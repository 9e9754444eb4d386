// The naive baseline the bench compares with: materialized scores, Eigen
// GEMM, softmax, GEMM, f32, compiled for AVX2+FMA like a user's own.
#pragma once

#include <cstdint>

namespace attnimpl::bench {

/// Q (b, lq, hq, d), K and V (b, lk, hkv, d), O (b, lq, hq, d), contiguous.
struct naive_problem {
  const float *q, *k, *v;
  float* o;
  std::int64_t b, hq, hkv, lq, lk, d;
  bool causal;
};

/// Runs on `threads` threads; false (nothing computed) where the CPU has no AVX2+FMA.
bool naive_attention_f32(const float* q, const float* k, const float* v, float* o, std::int64_t b, std::int64_t hq,
                         std::int64_t hkv, std::int64_t lq, std::int64_t lk, std::int64_t d, bool causal, int threads);

/// Heads first, first + step, ... of p, with a scores buffer of lq * lk floats.
void naive_heads_avx2(const naive_problem& p, std::int64_t first, std::int64_t step, float* scores);

}  // namespace attnimpl::bench
