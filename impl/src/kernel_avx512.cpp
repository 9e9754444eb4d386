// The kernel compiled for AVX-512 (F+BW+VL, with AVX2+FMA+F16C), taken at run
// time where the CPU has them (engine.cpp). The same engine as
// kernel_avx2.cpp: its 8-lane layer (simd.hpp) is the AVX2 one, and only the
// register-blocked tile products (micro_kernels.hpp) and their blocking use
// 16 lanes. Each output element there is its own FMA chain, so two 8-lane
// columns in one 16-lane register compute the same bits; every reduction
// (max, sum, exp) keeps the 8-lane pattern. The rest of the project is built
// for the baseline; only this file's kernel functions use these instructions.
#if defined(__x86_64__)
#include "isa_target.hpp"
#include "kernel_isa_prelude.hpp"

#define ATTNIMPL_ISA_AVX2 1
#define ATTNIMPL_ISA_AVX512 1
#define ATTNIMPL_ISA_NS avx512

ATTNIMPL_TARGET_BEGIN(ATTNIMPL_AVX512_FEATURES)

#include "engine/kernel.hpp"

ATTNIMPL_TARGET_END
#endif  // __x86_64__
