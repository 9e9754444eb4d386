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
inline void unit_runner::values_block(std::int64_t r0, std::int64_t e0, std::int64_t k0, std::int64_t k1, const row_state& st) {
  micro::weighted_values<NR, NE, T>(score_row(r0) + k0, g_.k_tile8, ws_.vrows.data() + k0, e0, k1 - k0, st.acc + r0 * g_.dv8 + e0,
                                    g_.dv8);
}

/// acc += P V. Each group of 4 rows runs the register kernel over the keys
/// all its rows see, [begin, end): from the block start, or from the
/// latest first visible key of a window's or chunk's first block (column
/// slice outermost, so the V slice stays in L1 across groups); each row adds
/// its own visible keys before begin first and those from end after.
/// Either way a row's chain is one FMA per visible key in increasing j: the
/// same bits whatever rows share its group.
template <dtype T>
inline void unit_runner::weighted_values(row_range rr, std::int64_t kpack, const row_state& st) {
  constexpr std::int64_t block = 4;
  std::int64_t* keys = ws_.group_keys.data();
  std::int64_t* begins = ws_.group_first.data();
  bool any_fast = false;
  for (std::int64_t r0 = rr.begin; r0 < rr.end; r0 += block) {
    std::int64_t begin = 0, end = kpack;
    for (std::int64_t r = r0; r < std::min(r0 + block, rr.end); ++r) {
      if (ws_.prefix[r] > 0) {
        end = std::min(end, ws_.prefix[r]);
      } else if (ws_.kind[r] != row_kind::none) {
        begin = std::max(begin, ws_.first[r]);
        end = std::min(end, ws_.run[r]);
      } else {
        end = 0;
      }
    }
    if (end <= begin) begin = end = 0;
    keys[r0 / block] = end;
    begins[r0 / block] = begin;
    any_fast = any_fast || end > 0;
  }
  constexpr std::int64_t es = T == dtype::f32 ? 4 : 2;
  const std::int64_t dv8 = g_.dv8;  // a local: vector stores may alias members
  const char* const* vrows = ws_.vrows.data();
  // Row r's visible keys of [from, to), one at a time.
  const auto row_keys = [&](std::int64_t r, std::int64_t from, std::int64_t to) {
    const float* pr = score_row(r);
    const std::uint8_t* vis = ws_.vis.data() + r * g_.k_tile8;
    float* acc = st.acc + r * dv8;
    for (std::int64_t jj = from; jj < to; ++jj) {
      if (!vis[jj] && !ATTNIMPL_MUTANT(masked_value_leak)) continue;  // skipped, never multiplied: V there may be NaN
      const simd::vf pb = simd::broadcast(pr + jj);
      const char* v = vrows[jj];
      for (std::int64_t e = 0; e < dv8; e += 8)
        simd::store(acc + e, simd::fmadd(pb, simd::load8(v + e * es, T), simd::load(acc + e)));
    }
  };
  if (any_fast) {
    for (std::int64_t r = rr.begin; r < rr.end; ++r)
      if (ws_.kind[r] != row_kind::none && begins[r / block] > 0) row_keys(r, 0, begins[r / block]);
    // Column slices of 3 vectors; 4 left are taken as 2 + 2, since a 1-vector
    // slice does 4 FMAs per 5 loads (dv 128: 3,3,3,3,2,2 rather than 3,3,3,3,3,1).
    for (std::int64_t e0 = 0, ne = 0; e0 < g_.dv8; e0 += 8 * ne) {
      const std::int64_t left = (g_.dv8 - e0) / 8;
      ne = left == 4 ? 2 : std::min<std::int64_t>(3, left);
      // AVX-512: slices of 6 vectors (three 16-lane registers, 12
      // accumulators for 4 rows; dv 128: 6,6,4).
      if (ATTNIMPL_ISA_AVX512) ne = std::min<std::int64_t>(6, left);
      for (std::int64_t r0 = rr.begin; r0 < rr.end; r0 += block)
        if (keys[r0 / block] > 0)
          values_dispatch<T>(std::min(block, rr.end - r0), ne, r0, e0, begins[r0 / block], keys[r0 / block], st);
    }
  }
  for (std::int64_t r = rr.begin; r < rr.end; ++r) {
    const std::int64_t from = keys[r / block];
    if (ws_.kind[r] == row_kind::none || from >= kpack) continue;
    row_keys(r, from, kpack);
  }
}

template <dtype T>
inline void unit_runner::values_dispatch(std::int64_t nr, std::int64_t ne, std::int64_t r0, std::int64_t e0, std::int64_t k0,
                                         std::int64_t kc, const row_state& st) {
  if (ne > 3) return values_wide<T>(nr, ne, r0, e0, k0, kc, st);
  switch (nr * 4 + ne) {
    case 1 * 4 + 1: values_block<T, 1, 1>(r0, e0, k0, kc, st); break;
    case 1 * 4 + 2: values_block<T, 1, 2>(r0, e0, k0, kc, st); break;
    case 1 * 4 + 3: values_block<T, 1, 3>(r0, e0, k0, kc, st); break;
    case 2 * 4 + 1: values_block<T, 2, 1>(r0, e0, k0, kc, st); break;
    case 2 * 4 + 2: values_block<T, 2, 2>(r0, e0, k0, kc, st); break;
    case 2 * 4 + 3: values_block<T, 2, 3>(r0, e0, k0, kc, st); break;
    case 3 * 4 + 1: values_block<T, 3, 1>(r0, e0, k0, kc, st); break;
    case 3 * 4 + 2: values_block<T, 3, 2>(r0, e0, k0, kc, st); break;
    case 3 * 4 + 3: values_block<T, 3, 3>(r0, e0, k0, kc, st); break;
    case 4 * 4 + 1: values_block<T, 4, 1>(r0, e0, k0, kc, st); break;
    case 4 * 4 + 2: values_block<T, 4, 2>(r0, e0, k0, kc, st); break;
    default: values_block<T, 4, 3>(r0, e0, k0, kc, st); break;
  }
}

/// Slices of 4 to 6 vectors (AVX-512 only; never reached elsewhere).
template <dtype T>
inline void unit_runner::values_wide([[maybe_unused]] std::int64_t nr, [[maybe_unused]] std::int64_t ne,
                                     [[maybe_unused]] std::int64_t r0, [[maybe_unused]] std::int64_t e0,
                                     [[maybe_unused]] std::int64_t k0, [[maybe_unused]] std::int64_t kc,
                                     [[maybe_unused]] const row_state& st) {
#if ATTNIMPL_ISA_AVX512
#define ATTNIMPL_WIDE(NR)                                           \
  if (nr == NR) {                                                   \
    if (ne == 4) return values_block<T, NR, 4>(r0, e0, k0, kc, st); \
    if (ne == 5) return values_block<T, NR, 5>(r0, e0, k0, kc, st); \
    return values_block<T, NR, 6>(r0, e0, k0, kc, st);              \
  }
  ATTNIMPL_WIDE(1)
  ATTNIMPL_WIDE(2)
  ATTNIMPL_WIDE(3)
  ATTNIMPL_WIDE(4)
#undef ATTNIMPL_WIDE
#endif
}

}  // namespace
}  // namespace attnimpl::engine
