// Storage <-> f32 conversions for strided rows. Inputs convert exactly
// (bf16 by a shift, f16 by its fields); outputs round once, to nearest even.
// Plain C++ that gives F16C's bits (tests/impl/isa_test.cpp compares
// every f16 and a dense sample of f32 with the instructions), so it runs on
// any CPU and both of the kernel's instruction sets use it.
#pragma once

#include <cstdint>
#include <cstring>

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

inline float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

inline float from_bf16(std::uint16_t b) { return from_bits(static_cast<std::uint32_t>(b) << 16); }

/// Exactly, as F16C's vcvtph2ps (a signaling NaN comes back quiet).
inline float from_f16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact
    const float m = static_cast<float>(mant) * 0x1p-24f;
    std::uint32_t u;
    std::memcpy(&u, &m, 4);
    return from_bits(sign | u);
  }
  return from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

}  // namespace attnimpl::convert
