// Helpers of the accuracy sweeps (exp, tanh): the f32 inputs and the ulp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace attnimpl_test {

/// One ulp of an f32 result of magnitude |exact| (subnormal results: 2^-149).
inline double f32_ulp(double exact) {
  const double mag = std::fabs(exact);
  if (mag < 0x1p-126) return 0x1p-149;
  int ex = 0;
  std::frexp(mag, &ex);
  return std::ldexp(1.0, ex - 24);
}

/// The bit patterns [first, last] taken every `step`, handed to fn in
/// batches of up to 4096 (one kernel call each).
template <class Fn>
void sweep_patterns(std::uint32_t first, std::uint32_t last, std::uint32_t step, Fn&& fn) {
  std::vector<float> x;
  for (std::uint64_t b = first; b <= last; b += step) {
    float f;
    const std::uint32_t u = static_cast<std::uint32_t>(b);
    std::memcpy(&f, &u, 4);
    x.push_back(f);
    if (x.size() == 4096 || b + step > last) {
      fn(x);
      x.clear();
    }
  }
}

}  // namespace attnimpl_test
