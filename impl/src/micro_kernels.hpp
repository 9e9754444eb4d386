// Register-blocked tile products. Each output element is one fixed chain of
// FMAs in index order (over d for scores, over keys for P.V), whatever the
// block shape, so a row's bits never depend on which rows share its tile.
#pragma once

// Every loop over NR/NV/NE is fully unrolled so the accumulators live in
// registers (without it GCC 12 keeps a stack copy and stores it each step).

#include <cstdint>

#include "attnimpl/attention.hpp"
#include "lanes.hpp"

namespace attnimpl::micro {
namespace {  // one copy per ISA translation unit (simd.hpp)

/// s[r][c] = sum_dd q[r][dd] * kt[dd][c] for NR rows and NV vectors of L::n
/// columns.
template <int NR, int NV, class L>
inline void scores_in(const float* q, std::int64_t ldq, const float* kt, std::int64_t ldk, std::int64_t d, float* s,
                      std::int64_t lds) {
  typename L::v acc[NR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = L::zero();
  for (std::int64_t dd = 0; dd < d; ++dd) {
    typename L::v kv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) kv[v] = L::load(kt + dd * ldk + L::n * v);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const typename L::v qb = L::broadcast(q + r * ldq + dd);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = L::fmadd(qb, kv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) L::store(s + r * lds + L::n * v, acc[r][v]);
}

/// s[r][c] = sum_dd q[r][dd] * kt[dd][c] for NR rows and NV*8 columns.
template <int NR, int NV>
inline void scores(const float* q, std::int64_t ldq, const float* kt, std::int64_t ldk, std::int64_t d, float* s,
                   std::int64_t lds) {
#if ATTNIMPL_ISA_AVX512
  if constexpr (NV % 2 == 0) {  // pairs of 8-lane columns in 16-lane registers: the same chains
    scores_in<NR, NV / 2, simd::lanes16>(q, ldq, kt, ldk, d, s, lds);
    return;
  }
#endif
  scores_in<NR, NV, simd::lanes8>(q, ldq, kt, ldk, d, s, lds);
}

/// acc[r][e] += sum_{j < kc} p[r][j] * v[j][e0 + e] for NR rows and NE*8 columns,
/// one FMA per (j, e) in increasing j. V rows hold storage type T, widened to
/// f32 in registers (exact).
template <int NR, int NE, dtype T>
inline void weighted_values(const float* p, std::int64_t ldp, const char* const* v, std::int64_t e0, std::int64_t kc, float* acc,
                            std::int64_t lda) {
  constexpr std::int64_t es = T == dtype::f32 ? 4 : 2;
#if ATTNIMPL_ISA_AVX512
  if constexpr (NE >= 2) {  // pairs of 8-lane columns in 16-lane registers (an odd one left in 8): the same chains
    constexpr int NW = NE / 2, NT = NE % 2;
    simd::vf16 w[NR][NW];
    simd::vf t[NR][NT + 1];
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 8
      for (int e = 0; e < NW; ++e) w[r][e] = simd::load16(acc + r * lda + 16 * e);
      if constexpr (NT) t[r][0] = simd::load(acc + r * lda + 16 * NW);
    }
    for (std::int64_t j = 0; j < kc; ++j) {
      simd::vf16 vw[NW];
#pragma GCC unroll 8
      for (int e = 0; e < NW; ++e) vw[e] = simd::load16(v[j] + (e0 + 16 * e) * es, T);
      simd::vf vt = simd::zero();
      if constexpr (NT) vt = simd::load8(v[j] + (e0 + 16 * NW) * es, T);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        const simd::vf16 pw = simd::broadcast16(p + r * ldp + j);
#pragma GCC unroll 8
        for (int e = 0; e < NW; ++e) w[r][e] = simd::fmadd16(pw, vw[e], w[r][e]);
        if constexpr (NT) t[r][0] = simd::fmadd(simd::broadcast(p + r * ldp + j), vt, t[r][0]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 8
      for (int e = 0; e < NW; ++e) simd::store16(acc + r * lda + 16 * e, w[r][e]);
      if constexpr (NT) simd::store(acc + r * lda + 16 * NW, t[r][0]);
    }
    return;
  }
#endif
  simd::vf a[NR][NE];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int e = 0; e < NE; ++e) a[r][e] = simd::load(acc + r * lda + 8 * e);
  for (std::int64_t j = 0; j < kc; ++j) {
    simd::vf vv[NE];
#pragma GCC unroll 8
    for (int e = 0; e < NE; ++e) vv[e] = simd::load8(v[j] + (e0 + 8 * e) * es, T);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const simd::vf pb = simd::broadcast(p + r * ldp + j);
#pragma GCC unroll 8
      for (int e = 0; e < NE; ++e) a[r][e] = simd::fmadd(pb, vv[e], a[r][e]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int e = 0; e < NE; ++e) simd::store(acc + r * lda + 8 * e, a[r][e]);
}

}  // namespace
}  // namespace attnimpl::micro
