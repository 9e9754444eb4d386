// Compiling a region of a translation unit for an instruction set: every
// function defined between ATTNIMPL_TARGET_BEGIN("avx2,fma,f16c") and
// ATTNIMPL_TARGET_END uses those instructions, the rest of the file stays
// built for the baseline. The kernel's ISA translation units and the
// backward's builds open their regions with it. Include what the region
// needs from outside BEFORE the begin (kernel_isa_prelude.hpp says why).
#pragma once

#define ATTNIMPL_PRAGMA(text) _Pragma(#text)

/// The instructions of each build: x86-64-v3's vector units (AVX2, FMA,
/// F16C), and those with AVX-512 F, BW and VL.
#define ATTNIMPL_AVX2_FEATURES "avx2,fma,f16c"
#define ATTNIMPL_AVX512_FEATURES "avx512f,avx512bw,avx512vl,avx2,fma,f16c"

#if defined(__clang__)
#define ATTNIMPL_TARGET_BEGIN(features) \
  ATTNIMPL_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define ATTNIMPL_TARGET_END ATTNIMPL_PRAGMA(clang attribute pop)
#else
#define ATTNIMPL_TARGET_BEGIN(features) ATTNIMPL_PRAGMA(GCC push_options) ATTNIMPL_PRAGMA(GCC target(features))
#define ATTNIMPL_TARGET_END ATTNIMPL_PRAGMA(GCC pop_options)
#endif
