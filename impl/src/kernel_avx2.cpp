// The kernel compiled for AVX2+FMA+F16C (x86-64-v3's vector units), taken at
// run time where the CPU has them (isa.cpp). The rest of the project is built
// for the baseline; only this file's kernel functions use these instructions.
#if defined(__x86_64__)
#include "isa_target.hpp"
#include "kernel_isa_prelude.hpp"

#define ATTNIMPL_ISA_AVX2 1
#define ATTNIMPL_ISA_NS avx2

ATTNIMPL_TARGET_BEGIN(ATTNIMPL_AVX2_FEATURES)

#include "engine/kernel.hpp"

ATTNIMPL_TARGET_END
#endif  // __x86_64__
