// The kernel in portable C++, for CPUs without AVX2/FMA/F16C (or when asked:
// config::simd, builtin:simd=portable). The same operations lane by lane, so
// it computes the AVX2 path's bits (simd.hpp); slower, never less accurate.
#include "kernel_isa_prelude.hpp"

#define ATTNIMPL_ISA_AVX2 0
#define ATTNIMPL_ISA_NS portable

#include "engine/kernel.hpp"
