#include "convert.hpp"

#include <immintrin.h>

#include <cstring>

#include "mutation.hpp"

namespace attnimpl::convert {

float from_bf16(std::uint16_t b) {
  std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float from_f16(std::uint16_t h) { return _cvtsh_ss(h); }

std::uint16_t to_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                             // round to nearest, ties to even; overflow carries to inf
  if (ATTNIMPL_MUTANT(bf16_truncate)) std::memcpy(&u, &x, 4);  // rounds toward zero
  return static_cast<std::uint16_t>(u >> 16);
}

std::uint16_t to_f16(float x) {
  if (ATTNIMPL_MUTANT(f16_round_to_zero)) return _cvtss_sh(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  return _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
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
      if (stride == 1)
        for (; k + 8 <= n; k += 8)
          _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k))));
      for (; k < n; ++k) dst[k] = from_f16(s[k * stride]);
      return;
    }
    case dtype::bf16: {
      const std::uint16_t* s = static_cast<const std::uint16_t*>(src);
      if (stride == 1)
        for (; k + 8 <= n; k += 8) {
          __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k)));
          _mm256_storeu_ps(dst + k, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
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
