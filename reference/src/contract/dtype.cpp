#include "attncheck/dtype.hpp"

#include "attncheck/enum_names.hpp"

#include <bit>
#include <cmath>
#include <limits>

namespace attncheck {

namespace {
constexpr name_table<dtype, 3> dtype_names{{{dtype::f32, "f32"}, {dtype::f16, "f16"}, {dtype::bf16, "bf16"}}};
}  // namespace

std::string_view name(dtype t) { return name_in(dtype_names, t); }

std::optional<dtype> parse_dtype(std::string_view s) { return parse_in(dtype_names, s); }

namespace {

struct format {
  int mant_bits;  // explicit fraction bits
  int exp_bits;
};

constexpr format format_of(dtype t) {
  switch (t) {
    case dtype::f32: return {23, 8};
    case dtype::f16: return {10, 5};
    case dtype::bf16: return {7, 8};
  }
  return {23, 8};
}

}  // namespace

double decode(dtype t, std::uint32_t bits) {
  if (t == dtype::f32) return static_cast<double>(std::bit_cast<float>(bits));
  if (t == dtype::bf16) return static_cast<double>(std::bit_cast<float>((bits & 0xffffu) << 16));
  // f16: widen exactly to f32 bits, keeping NaN payloads.
  const std::uint32_t h = bits & 0xffffu;
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return static_cast<double>(std::bit_cast<float>(sign | 0x7f800000u | (man << 13)));
  if (exp == 0) {
    const double mag = std::ldexp(static_cast<double>(man), -24);
    return sign ? -mag : mag;
  }
  return static_cast<double>(std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13)));
}

std::uint32_t encode(dtype t, double value) {
  if (t == dtype::f32) return std::bit_cast<std::uint32_t>(static_cast<float>(value));  // one RNE rounding
  const format f = format_of(t);
  const std::uint32_t total = 1 + f.exp_bits + f.mant_bits;
  const std::uint32_t sign = std::signbit(value) ? (1u << (total - 1)) : 0u;
  const std::uint32_t exp_all = (1u << f.exp_bits) - 1;
  const std::uint32_t inf = exp_all << f.mant_bits;
  if (std::isnan(value)) return sign | inf | (1u << (f.mant_bits - 1));
  const double a = std::fabs(value);
  if (std::isinf(a)) return sign | inf;
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const int emin = 1 - bias;
  // Quantum of the binade (or of the subnormal range): 2^(e - mant_bits).
  int e = a == 0.0 ? emin : std::ilogb(a);
  if (e < emin) e = emin;
  const double quantum = std::ldexp(1.0, e - f.mant_bits);
  // a / quantum is exact (power-of-two scaling within double's range);
  // nearbyint rounds ties to even under the default rounding mode.
  const double scaled = std::nearbyint(a / quantum);
  double rounded = scaled * quantum;
  const double maxfin = std::ldexp(2.0 - std::ldexp(1.0, -f.mant_bits), bias);
  if (rounded > maxfin) return sign | inf;
  if (rounded == 0.0) return sign;
  int re = std::ilogb(rounded);
  if (re < emin) {  // subnormal
    const auto m = static_cast<std::uint32_t>(std::ldexp(rounded, f.mant_bits - emin));
    return sign | m;
  }
  const auto m = static_cast<std::uint32_t>(std::ldexp(rounded, f.mant_bits - re)) & ((1u << f.mant_bits) - 1);
  return sign | (static_cast<std::uint32_t>(re + bias) << f.mant_bits) | m;
}

}  // namespace attncheck
