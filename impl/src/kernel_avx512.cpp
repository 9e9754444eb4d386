// The kernel compiled for AVX-512 (F+BW+VL, with AVX2+FMA+F16C), taken at run
// time where the CPU has them (engine.cpp). The same engine as
// kernel_avx2.cpp: its 8-lane layer (simd.hpp) is the AVX2 one, and only the
// register-blocked tile products (micro_kernels.hpp) and their blocking use
// 16 lanes. Each output element there is its own FMA chain, so two 8-lane
// columns in one 16-lane register compute the same bits; every reduction
// (max, sum, exp) keeps the 8-lane pattern. The rest of the project is built
// for the baseline; only this file's kernel functions use these instructions.
#if defined(__x86_64__)
#include "kernel_isa_prelude.hpp"

#define ATTNIMPL_ISA_AVX2 1
#define ATTNIMPL_ISA_AVX512 1
#define ATTNIMPL_ISA_NS avx512

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#endif

#include "engine/kernel.hpp"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // __x86_64__
