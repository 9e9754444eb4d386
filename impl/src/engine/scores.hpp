// The scores Q K^T of a block: direct from the caller's rows, from K stored
// keys-across, or from the packed, transposed block.
// Part of engine/kernel.hpp, included there only: everything stays in its anonymous
// namespace (one translation unit, the same inlining as one file).
#pragma once

#include <algorithm>

#include "../convert.hpp"
#include "../micro_kernels.hpp"
#include "../simd.hpp"
#include "blocks.hpp"
#include "unit_runner.hpp"

namespace attnimpl::engine {
namespace {

/// Scores of keys [0, kpack) straight from the caller's K rows: 8 keys x 8
/// dims loaded, widened and transposed in registers, then one FMA chain over
/// d per score, exactly as the packed path computes it (same bits). Each K
/// byte is read once for all the unit's rows; while a group of 8 keys
/// computes, the same keys of the next block are requested.
inline void unit_runner::direct_scores(const unit_rows& ur, std::int64_t kpack, std::int64_t next) {
  with_dtype(
      p_.kv.type, [&](auto t) __attribute__((always_inline)) { direct_scores_as<decltype(t)::value>(ur, kpack, next); });
}

template <dtype T>
inline void unit_runner::direct_scores_as(const unit_rows& ur, std::int64_t kpack, std::int64_t next) {
  const std::int64_t esize = convert::size_of(T);
  const std::int64_t kbytes = p_.dims.d * esize, vbytes = p_.dims.dv * p_.kv.vs[3] * esize;
  const char* zero = reinterpret_cast<const char*>(ws_.zero.data());
  for (std::int64_t jj = 0; jj < kpack; jj += 8) {
    const char* rows[8];
    for (std::int64_t t = 0; t < 8; ++t) rows[t] = jj + t < kpack ? ws_.krows[jj + t] : zero;  // lanes past kpack: K = 0
    // The first pass spreads the requests over its loads: a burst of a
    // hundred prefetches fills the load queue and stalls the arithmetic
    // that could run meanwhile.
    prefetch_set pf{ws_.knext.data() + jj, ws_.vnext.data() + jj, std::clamp<std::int64_t>(next - jj, 0, 8), kbytes, vbytes};
    for (std::int64_t r0 = 0; r0 < ur.rows; r0 += 4) {
      const std::int64_t nr = std::min<std::int64_t>(4, ur.rows - r0);
      if (!sees_any(r0, nr)) continue;
      switch (nr) {
        case 1: score_group<1, T>(rows, r0, jj, pf); break;
        case 2: score_group<2, T>(rows, r0, jj, pf); break;
        case 3: score_group<3, T>(rows, r0, jj, pf); break;
        default: score_group<4, T>(rows, r0, jj, pf); break;
      }
      pf.count = 0;
    }
    prefetch_rows(pf.k, pf.count, kbytes);  // no pass ran
    prefetch_rows(pf.v, pf.count, vbytes);
  }
}

template <int NR, dtype T>
inline void unit_runner::score_group(const char* const rows_in[8], std::int64_t r0, std::int64_t jj, const prefetch_set& pf) {
  constexpr std::int64_t es = T == dtype::f32 ? 4 : 2;
  const std::int64_t d = p_.dims.d, ld = g_.k_tile8;  // locals: vector stores may alias members
  const float* q = ws_.qp.data() + r0 * d;
  float* s = score_row(r0) + jj;
  const eight_rows rows(rows_in);
  simd::vf acc[NR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) acc[r] = simd::zero();
  const std::int64_t pf_count = pf.count, vbytes = pf.vbytes;
  const char* const* pk = pf.k;
  const char* const* pv = pf.v;
  std::int64_t dd = 0;
  for (; dd + 8 <= d; dd += 8) {
    const std::int64_t at = dd * es;
    if (at % 64 == 0) {
      for (std::int64_t t = 0; t < pf_count; ++t) simd::prefetch(pk[t] + at);
    } else if (at % 64 == 32 && at - 32 < vbytes) {
      for (std::int64_t t = 0; t < pf_count; ++t) simd::prefetch(pv[t] + at - 32);
    }
    const eight_rows::block k = rows.transposed(at, T);
#pragma GCC unroll 8
    for (int x = 0; x < 8; ++x)
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) acc[r] = simd::fmadd(simd::broadcast(q + r * d + dd + x), k.v[x], acc[r]);
  }
  // Lines the dim loop did not reach: K's tail, V's rest (dv > d, or d % 16).
  for (std::int64_t at = (dd * es + 63) / 64 * 64; at < pf.kbytes; at += 64)
    for (std::int64_t t = 0; t < pf_count; ++t) simd::prefetch(pk[t] + at);
  for (std::int64_t at = (dd * es + 31) / 64 * 64; at < vbytes; at += 64)
    for (std::int64_t t = 0; t < pf_count; ++t) simd::prefetch(pv[t] + at);
  for (; dd < d; ++dd) {
    const simd::vf k = rows.column<T>(dd);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) acc[r] = simd::fmadd(simd::broadcast(q + r * d + dd), k, acc[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) simd::store(s + r * ld, acc[r]);
}

inline void unit_runner::across_scores(const unit_rows& ur, std::int64_t kpack, std::int64_t next) {
  with_dtype(
      p_.kv.type, [&](auto t) __attribute__((always_inline)) { across_scores_as<decltype(t)::value>(ur, kpack, next); });
}

/// Scores of keys [0, kpack) from K stored keys-across: element dd of 8
/// consecutive keys is one vector, so each score is the same FMA chain over
/// d as every other path (same bits) with no transpose. 16 keys per pass:
/// 8 accumulators for 4 rows, enough independent chains to keep both FMA
/// units busy (8 keys leave the chain's latency exposed). While a pass
/// computes, the same keys of the next block are requested, K a line per
/// dim, V a line per dim.
template <dtype T>
inline void unit_runner::across_scores_as(const unit_rows& ur, std::int64_t kpack, std::int64_t next) {
  constexpr std::int64_t es = T == dtype::f32 ? 4 : 2;
  const std::int64_t dstr = p_.kv.ks[3] * es;
  const std::int64_t vbytes = p_.dims.dv * p_.kv.vs[3] * es;
  const std::int64_t k_every = dims_per_line(dstr);
  char* gather = reinterpret_cast<char*>(ws_.kgather.data());
  char* gather1 = gather + 8 * p_.dims.d * es;
  for (std::int64_t jj = 0; jj < kpack; jj += 16) {
    std::int64_t sa = 0, sb = 0;
    const char* a = key_group(jj, kpack, gather, sa);
    const bool two = jj + 8 < kpack;
    const char* b = two ? key_group(jj + 8, kpack, gather1, sb) : nullptr;
    across_prefetch pf{nullptr, nullptr, k_every, ws_.vnext.data() + jj, std::clamp<std::int64_t>(next - jj, 0, 16), vbytes};
    if (jj < next) {
      pf.k0 = ws_.knext[jj];
      if (jj + 8 < next) {
        const char* k1 = ws_.knext[jj + 8];
        const bool same_lines = k1 == pf.k0 + 8 * es && reinterpret_cast<std::uintptr_t>(pf.k0) % 64 + 16 * es <= 64;
        pf.k1 = same_lines ? nullptr : k1;
      }
    }
    for (std::int64_t r0 = 0; r0 < ur.rows; r0 += 4) {
      const std::int64_t nr = std::min<std::int64_t>(4, ur.rows - r0);
      if (!sees_any(r0, nr)) continue;
#define ATTNIMPL_ACROSS(NR)                              \
  if (two)                                               \
    across_group<NR, T, true>(a, sa, b, sb, r0, jj, pf); \
  else                                                   \
    across_group<NR, T, false>(a, sa, a, sa, r0, jj, pf);
      switch (nr) {
        case 1: ATTNIMPL_ACROSS(1) break;
        case 2: ATTNIMPL_ACROSS(2) break;
        case 3: ATTNIMPL_ACROSS(3) break;
        default: ATTNIMPL_ACROSS(4) break;
      }
#undef ATTNIMPL_ACROSS
      pf.k0 = pf.k1 = nullptr;  // requested by the first pass
      pf.v_rows = 0;
    }
    if (pf.k0) prefetch_keys(p_.kv, ws_.knext.data() + jj, std::min<std::int64_t>(16, next - jj), p_.dims.d);  // no pass ran
    prefetch_rows(pf.v, pf.v_rows, vbytes);
  }
  // Keys of the next block past this block's last pass.
  const std::int64_t from = std::min((kpack + 15) / 16 * 16, next);
  prefetch_keys(p_.kv, ws_.knext.data() + from, next - from, p_.dims.d);
  prefetch_rows(ws_.vnext.data() + from, next - from, vbytes);
}

template <int NR, dtype T, bool TWO>
inline void unit_runner::across_group(const char* a, std::int64_t sa, const char* b, std::int64_t sb, std::int64_t r0,
                                      std::int64_t jj, const across_prefetch& pf) {
  const std::int64_t d = p_.dims.d, ld = g_.k_tile8;  // locals: vector stores may alias members
  const float* q = ws_.qp.data() + r0 * d;
  float* s = score_row(r0) + jj;
  const char* const k0 = pf.k0;
  const char* const k1 = pf.k1;
  const std::int64_t k_mask = pf.k_every - 1, kstr = p_.kv.ks[3] * convert::size_of(T);  // k_every: a power of two
  const char* const* v = pf.v;
  const std::int64_t v_rows = pf.v_rows, vbytes = pf.vbytes;
  std::int64_t vt = 0, vx = 0;
  simd::vf acc0[NR], acc1[NR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) acc0[r] = acc1[r] = simd::zero();
  for (std::int64_t dd = 0; dd < d; ++dd) {
    if (k0 && (dd & k_mask) == 0) {  // not dd % k_every: a division per dim cost a quarter of the loop
      simd::prefetch(k0 + dd * kstr);
      if (k1) simd::prefetch(k1 + dd * kstr);
    }
    if (vt < v_rows) {
      simd::prefetch(v[vt] + vx);
      vx += 64;
      if (vx >= vbytes) vx = 0, ++vt;
    }
    const simd::vf ka = simd::load8(a + dd * sa, T);
    if constexpr (TWO) {
      const simd::vf kb = simd::load8(b + dd * sb, T);
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) {
        const simd::vf qv = simd::broadcast(q + r * d + dd);
        acc0[r] = simd::fmadd(qv, ka, acc0[r]);
        acc1[r] = simd::fmadd(qv, kb, acc1[r]);
      }
    } else {
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) acc0[r] = simd::fmadd(simd::broadcast(q + r * d + dd), ka, acc0[r]);
    }
  }
  for (; vt < v_rows; ++vt, vx = 0)
    for (; vx < vbytes; vx += 64) simd::prefetch(v[vt] + vx);
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    simd::store(s + r * ld, acc0[r]);
    if constexpr (TWO) simd::store(s + r * ld + 8, acc1[r]);
  }
}

template <int NR>
inline void unit_runner::score_rows(std::int64_t r0) {
  const std::int64_t d = p_.dims.d, ld = g_.k_tile8;
  const float* q = ws_.qp.data() + r0 * d;
  float* s = score_row(r0);
  // Columns past every row's last visible key (the causal diagonal) are not
  // computed: the softmax selects -inf there from the visibility flags.
  // Nor those before every row's first visible key (a window's or chunk's
  // first block): each column is its own FMA chain, skipping one changes no other.
  std::int64_t cols = 0, c = g_.k_tile8;
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    cols = std::max(cols, ws_.reach[r0 + r]);
    if (ws_.kind[r0 + r] != row_kind::none) c = std::min(c, ws_.prefix[r0 + r] > 0 ? 0 : ws_.first[r0 + r]);
  }
  cols = round8(cols);
  c = std::min(c / 8 * 8, cols);
#if ATTNIMPL_ISA_AVX512
  // 32 columns (two 16-lane registers) per row: 12 accumulators of the 32 registers.
  for (; c + 32 <= cols; c += 32) micro::scores<NR, 4>(q, d, ws_.kt.data() + c, ld, d, s + c, ld);
#endif
  for (; c + 16 <= cols; c += 16) micro::scores<NR, 2>(q, d, ws_.kt.data() + c, ld, d, s + c, ld);
  if (c < cols) micro::scores<NR, 1>(q, d, ws_.kt.data() + c, ld, d, s + c, ld);
}

inline void unit_runner::scores(row_range rr) {
  constexpr std::int64_t block = 6;
  for (std::int64_t r0 = rr.begin; r0 < rr.end; r0 += block) {
    const std::int64_t nr = std::min(block, rr.end - r0);
    if (!sees_any(r0, nr)) continue;
    switch (nr) {
      case 1: score_rows<1>(r0); break;
      case 2: score_rows<2>(r0); break;
      case 3: score_rows<3>(r0); break;
      case 4: score_rows<4>(r0); break;
      case 5: score_rows<5>(r0); break;
      default: score_rows<6>(r0); break;
    }
  }
}

}  // namespace
}  // namespace attnimpl::engine
