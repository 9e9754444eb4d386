// Array form of the kernel's exp, for the accuracy test.
#include "attnimpl/exp.hpp"

#include "simd.hpp"

namespace attnimpl {

void exp_kernel(const float* x, float* y, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, simd::exp8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = simd::exp1(x[i]);
}

}  // namespace attnimpl
