// Storage types of the contract (docs/spec.md "Types") and exact conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace attncheck {

/// Storage type of Q, K, V and O. LSE is always f32. The two fp8 types
/// (docs/spec.md "fp8 storage") hold Q, K and V only, never O or a bias:
/// e4m3 is OCP E4M3FN (no infinities, one NaN pattern per sign, largest 448),
/// e5m2 is OCP E5M2 (IEEE-like, largest 57344). The order is the ABI's
/// (ATTNCHECK_F32 = 0 .. ATTNCHECK_E5M2 = 4).
enum class dtype : std::uint8_t { f32, f16, bf16, e4m3, e5m2 };

/// Returns "f32", "f16", "bf16", "e4m3" or "e5m2".
std::string_view name(dtype t);

/// Parses "f32", "f16", "bf16", "e4m3", "e5m2"; nullopt for anything else.
std::optional<dtype> parse_dtype(std::string_view s);

/// True for e4m3 and e5m2: storage of Q, K and V only, read with a descale.
constexpr bool is_fp8(dtype t) { return t == dtype::e4m3 || t == dtype::e5m2; }

/// Bytes per element: 4 for f32, 2 for f16 and bf16, 1 for the fp8 types.
constexpr std::size_t size_of(dtype t) { return t == dtype::f32 ? 4 : is_fp8(t) ? 1 : 2; }

/// The numbers that define each type's rounding: its unit roundoff (2^-24
/// f32, 2^-11 f16, 2^-8 bf16, 2^-4 e4m3, 2^-3 e5m2), its smallest positive
/// subnormal (the absolute spacing near zero) and its largest finite value.
struct dtype_limits {
  double unit_roundoff, smallest_subnormal, largest_finite;
};

constexpr dtype_limits limits_of(dtype t) {
  switch (t) {
    case dtype::f16: return {0x1p-11, 0x1p-24, 65504.0};
    case dtype::bf16: return {0x1p-8, 0x1p-133, 0x1.fep127};
    case dtype::e4m3: return {0x1p-4, 0x1p-9, 448.0};
    case dtype::e5m2: return {0x1p-3, 0x1p-16, 57344.0};
    case dtype::f32: break;
  }
  return {0x1p-24, 0x1p-149, 0x1.fffffep127};
}

/// One value per storage type (bit patterns, thresholds): the one switch over
/// the types, so a new type is a compile error at every caller, not a silent f32.
template <class T>
constexpr T per_dtype(dtype t, T f32, T f16, T bf16, T e4m3, T e5m2) {
  switch (t) {
    case dtype::f16: return f16;
    case dtype::bf16: return bf16;
    case dtype::e4m3: return e4m3;
    case dtype::e5m2: return e5m2;
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

/// Decodes a bit pattern (low 16 bits for f16/bf16, low 8 for fp8) to its
/// exact value. Every value of every type is exactly a double; NaN stays NaN.
double decode(dtype t, std::uint32_t bits);

/// Rounds a double to the nearest value of the type (ties to even, overflow to
/// +-inf, NaN to a quiet NaN; e4m3, which has no infinity, gives its NaN for
/// both) and returns its bit pattern. One rounding only: never through an
/// intermediate float for the narrow types.
std::uint32_t encode(dtype t, double value);

}  // namespace attncheck
