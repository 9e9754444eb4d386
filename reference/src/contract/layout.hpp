// Geometry of the memory layouts (private to the contract library).
#pragma once

#include <cstdint>
#include <optional>

#include "attncheck/case.hpp"

namespace attncheck::detail {

/// Strides, offset and storage length (elements) of a layout for a shape.
struct geometry {
  dims4 stride{};
  std::int64_t offset = 0;
  std::int64_t storage = 0;
};

/// Returns the geometry of shape (each entry >= 1) in layout, or nullopt when
/// the storage length overflows int64.
std::optional<geometry> layout_geometry(dims4 shape, layout_kind layout);

/// a * b, or nullopt on int64 overflow.
inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// a + b, or nullopt on int64 overflow.
inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace attncheck::detail
