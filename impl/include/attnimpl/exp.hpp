// The kernel's own exp, exposed so a test can measure its accuracy (the
// c_exp the SPEC bound needs) over every f32 input the kernel feeds it.
#pragma once

#include <cstddef>

namespace attnimpl {

/// y[i] = the kernel's exp(x[i]), bit for bit what the kernel computes.
void exp_kernel(const float* x, float* y, std::size_t n);

}  // namespace attnimpl
