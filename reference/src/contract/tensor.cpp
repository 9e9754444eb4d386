#include "attncheck/tensor.hpp"

#include <cstring>

namespace attncheck {

tensor tensor::contiguous(dtype t, dims4 shape) {
  tensor x;
  x.type = t;
  x.shape = shape;
  x.stride = {shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1};
  x.bits.assign(static_cast<std::size_t>(x.elements()), 0u);
  return x;
}

std::vector<unsigned char> tensor::packed_storage() const {
  const std::size_t w = size_of(type);
  std::vector<unsigned char> out(bits.size() * w);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (w == 4) {
      std::memcpy(&out[i * 4], &bits[i], 4);
    } else if (w == 1) {
      out[i] = static_cast<unsigned char>(bits[i]);
    } else {
      const auto h = static_cast<std::uint16_t>(bits[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

void tensor::unpack_storage(const unsigned char* data, std::size_t bytes) {
  const std::size_t w = size_of(type);
  bits.assign(bytes / w, 0u);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (w == 4) {
      std::memcpy(&bits[i], data + i * 4, 4);
    } else if (w == 1) {
      bits[i] = data[i];
    } else {
      std::uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      bits[i] = h;
    }
  }
}

bool view_in_bounds(const tensor& t) {
  if (t.offset < 0) return false;
  for (int a = 0; a < 4; ++a)
    if (t.shape[a] < 0 || t.stride[a] < 0) return false;
  if (t.elements() == 0) return true;
  // Largest reachable index; callers validated the shape products against overflow.
  std::int64_t last = t.offset;
  for (int a = 0; a < 4; ++a) last += (t.shape[a] - 1) * t.stride[a];
  return last < static_cast<std::int64_t>(t.bits.size());
}

}  // namespace attncheck
