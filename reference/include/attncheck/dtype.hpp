// Storage types of the contract (docs/spec.md "Types") and exact conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace attncheck {

/// Storage type of Q, K, V and O. LSE is always f32.
enum class dtype : std::uint8_t { f32, f16, bf16 };

/// Returns "f32", "f16" or "bf16".
std::string_view name(dtype t);

/// Parses "f32", "f16", "bf16"; nullopt for anything else.
std::optional<dtype> parse_dtype(std::string_view s);

/// Bytes per element: 4 for f32, 2 for f16 and bf16.
constexpr std::size_t size_of(dtype t) { return t == dtype::f32 ? 4 : 2; }

/// The numbers that define each type's rounding: its unit roundoff (2^-24
/// f32, 2^-11 f16, 2^-8 bf16), its smallest positive subnormal (the absolute
/// spacing near zero) and its largest finite value.
struct dtype_limits {
  double unit_roundoff, smallest_subnormal, largest_finite;
};

constexpr dtype_limits limits_of(dtype t) {
  switch (t) {
    case dtype::f16: return {0x1p-11, 0x1p-24, 65504.0};
    case dtype::bf16: return {0x1p-8, 0x1p-133, 0x1.fep127};
    case dtype::f32: break;
  }
  return {0x1p-24, 0x1p-149, 0x1.fffffep127};
}

/// One value per storage type (bit patterns, thresholds): the one switch over
/// the types, so a new type is a compile error at every caller, not a silent f32.
template <class T>
constexpr T per_dtype(dtype t, T f32, T f16, T bf16) {
  switch (t) {
    case dtype::f16: return f16;
    case dtype::bf16: return bf16;
    case dtype::f32: break;
  }
  return f32;
}

/// Unit roundoff of the type: 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16).
constexpr double unit_roundoff(dtype t) { return limits_of(t).unit_roundoff; }
/// Smallest positive subnormal of the type: the absolute spacing near zero.
constexpr double smallest_subnormal(dtype t) { return limits_of(t).smallest_subnormal; }
/// Largest finite value of the type.
constexpr double largest_finite(dtype t) { return limits_of(t).largest_finite; }

/// Decodes a bit pattern (low 16 bits for f16/bf16) to its exact value.
/// Every f32, f16 and bf16 value is exactly a double; NaN stays NaN.
double decode(dtype t, std::uint32_t bits);

/// Rounds a double to the nearest value of the type (ties to even, overflow to
/// +-inf, NaN to a quiet NaN) and returns its bit pattern. One rounding only:
/// never through an intermediate float for f16/bf16.
std::uint32_t encode(dtype t, double value);

}  // namespace attncheck
