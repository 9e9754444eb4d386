// The kernel's lane widths as types: lanes8 (the 8-lane layer of simd.hpp)
// and, with AVX-512, lanes16, each naming the same lane-wise operations, so
// that code written once (tanh_lanes below, the score variants, the tile
// products) serves both widths with each lane's result the same at either.
// Like simd.hpp it belongs to an ISA translation unit, in an anonymous namespace.
#pragma once

#include "simd.hpp"

namespace attnimpl::simd {
namespace {

/// The odd Taylor series of tanh in z = x^2, highest term first (Horner):
/// tanh(x) = x + x z (c[8] + z (c[7] + ...)). One list for every width, so
/// every width takes the same terms.
inline constexpr int tanh_series_terms = 9;
inline constexpr float tanh_series[tanh_series_terms] = {-2.3912911424e-4f,  5.9002744095e-04f,  -1.4558343871e-03f,
                                                         3.5921280366e-03f,  -8.8632355299e-03f, 2.1869488536e-02f,
                                                         -5.3968253968e-02f, 1.3333333333e-01f,  -3.3333333333e-01f};

/// The lane-wise operations of one width as a type, so that code written
/// once (tanh_lanes below, the score variants, the tile products) serves the
/// 8-lane layer and, with AVX-512, the 16-lane one: each lane's result is the
/// same at either width. n lanes; all: the less_mask of every lane set.
struct lanes8 {
  using v = vf;
  static constexpr int n = 8;
  static constexpr int all = 0xff;
  static ATTNIMPL_SIMD_INLINE v zero() { return simd::zero(); }
  static ATTNIMPL_SIMD_INLINE v set1(float x) { return simd::set1(x); }
  static ATTNIMPL_SIMD_INLINE v broadcast(const float* p) { return simd::broadcast(p); }
  static ATTNIMPL_SIMD_INLINE v load(const float* p) { return simd::load(p); }
  static ATTNIMPL_SIMD_INLINE void store(float* p, v x) { simd::store(p, x); }
  static ATTNIMPL_SIMD_INLINE v add(v a, v b) { return simd::add(a, b); }
  static ATTNIMPL_SIMD_INLINE v sub(v a, v b) { return simd::sub(a, b); }
  static ATTNIMPL_SIMD_INLINE v mul(v a, v b) { return simd::mul(a, b); }
  static ATTNIMPL_SIMD_INLINE v div(v a, v b) { return simd::div(a, b); }
  static ATTNIMPL_SIMD_INLINE v fmadd(v a, v b, v c) { return simd::fmadd(a, b, c); }
  static ATTNIMPL_SIMD_INLINE v min(v a, v b) { return simd::min(a, b); }
  static ATTNIMPL_SIMD_INLINE v abs(v x) { return simd::abs(x); }
  static ATTNIMPL_SIMD_INLINE v copysign(v mag, v sgn) { return simd::copysign(mag, sgn); }
  static ATTNIMPL_SIMD_INLINE v exp(v x) { return exp8(x); }
  static ATTNIMPL_SIMD_INLINE int less_mask(v a, v b) { return simd::less_mask(a, b); }
  static ATTNIMPL_SIMD_INLINE v select_less(v a, v b, v x, v y) { return simd::select_less(a, b, x, y); }
  /// 0, 1, ..., 7.
  static ATTNIMPL_SIMD_INLINE v iota() { return setr(0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f); }
};

#if ATTNIMPL_ISA_AVX512
struct lanes16 {
  using v = vf16;
  static constexpr int n = 16;
  static constexpr int all = 0xffff;
  static ATTNIMPL_SIMD_INLINE v zero() { return zero16(); }
  static ATTNIMPL_SIMD_INLINE v set1(float x) { return set1_16(x); }
  static ATTNIMPL_SIMD_INLINE v broadcast(const float* p) { return broadcast16(p); }
  static ATTNIMPL_SIMD_INLINE v load(const float* p) { return load16(p); }
  static ATTNIMPL_SIMD_INLINE void store(float* p, v x) { store16(p, x); }
  static ATTNIMPL_SIMD_INLINE v add(v a, v b) { return add16(a, b); }
  static ATTNIMPL_SIMD_INLINE v sub(v a, v b) { return sub16(a, b); }
  static ATTNIMPL_SIMD_INLINE v mul(v a, v b) { return mul16(a, b); }
  static ATTNIMPL_SIMD_INLINE v div(v a, v b) { return div16(a, b); }
  static ATTNIMPL_SIMD_INLINE v fmadd(v a, v b, v c) { return fmadd16(a, b, c); }
  static ATTNIMPL_SIMD_INLINE v min(v a, v b) { return min16(a, b); }
  static ATTNIMPL_SIMD_INLINE v abs(v x) { return abs16(x); }
  static ATTNIMPL_SIMD_INLINE v copysign(v mag, v sgn) { return copysign16(mag, sgn); }
  static ATTNIMPL_SIMD_INLINE v exp(v x) { return exp16(x); }
  static ATTNIMPL_SIMD_INLINE int less_mask(v a, v b) { return less_mask16(a, b); }
  static ATTNIMPL_SIMD_INLINE v select_less(v a, v b, v x, v y) { return _mm512_mask_blend_ps(less_mask16(a, b), y, x); }
  /// 0, 1, ..., 15.
  static ATTNIMPL_SIMD_INLINE v iota() { return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
};
#endif

/// tanh(x) on L::n lanes (the softcap's), built from the operations above so
/// every build gives the same bits. |x| < 0.5: the odd Taylor series to x^19
/// (the next term is below 2^-27 relative); otherwise (1 - e) / (1 + e) with
/// e = exp(-2|x|), |x| clamped to 10 (tanh(10) rounds to 1). The sign is
/// copied back, so tanh(-0) = -0; NaN propagates. Accuracy: tanh_ulps().
template <class L>
ATTNIMPL_SIMD_INLINE typename L::v tanh_lanes(typename L::v x) {
  using v = typename L::v;
  v a = L::abs(x);
  a = L::min(L::set1(10.0f), a);  // NaN: a stays NaN (min returns its second operand)
  const v threshold = L::set1(0.5f);
  // Each lane's result is that of its own branch: a branch no lane takes is
  // skipped (softcap inputs are mostly small), the bits are the same.
  const int small_lanes = L::less_mask(a, threshold);
  v small = a, large = a;
  if (small_lanes != 0) {
    const v z = L::mul(a, a);
    v poly = L::set1(tanh_series[0]);
    for (int k = 1; k < tanh_series_terms; ++k) poly = L::fmadd(poly, z, L::set1(tanh_series[k]));
    small = L::fmadd(L::mul(a, z), poly, a);
  }
  if (small_lanes != L::all) {
    const v e = L::exp(L::mul(L::set1(-2.0f), a));
    const v one = L::set1(1.0f);
    large = L::div(L::sub(one, e), L::add(one, e));
  }
  return L::copysign(L::select_less(a, threshold, small, large), x);
}

ATTNIMPL_SIMD_INLINE vf tanh8(vf x) { return tanh_lanes<lanes8>(x); }
#if ATTNIMPL_ISA_AVX512
ATTNIMPL_SIMD_INLINE vf16 tanh16(vf16 x) { return tanh_lanes<lanes16>(x); }
#endif

}  // namespace
}  // namespace attnimpl::simd
