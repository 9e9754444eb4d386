// The kernel's vector layer: 8 f32 lanes, the vectorized exp, fixed-order
// horizontal reductions, lane masks, storage loads. Two builds of it, chosen
// by the translation unit that includes it (isa.hpp):
//   ATTNIMPL_ISA_AVX2 1: AVX2+FMA+F16C intrinsics;
//   ATTNIMPL_ISA_AVX2 0: portable C++ that computes the same bits lane by
//   lane (FMA emulated exactly, f16 converted in software).
// Every reduction has one fixed pattern so results never depend on who calls
// it (determinism), and both builds follow the same patterns, so the kernel's
// two paths agree bit for bit (tests/impl/isa_test.cpp).
// Everything sits in an anonymous namespace: each ISA's translation unit has
// its own copy, so the linker can never hand an AVX2 body to the portable path.
#pragma once

#ifndef ATTNIMPL_ISA_AVX2
#error "simd.hpp belongs to an ISA translation unit (kernel_avx512.cpp, kernel_avx2.cpp, kernel_portable.cpp)"
#endif
// kernel_avx512.cpp also sets ATTNIMPL_ISA_AVX512 1: the 16-lane helpers
// below (vf16), used by the tile products only.
#ifndef ATTNIMPL_ISA_AVX512
#define ATTNIMPL_ISA_AVX512 0
#endif

#include <cstdint>
#include <cstring>

#include "attnimpl/attention.hpp"
#include "convert.hpp"
#include "mutation.hpp"
#if ATTNIMPL_ISA_AVX2
#include <immintrin.h>
#endif

namespace attnimpl::simd {
namespace {

#if ATTNIMPL_ISA_AVX2

using vf = __m256;  // 8 f32 lanes
using vm = __m256;  // 8 lane masks, all ones or all zeros

#define ATTNIMPL_SIMD_INLINE inline __attribute__((always_inline))

ATTNIMPL_SIMD_INLINE vf zero() { return _mm256_setzero_ps(); }
ATTNIMPL_SIMD_INLINE vf set1(float x) { return _mm256_set1_ps(x); }
ATTNIMPL_SIMD_INLINE vf broadcast(const float* p) { return _mm256_broadcast_ss(p); }
ATTNIMPL_SIMD_INLINE vf load(const float* p) { return _mm256_loadu_ps(p); }
ATTNIMPL_SIMD_INLINE void store(float* p, vf v) { _mm256_storeu_ps(p, v); }
ATTNIMPL_SIMD_INLINE vf setr(float a, float b, float c, float d, float e, float f, float g, float h) {
  return _mm256_setr_ps(a, b, c, d, e, f, g, h);
}
ATTNIMPL_SIMD_INLINE vf add(vf a, vf b) { return _mm256_add_ps(a, b); }
ATTNIMPL_SIMD_INLINE vf sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
ATTNIMPL_SIMD_INLINE vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
ATTNIMPL_SIMD_INLINE vf div(vf a, vf b) { return _mm256_div_ps(a, b); }
/// a * b + c, rounded once.
ATTNIMPL_SIMD_INLINE vf fmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
/// -(a * b) + c, rounded once.
ATTNIMPL_SIMD_INLINE vf fnmadd(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
/// a > b ? a : b per lane (NaN in either: b).
ATTNIMPL_SIMD_INLINE vf max(vf a, vf b) { return _mm256_max_ps(a, b); }
/// a < b ? a : b per lane (NaN in either: b).
ATTNIMPL_SIMD_INLINE vf min(vf a, vf b) { return _mm256_min_ps(a, b); }
/// Lanes where a != b or either is NaN.
ATTNIMPL_SIMD_INLINE vm not_equal(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_NEQ_UQ); }
/// v where m is set, else 0.
ATTNIMPL_SIMD_INLINE vf keep(vf v, vm m) { return _mm256_and_ps(v, m); }
/// Lanes whose byte flags[i] is nonzero take v, the others take other.
ATTNIMPL_SIMD_INLINE vf select_flagged(const std::uint8_t* flags, vf v, vf other) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(flags));
  const __m256 m = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_setzero_si256()));
  return _mm256_blendv_ps(other, v, m);
}
ATTNIMPL_SIMD_INLINE void prefetch(const char* p) { _mm_prefetch(p, _MM_HINT_T0); }
/// |v| per lane (the sign bit cleared; NaN stays NaN).
ATTNIMPL_SIMD_INLINE vf abs(vf v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
/// mag with the sign bit of sgn per lane (mag's own sign bit ignored).
ATTNIMPL_SIMD_INLINE vf copysign(vf mag, vf sgn) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(sign, mag), _mm256_and_ps(sign, sgn));
}
/// Lanes where a < b (false for NaN) take x, the others y.
ATTNIMPL_SIMD_INLINE vf select_less(vf a, vf b, vf x, vf y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
/// Bit i set where lane i has a < b (false for NaN).
ATTNIMPL_SIMD_INLINE int less_mask(vf a, vf b) { return _mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
/// Bit i set where lane i of p[0 .. 8) is -inf.
ATTNIMPL_SIMD_INLINE int neg_inf_lanes(const float* p) {
  return _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p), _mm256_set1_ps(-__builtin_inff()), _CMP_EQ_OQ));
}

/// f32 a * b + c rounded once.
ATTNIMPL_SIMD_INLINE float fma1(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

/// exp(x) on 8 lanes: Cody-Waite reduction x = n ln2 + r, Cephes degree-7
/// polynomial, 2^n applied in two exact halves so subnormal results round once.
/// NaN propagates; x <= -104 gives 0 (below half the smallest subnormal).
ATTNIMPL_SIMD_INLINE vf exp8(vf x) {
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
ATTNIMPL_SIMD_INLINE float exp1(float x) { return _mm_cvtss_f32(_mm256_castps256_ps128(exp8(_mm256_set1_ps(x)))); }

/// Sum of 8 lanes, always ((0+4)+(2+6))+((1+5)+(3+7)).
ATTNIMPL_SIMD_INLINE float hsum(vf v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// Max of 8 lanes, always max(max(max(0,4), max(2,6)), max(max(1,5), max(3,7)))
/// with max(a, b) = a > b ? a : b.
ATTNIMPL_SIMD_INLINE float hmax(vf v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// 8 consecutive elements of storage type t, exactly, as f32.
ATTNIMPL_SIMD_INLINE vf load8(const char* p, dtype t) {
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
ATTNIMPL_SIMD_INLINE void transpose8(vf r[8]) {
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

#if ATTNIMPL_ISA_AVX512
// 16 f32 lanes: two 8-lane columns side by side. Only lane-wise operations
// (no reduction across lanes), so each lane computes what the 8-lane layer
// computes for it.
using vf16 = __m512;
ATTNIMPL_SIMD_INLINE vf16 zero16() { return _mm512_setzero_ps(); }
ATTNIMPL_SIMD_INLINE vf16 broadcast16(const float* p) { return _mm512_set1_ps(*p); }
ATTNIMPL_SIMD_INLINE vf16 load16(const float* p) { return _mm512_loadu_ps(p); }
ATTNIMPL_SIMD_INLINE void store16(float* p, vf16 v) { _mm512_storeu_ps(p, v); }
/// a * b + c, rounded once.
ATTNIMPL_SIMD_INLINE vf16 fmadd16(vf16 a, vf16 b, vf16 c) { return _mm512_fmadd_ps(a, b, c); }
/// 16 consecutive elements of storage type t, exactly, as f32. The
/// all-lanes maskz forms: GCC 12's unmasked ones start from an undefined
/// register that -Wmaybe-uninitialized reports.
ATTNIMPL_SIMD_INLINE vf16 load16(const char* p, dtype t) {
  const __mmask16 all = 0xffff;
  switch (t) {
    case dtype::f16: return _mm512_maskz_cvtph_ps(all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    case dtype::bf16: {
      const __m512i w = _mm512_maskz_cvtepu16_epi32(all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, w, 16));
    }
    case dtype::f32: break;
  }
  return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
}
/// exp8 on 16 lanes, operation for operation (each lane's result is exp8's
/// for it; maskz forms as in load16).
ATTNIMPL_SIMD_INLINE vf16 exp16(vf16 x) {
  const __mmask16 all = 0xffff;
  x = _mm512_maskz_max_ps(all, _mm512_set1_ps(-104.0f), x);  // NaN survives, as in exp8
  x = _mm512_maskz_min_ps(all, _mm512_set1_ps(88.75f), x);
  const __m512 n = _mm512_maskz_roundscale_ps(all, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  if (!ATTNIMPL_MUTANT(exp_reduction_lo_dropped)) r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  if (ATTNIMPL_MUTANT(exp_poly_low_degree)) y = _mm512_setzero_ps();
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_maskz_cvtps_epi32(all, n);
  const __m512i n1 = _mm512_maskz_srai_epi32(all, ni, 1);
  const __m512i n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, _mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, _mm512_add_epi32(n2, bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(y, s1), s2);
}
/// Lanes 0-7 and 8-15 as 8-lane vectors.
ATTNIMPL_SIMD_INLINE vf low8(vf16 v) { return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), 0)); }
ATTNIMPL_SIMD_INLINE vf high8(vf16 v) { return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), 1)); }
// The 8-lane layer's lane-wise operations on 16 lanes, each lane's result
// that of its 8-lane twin (IEEE operations; min/max with the same operand
// order, so NaN goes the same way).
ATTNIMPL_SIMD_INLINE vf16 set1_16(float x) { return _mm512_set1_ps(x); }
ATTNIMPL_SIMD_INLINE vf16 add16(vf16 a, vf16 b) { return _mm512_add_ps(a, b); }
ATTNIMPL_SIMD_INLINE vf16 sub16(vf16 a, vf16 b) { return _mm512_sub_ps(a, b); }
ATTNIMPL_SIMD_INLINE vf16 mul16(vf16 a, vf16 b) { return _mm512_mul_ps(a, b); }
ATTNIMPL_SIMD_INLINE vf16 div16(vf16 a, vf16 b) { return _mm512_div_ps(a, b); }
/// a < b ? a : b per lane (NaN in either: b), as min().
ATTNIMPL_SIMD_INLINE vf16 min16(vf16 a, vf16 b) { return _mm512_maskz_min_ps(0xffff, a, b); }
/// Bit i set where lane i has a < b (false for NaN).
ATTNIMPL_SIMD_INLINE __mmask16 less_mask16(vf16 a, vf16 b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
/// |v| and copysign as abs() and copysign() (integer ops: AVX-512F has no
/// f32 logic instructions; maskz forms as in load16).
ATTNIMPL_SIMD_INLINE vf16 abs16(vf16 v) {
  return _mm512_castsi512_ps(_mm512_maskz_and_epi32(0xffff, _mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
}
ATTNIMPL_SIMD_INLINE vf16 copysign16(vf16 mag, vf16 sgn) {
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  return _mm512_castsi512_ps(_mm512_maskz_or_epi32(0xffff, _mm512_maskz_andnot_epi32(0xffff, sign, _mm512_castps_si512(mag)),
                                                   _mm512_maskz_and_epi32(0xffff, sign, _mm512_castps_si512(sgn))));
}
/// Lanes whose byte flags[i] is nonzero take v, the others take other.
ATTNIMPL_SIMD_INLINE vf16 select_flagged16(const std::uint8_t* flags, vf16 v, vf16 other) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(flags));
  return _mm512_mask_blend_ps(_mm_test_epi8_mask(bytes, bytes), other, v);
}
/// Lanes 0-7 then 8-15 of v merged into an 8-lane running max, in that
/// order: what two 8-lane max() steps give.
ATTNIMPL_SIMD_INLINE vf max_halves(vf mx, vf16 v) { return _mm256_max_ps(_mm256_max_ps(mx, low8(v)), high8(v)); }
#endif

#else  // portable: the same operations lane by lane, the same bits

struct vf {
  float x[8];
};
struct vm {
  std::uint32_t x[8];
};

#define ATTNIMPL_SIMD_INLINE inline
#define ATTNIMPL_LANES(expr)                     \
  vf out;                                        \
  for (int i = 0; i < 8; ++i) out.x[i] = (expr); \
  return out

ATTNIMPL_SIMD_INLINE std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
ATTNIMPL_SIMD_INLINE float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

/// a * b + c rounded once to f32, exactly what an FMA unit returns for
/// finite, infinite and NaN operands (NaN payloads aside). The product is
/// exact in binary64 (24 + 24 bits); the sum is rounded to odd there (TwoSum
/// gives its exact error, an even result with a nonzero error steps to its
/// odd neighbour toward the error), and rounding to odd at 53 bits then to
/// nearest at 24 is one correct rounding (53 >= 24 + 2).
ATTNIMPL_SIMD_INLINE float fma1(float a, float b, float c) {
  const double p = static_cast<double>(a) * static_cast<double>(b);
  const double cd = c;
  const double s = p + cd;
  const double z = s - p;
  const double e = (p - (s - z)) + (cd - z);  // NaN when s is not finite: no step then
  std::uint64_t u;
  std::memcpy(&u, &s, 8);
  if ((e > 0 || e < 0) && (u & 1) == 0) u = ((e > 0) == (s > 0)) ? u + 1 : u - 1;
  double r;
  std::memcpy(&r, &u, 8);
  return static_cast<float>(r);
}

ATTNIMPL_SIMD_INLINE vf zero() { ATTNIMPL_LANES(0.0f); }
ATTNIMPL_SIMD_INLINE vf set1(float v) { ATTNIMPL_LANES(v); }
ATTNIMPL_SIMD_INLINE vf broadcast(const float* p) { return set1(*p); }
ATTNIMPL_SIMD_INLINE vf load(const float* p) {
  vf out;
  std::memcpy(out.x, p, sizeof out.x);
  return out;
}
ATTNIMPL_SIMD_INLINE void store(float* p, vf v) { std::memcpy(p, v.x, sizeof v.x); }
ATTNIMPL_SIMD_INLINE vf setr(float a, float b, float c, float d, float e, float f, float g, float h) {
  return vf{{a, b, c, d, e, f, g, h}};
}
ATTNIMPL_SIMD_INLINE vf add(vf a, vf b) { ATTNIMPL_LANES(a.x[i] + b.x[i]); }
ATTNIMPL_SIMD_INLINE vf sub(vf a, vf b) { ATTNIMPL_LANES(a.x[i] - b.x[i]); }
ATTNIMPL_SIMD_INLINE vf mul(vf a, vf b) { ATTNIMPL_LANES(a.x[i] * b.x[i]); }
ATTNIMPL_SIMD_INLINE vf div(vf a, vf b) { ATTNIMPL_LANES(a.x[i] / b.x[i]); }
ATTNIMPL_SIMD_INLINE vf fmadd(vf a, vf b, vf c) { ATTNIMPL_LANES(fma1(a.x[i], b.x[i], c.x[i])); }
ATTNIMPL_SIMD_INLINE vf fnmadd(vf a, vf b, vf c) { ATTNIMPL_LANES(fma1(-a.x[i], b.x[i], c.x[i])); }
ATTNIMPL_SIMD_INLINE float max1(float a, float b) { return a > b ? a : b; }
ATTNIMPL_SIMD_INLINE float min1(float a, float b) { return a < b ? a : b; }
ATTNIMPL_SIMD_INLINE vf max(vf a, vf b) { ATTNIMPL_LANES(max1(a.x[i], b.x[i])); }
ATTNIMPL_SIMD_INLINE vf min(vf a, vf b) { ATTNIMPL_LANES(min1(a.x[i], b.x[i])); }
ATTNIMPL_SIMD_INLINE vm not_equal(vf a, vf b) {
  vm out;
  for (int i = 0; i < 8; ++i) out.x[i] = a.x[i] != b.x[i] ? 0xffffffffu : 0u;
  return out;
}
ATTNIMPL_SIMD_INLINE vf keep(vf v, vm m) { ATTNIMPL_LANES(from_bits(bits(v.x[i]) & m.x[i])); }
ATTNIMPL_SIMD_INLINE vf select_flagged(const std::uint8_t* flags, vf v, vf other) {
  ATTNIMPL_LANES(flags[i] ? v.x[i] : other.x[i]);
}
ATTNIMPL_SIMD_INLINE void prefetch(const char* p) { __builtin_prefetch(p, 0, 3); }
ATTNIMPL_SIMD_INLINE vf abs(vf v) { ATTNIMPL_LANES(from_bits(bits(v.x[i]) & 0x7fffffffu)); }
ATTNIMPL_SIMD_INLINE vf copysign(vf mag, vf sgn) {
  ATTNIMPL_LANES(from_bits((bits(mag.x[i]) & 0x7fffffffu) | (bits(sgn.x[i]) & 0x80000000u)));
}
ATTNIMPL_SIMD_INLINE vf select_less(vf a, vf b, vf x, vf y) { ATTNIMPL_LANES(a.x[i] < b.x[i] ? x.x[i] : y.x[i]); }
ATTNIMPL_SIMD_INLINE int less_mask(vf a, vf b) {
  int m = 0;
  for (int i = 0; i < 8; ++i) m |= (a.x[i] < b.x[i] ? 1 : 0) << i;
  return m;
}
ATTNIMPL_SIMD_INLINE int neg_inf_lanes(const float* p) {
  int m = 0;
  for (int i = 0; i < 8; ++i) m |= (p[i] == -__builtin_inff() ? 1 : 0) << i;
  return m;
}

/// One lane of the AVX2 exp8, operation for operation.
ATTNIMPL_SIMD_INLINE float exp_lane(float x) {
  x = max1(-104.0f, x);
  x = min1(88.75f, x);
  // Round to nearest even like _mm256_round_ps: exact for |t| < 2^22 (here
  // |t| < 151), the sign kept so that -0.3 gives -0 as the hardware does.
  const float t = x * 1.44269504088896341f;
  const float big = 12582912.0f;  // 1.5 * 2^23
  float n = (t + big) - big;
  n = from_bits((bits(n) & 0x7fffffffu) | (bits(t) & 0x80000000u));
  float r = fma1(-n, 0.693359375f, x);
  if (!ATTNIMPL_MUTANT(exp_reduction_lo_dropped)) r = fma1(-n, -2.12194440e-4f, r);
  float y = 1.9875691500e-4f;
  y = fma1(y, r, 1.3981999507e-3f);
  if (ATTNIMPL_MUTANT(exp_poly_low_degree)) y = 0.0f;
  y = fma1(y, r, 8.3334519073e-3f);
  y = fma1(y, r, 4.1665795894e-2f);
  y = fma1(y, r, 1.6666665459e-1f);
  y = fma1(y, r, 5.0000001201e-1f);
  y = fma1(y, r * r, r);
  y = y + 1.0f;
  // cvtps2dq: NaN gives the integer indefinite 0x80000000.
  const std::int32_t ni = n != n ? INT32_MIN : static_cast<std::int32_t>(n);
  const std::int32_t n1 = ni >> 1;
  const std::int32_t n2 = static_cast<std::int32_t>(static_cast<std::uint32_t>(ni) - static_cast<std::uint32_t>(n1));
  const float s1 = from_bits((static_cast<std::uint32_t>(n1) + 127u) << 23);
  const float s2 = from_bits((static_cast<std::uint32_t>(n2) + 127u) << 23);
  return (y * s1) * s2;
}

ATTNIMPL_SIMD_INLINE vf exp8(vf x) { ATTNIMPL_LANES(exp_lane(x.x[i])); }
ATTNIMPL_SIMD_INLINE float exp1(float x) { return exp_lane(x); }

ATTNIMPL_SIMD_INLINE float hsum(vf v) {
  const float s0 = v.x[0] + v.x[4], s1 = v.x[1] + v.x[5], s2 = v.x[2] + v.x[6], s3 = v.x[3] + v.x[7];
  return (s0 + s2) + (s1 + s3);
}

ATTNIMPL_SIMD_INLINE float hmax(vf v) {
  const float s0 = max1(v.x[0], v.x[4]), s1 = max1(v.x[1], v.x[5]), s2 = max1(v.x[2], v.x[6]), s3 = max1(v.x[3], v.x[7]);
  return max1(max1(s0, s2), max1(s1, s3));
}

ATTNIMPL_SIMD_INLINE vf load8(const char* p, dtype t) {
  std::uint16_t h[8];
  switch (t) {
    case dtype::f16: {
      std::memcpy(h, p, 16);
      ATTNIMPL_LANES(convert::from_f16(h[i]));
    }
    case dtype::bf16: {
      std::memcpy(h, p, 16);
      ATTNIMPL_LANES(from_bits(static_cast<std::uint32_t>(h[i]) << 16));
    }
    case dtype::f32: break;
  }
  return load(reinterpret_cast<const float*>(p));
}

ATTNIMPL_SIMD_INLINE void transpose8(vf r[8]) {
  vf t[8];
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) t[i].x[j] = r[j].x[i];
  for (int i = 0; i < 8; ++i) r[i] = t[i];
}

#undef ATTNIMPL_LANES

#endif

}  // namespace
}  // namespace attnimpl::simd
