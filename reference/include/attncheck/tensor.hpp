// A strided 4-d tensor holding exact storage bit patterns.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "attncheck/dtype.hpp"

namespace attncheck {

/// Dims in the contract's order: (batch, sequence, head, dim) for Q, K, V, O.
using dims4 = std::array<std::int64_t, 4>;

/// Element storage plus a view (shape, strides in elements, offset).
/// Strides are >= 0; a zero stride broadcasts (read-only use).
/// Storage holds raw bit patterns, so NaN payloads, -0 and subnormals survive.
struct tensor {
  dtype type = dtype::f32;
  dims4 shape{};
  dims4 stride{};
  std::int64_t offset = 0;
  std::vector<std::uint32_t> bits;  ///< one entry per storage element (16-bit types in the low half)

  /// Returns a dense row-major tensor of the given shape, all +0.
  static tensor contiguous(dtype t, dims4 shape);

  std::int64_t elements() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
  std::int64_t index(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const {
    return offset + i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
  }
  std::uint32_t bits_at(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const {
    return bits[static_cast<std::size_t>(index(i0, i1, i2, i3))];
  }
  void set_bits(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3, std::uint32_t b) {
    bits[static_cast<std::size_t>(index(i0, i1, i2, i3))] = b;
  }
  /// Exact value of an element.
  double at(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const {
    return decode(type, bits_at(i0, i1, i2, i3));
  }
  /// Rounds value to the storage type and stores it.
  void set(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3, double value) {
    set_bits(i0, i1, i2, i3, encode(type, value));
  }

  /// Packs the storage into the type's native width (f32: 4 bytes, f16/bf16: 2).
  std::vector<unsigned char> packed_storage() const;
  /// Inverse of packed_storage for a tensor whose view is already set.
  void unpack_storage(const unsigned char* data, std::size_t bytes);
};

/// Returns true when every element reachable through the view lies in storage.
bool view_in_bounds(const tensor& t);

}  // namespace attncheck
