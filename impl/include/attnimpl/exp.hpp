// The kernel's own exp and FMA, exposed so tests can measure the exp's
// accuracy (the c_exp the bound of docs/bound.md needs) over every f32 input the kernel
// feeds it, and compare the two instruction sets bit for bit.
#pragma once

#include <cstddef>

#include "attnimpl/attention.hpp"

namespace attnimpl {

/// y[i] = the kernel's exp(x[i]), bit for bit what the kernel computes on
/// instruction set `which`. Returns false (and writes nothing) where this
/// CPU cannot run `which`.
bool exp_kernel(const float* x, float* y, std::size_t n, isa which = isa::automatic);

/// y[i] = the kernel's tanh(x[i]) (the softcap's), bit for bit as on `which`.
/// Returns false (and writes nothing) where this CPU cannot run `which`.
bool tanh_kernel(const float* x, float* y, std::size_t n, isa which = isa::automatic);

/// out[i] = a[i] * b[i] + c[i] rounded once, as the kernel computes it on
/// `which` (an FMA instruction, or its exact emulation on the portable path).
/// Returns false (and writes nothing) where this CPU cannot run `which`.
bool fma_kernel(const float* a, const float* b, const float* c, float* out, std::size_t n, isa which);

}  // namespace attnimpl
