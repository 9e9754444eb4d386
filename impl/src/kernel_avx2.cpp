// The kernel compiled for AVX2+FMA+F16C (x86-64-v3's vector units), taken at
// run time where the CPU has them (isa.cpp). The rest of the project is built
// for the baseline; only this file's kernel functions use these instructions.
#if defined(__x86_64__)
#include "kernel_isa_prelude.hpp"

#define ATTNIMPL_ISA_AVX2 1
#define ATTNIMPL_ISA_NS avx2

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "engine/kernel.hpp"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // __x86_64__
