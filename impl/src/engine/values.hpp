// acc += P V: the register kernel over the keys a row group shares, then each
// row's remaining visible keys in order.
// Part of engine/kernel.hpp, included there only: everything stays in its anonymous
// namespace (one translation unit, the same inlining as one file).
#pragma once

#include <algorithm>

#include "../micro_kernels.hpp"
#include "../mutation.hpp"
#include "../simd.hpp"
#include "unit_runner.hpp"

namespace attnimpl::engine {
namespace {

template <dtype T, int NR, int NE>
inline void unit_runner::values_block(std::int64_t r0, std::int64_t e0, std::int64_t kc, const row_state& st) {
  micro::weighted_values<NR, NE, T>(score_row(r0), g_.k_tile8, ws_.vrows.data(), e0, kc, st.acc + r0 * g_.dv8 + e0, g_.dv8);
}

/// acc += P V. Each group of 4 rows runs the register kernel over the keys
/// all its rows see from the block start (column slice outermost, so the V
/// slice stays in L1 across groups); each row then adds its remaining
/// visible keys in order. Either way a row's chain is one FMA per visible
/// key in increasing j: the same bits whatever rows share its group.
template <dtype T>
inline void unit_runner::weighted_values(row_range rr, std::int64_t kpack, const row_state& st) {
  constexpr std::int64_t block = 4;
  std::int64_t* keys = ws_.group_keys.data();
  bool any_fast = false;
  for (std::int64_t r0 = rr.begin; r0 < rr.end; r0 += block) {
    std::int64_t common = kpack;
    for (std::int64_t r = r0; r < std::min(r0 + block, rr.end); ++r) common = std::min(common, ws_.prefix[r]);
    keys[r0 / block] = common;
    any_fast = any_fast || common > 0;
  }
  if (any_fast) {
    // Column slices of 3 vectors; 4 left are taken as 2 + 2, since a 1-vector
    // slice does 4 FMAs per 5 loads (dv 128: 3,3,3,3,2,2 rather than 3,3,3,3,3,1).
    for (std::int64_t e0 = 0, ne = 0; e0 < g_.dv8; e0 += 8 * ne) {
      const std::int64_t left = (g_.dv8 - e0) / 8;
      ne = left == 4 ? 2 : std::min<std::int64_t>(3, left);
      for (std::int64_t r0 = rr.begin; r0 < rr.end; r0 += block)
        if (keys[r0 / block] > 0) values_dispatch<T>(std::min(block, rr.end - r0), ne, r0, e0, keys[r0 / block], st);
    }
  }
  for (std::int64_t r = rr.begin; r < rr.end; ++r) {
    const std::int64_t from = keys[r / block];
    if (ws_.kind[r] == row_kind::none || from >= kpack) continue;
    const float* pr = score_row(r);
    const std::uint8_t* vis = ws_.vis.data() + r * g_.k_tile8;
    const char* const* vrows = ws_.vrows.data();
    constexpr std::int64_t es = T == dtype::f32 ? 4 : 2;
    const std::int64_t dv8 = g_.dv8;  // a local: vector stores may alias members
    float* acc = st.acc + r * dv8;
    for (std::int64_t jj = from; jj < kpack; ++jj) {
      if (!vis[jj] && !ATTNIMPL_MUTANT(masked_value_leak)) continue;  // skipped, never multiplied: V there may be NaN
      const simd::vf pb = simd::broadcast(pr + jj);
      const char* v = vrows[jj];
      for (std::int64_t e = 0; e < dv8; e += 8)
        simd::store(acc + e, simd::fmadd(pb, simd::load8(v + e * es, T), simd::load(acc + e)));
    }
  }
}

template <dtype T>
inline void unit_runner::values_dispatch(std::int64_t nr, std::int64_t ne, std::int64_t r0, std::int64_t e0, std::int64_t kc,
                                         const row_state& st) {
  switch (nr * 4 + ne) {
    case 1 * 4 + 1: values_block<T, 1, 1>(r0, e0, kc, st); break;
    case 1 * 4 + 2: values_block<T, 1, 2>(r0, e0, kc, st); break;
    case 1 * 4 + 3: values_block<T, 1, 3>(r0, e0, kc, st); break;
    case 2 * 4 + 1: values_block<T, 2, 1>(r0, e0, kc, st); break;
    case 2 * 4 + 2: values_block<T, 2, 2>(r0, e0, kc, st); break;
    case 2 * 4 + 3: values_block<T, 2, 3>(r0, e0, kc, st); break;
    case 3 * 4 + 1: values_block<T, 3, 1>(r0, e0, kc, st); break;
    case 3 * 4 + 2: values_block<T, 3, 2>(r0, e0, kc, st); break;
    case 3 * 4 + 3: values_block<T, 3, 3>(r0, e0, kc, st); break;
    case 4 * 4 + 1: values_block<T, 4, 1>(r0, e0, kc, st); break;
    case 4 * 4 + 2: values_block<T, 4, 2>(r0, e0, kc, st); break;
    default: values_block<T, 4, 3>(r0, e0, kc, st); break;
  }
}

}  // namespace
}  // namespace attnimpl::engine
