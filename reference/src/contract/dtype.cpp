#include "attncheck/dtype.hpp"

#include "attncheck/enum_names.hpp"

#include <bit>
#include <cmath>
#include <limits>

namespace attncheck {

namespace {
constexpr name_table<dtype, 5> dtype_names{
    {{dtype::f32, "f32"}, {dtype::f16, "f16"}, {dtype::bf16, "bf16"}, {dtype::e4m3, "e4m3"}, {dtype::e5m2, "e5m2"}}};
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
    case dtype::e4m3: return {3, 4};
    case dtype::e5m2: return {2, 5};
  }
  return {23, 8};
}

}  // namespace

double decode(dtype t, std::uint32_t bits) {
  if (t == dtype::f32) return static_cast<double>(std::bit_cast<float>(bits));
  if (t == dtype::bf16) return static_cast<double>(std::bit_cast<float>((bits & 0xffffu) << 16));
  // f16 and fp8: sign, exponent and fraction fields read exactly into a double.
  const format f = format_of(t);
  const std::uint32_t total = 1 + f.exp_bits + f.mant_bits;
  const std::uint32_t x = bits & ((1u << total) - 1);
  const bool negative = (x >> (total - 1)) != 0;
  const std::uint32_t exp_all = (1u << f.exp_bits) - 1;
  const std::uint32_t exp = (x >> f.mant_bits) & exp_all;
  const std::uint32_t man = x & ((1u << f.mant_bits) - 1);
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  double mag = 0;
  if (t == dtype::e4m3 && exp == exp_all && man == (1u << f.mant_bits) - 1) {
    mag = std::numeric_limits<double>::quiet_NaN();  // E4M3FN: S.1111.111 is its one NaN; other 1111 exponents are normal
  } else if (t != dtype::e4m3 && exp == exp_all) {
    if (man == 0) {
      mag = std::numeric_limits<double>::infinity();
    } else if (t == dtype::f16) {  // keep the payload: widen to f32 bits
      return static_cast<double>(std::bit_cast<float>((negative ? 0x80000000u : 0u) | 0x7f800000u | (man << 13)));
    } else {
      mag = std::numeric_limits<double>::quiet_NaN();
    }
  } else if (exp == 0) {
    mag = std::ldexp(static_cast<double>(man), 1 - bias - f.mant_bits);
  } else {
    mag = std::ldexp(static_cast<double>(man | (1u << f.mant_bits)), static_cast<int>(exp) - bias - f.mant_bits);
  }
  return negative ? -mag : mag;
}

std::uint32_t encode(dtype t, double value) {
  if (t == dtype::f32) return std::bit_cast<std::uint32_t>(static_cast<float>(value));  // one RNE rounding
  const format f = format_of(t);
  const std::uint32_t total = 1 + f.exp_bits + f.mant_bits;
  const std::uint32_t sign = std::signbit(value) ? (1u << (total - 1)) : 0u;
  const std::uint32_t exp_all = (1u << f.exp_bits) - 1;
  const std::uint32_t inf = exp_all << f.mant_bits;
  // E4M3FN has no infinity: its one NaN pattern stands for NaN, infinity and overflow.
  const std::uint32_t e4m3_nan = (1u << (total - 1)) - 1;
  if (std::isnan(value)) return sign | (t == dtype::e4m3 ? e4m3_nan : inf | (1u << (f.mant_bits - 1)));
  const double a = std::fabs(value);
  if (std::isinf(a)) return sign | (t == dtype::e4m3 ? e4m3_nan : inf);
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
  // Past the largest finite value: the rounding overflows (OCP's non-saturating conversion).
  const double maxfin = t == dtype::e4m3 ? 448.0 : std::ldexp(2.0 - std::ldexp(1.0, -f.mant_bits), bias);
  if (rounded > maxfin) return sign | (t == dtype::e4m3 ? e4m3_nan : inf);
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
