#include "convert.hpp"

#include <cstring>

#include "mutation.hpp"

namespace attnimpl::convert {

std::uint16_t to_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                             // round to nearest, ties to even; overflow carries to inf
  if (ATTNIMPL_MUTANT(bf16_truncate)) std::memcpy(&u, &x, 4);  // rounds toward zero
  return static_cast<std::uint16_t>(u >> 16);
}

std::uint16_t to_f16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  const std::uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  const bool to_zero = ATTNIMPL_MUTANT(f16_round_to_zero);                                        // rounds toward zero
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN, payload's top bits
  if (a >= 0x38800000u) {                            // f16 normal range or beyond: rebias, round 23 mantissa bits to 10
    if (a >= (to_zero ? 0x47800000u : 0x477ff000u))  // 65520 rounds to inf; toward zero only 2^16 and up ...
      return static_cast<std::uint16_t>(sign | (to_zero && a != 0x7f800000u ? 0x7bffu : 0x7c00u));  // ... and stops at 65504
    std::uint32_t v = a - 0x38000000u;
    if (!to_zero) v += 0xfffu + ((v >> 13) & 1u);  // ties to even; a carry moves to the next binade (or inf)
    return static_cast<std::uint16_t>(sign | (v >> 13));
  }
  // Zero or an f16 subnormal: round |x| * 2^24 to an integer (0 .. 1024; 1024
  // is the smallest normal, whose bits the integer already spells).
  const float y = from_bits(a) * 0x1p24f;  // exact (a power of two)
  const float big = 8388608.0f;            // 2^23: adding it rounds y < 2^23 to an integer, ties to even
  const float r = to_zero ? static_cast<float>(static_cast<std::uint32_t>(y)) : (y + big) - big;
  return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(r));
}

void load_row(float* dst, const void* src, dtype t, std::int64_t stride, std::int64_t n) {
  std::int64_t k = 0;
  if (ATTNIMPL_MUTANT(load_ignores_stride)) stride = 1;
  switch (t) {
    case dtype::f32: {
      const float* s = static_cast<const float*>(src);
      if (stride == 1) {
        std::memcpy(dst, s, static_cast<std::size_t>(n) * 4);
        return;
      }
      for (; k < n; ++k) dst[k] = s[k * stride];
      return;
    }
    case dtype::f16: {
      const std::uint16_t* s = static_cast<const std::uint16_t*>(src);
      for (; k < n; ++k) dst[k] = from_f16(s[k * stride]);
      return;
    }
    case dtype::bf16: {
      const std::uint16_t* s = static_cast<const std::uint16_t*>(src);
      for (; k < n; ++k) dst[k] = from_bf16(s[k * stride]);
      return;
    }
  }
}

void store_row(void* dst, dtype t, std::int64_t stride, const float* src, std::int64_t n) {
  switch (t) {
    case dtype::f32: {
      float* d = static_cast<float*>(dst);
      for (std::int64_t k = 0; k < n; ++k) d[k * stride] = src[k];
      return;
    }
    case dtype::f16: {
      std::uint16_t* d = static_cast<std::uint16_t*>(dst);
      for (std::int64_t k = 0; k < n; ++k) d[k * stride] = to_f16(src[k]);
      return;
    }
    case dtype::bf16: {
      std::uint16_t* d = static_cast<std::uint16_t*>(dst);
      for (std::int64_t k = 0; k < n; ++k) d[k * stride] = to_bf16(src[k]);
      return;
    }
  }
}

}  // namespace attnimpl::convert
