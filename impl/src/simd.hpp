// AVX2/FMA helpers shared by the kernel: the vectorized exp, fixed-order
// horizontal reductions, lane masks. Every reduction here has one fixed
// pattern so results never depend on who calls it (determinism).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "attnimpl/attention.hpp"
#include "mutation.hpp"

namespace attnimpl::simd {

/// exp(x) on 8 lanes: Cody-Waite reduction x = n ln2 + r, Cephes degree-7
/// polynomial, 2^n applied in two exact halves so subnormal results round once.
/// NaN propagates; x <= -104 gives 0 (below half the smallest subnormal).
inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-104.0f);
  const __m256 hi = _mm256_set1_ps(88.75f);
  x = _mm256_max_ps(lo, x);  // max/min return the second operand on NaN: NaN survives
  x = _mm256_min_ps(hi, x);
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  if (!ATTNIMPL_MUTANT(exp_reduction_lo_dropped)) r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  if (ATTNIMPL_MUTANT(exp_poly_low_degree)) y = _mm256_setzero_ps();  // degree 5: the r^7 and r^6 terms lost
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
}

/// exp of one float through the same lanes (merges and rescales use it too,
/// so one declared accuracy covers every exp the kernel takes).
inline float exp1(float x) { return _mm_cvtss_f32(_mm256_castps256_ps128(exp8(_mm256_set1_ps(x)))); }

/// Sum of 8 lanes, always ((0+4)+(2+6))+((1+5)+(3+7)).
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// Max of 8 lanes (order is irrelevant for max of non-NaN values).
inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// Lane mask with lanes [0, count) set, count in [0, 8].
inline __m256 first_lanes(std::int64_t count) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), idx));
}

/// 8 consecutive elements of storage type t, exactly, as f32.
inline __m256 load8(const char* p, dtype t) {
  switch (t) {
    case dtype::f16: return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    case dtype::bf16: {
      const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    case dtype::f32: break;
  }
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}

/// In-register transpose of an 8x8 block: r[i][j] <- r[j][i].
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

}  // namespace attnimpl::simd
