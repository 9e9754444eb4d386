// Storage <-> f32 conversions for strided rows. Inputs convert exactly
// (f16 by F16C, bf16 by a shift); outputs round once, to nearest even.
#pragma once

#include <cstdint>

#include "attnimpl/attention.hpp"

namespace attnimpl::convert {

inline std::int64_t size_of(dtype t) { return t == dtype::f32 ? 4 : 2; }

/// dst[k] = element k of the row at src (element stride `stride`), k < n.
void load_row(float* dst, const void* src, dtype t, std::int64_t stride, std::int64_t n);

/// Rounds src[k] to t and stores it at dst + k * stride, k < n.
void store_row(void* dst, dtype t, std::int64_t stride, const float* src, std::int64_t n);

/// One element, the same rounding as store_row (tests and the cache use it).
std::uint16_t to_bf16(float x);
std::uint16_t to_f16(float x);
float from_bf16(std::uint16_t b);
float from_f16(std::uint16_t h);

}  // namespace attnimpl::convert
