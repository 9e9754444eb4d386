// The shared attention engine: plain and paged-cache attention both describe
// their keys with a kv_source and call run(). One code path, one reduction
// order, so prefill and decode agree bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attnimpl/attention.hpp"

namespace attnimpl::engine {

/// Where key/value row (b, j, g) lives. Contiguous: base + b*s0 + j*s1 + g*s2.
/// Paged: page = table[b * table_stride + j / page_size]; slot = j % page_size;
/// row at base + page * page_stride + slot * s1 + g * s2. All in elements.
struct kv_source {
  const void* k = nullptr;
  const void* v = nullptr;
  dtype type = dtype::f32;
  strides4 ks{}, vs{};
  const std::int32_t* table = nullptr;  ///< null: contiguous
  std::int64_t table_stride = 0;
  std::int64_t page_size = 1;
  std::int64_t k_page_stride = 0, v_page_stride = 0;
  std::int64_t num_pages = 0;  ///< pages in each arena (read by a mutation point only)

  std::int64_t k_offset(std::int64_t b, std::int64_t g, std::int64_t j) const {
    if (!table) return b * ks[0] + j * ks[1] + g * ks[2];
    const std::int64_t page = table[b * table_stride + j / page_size];
    return page * k_page_stride + (j % page_size) * ks[1] + g * ks[2];
  }
  std::int64_t v_offset(std::int64_t b, std::int64_t g, std::int64_t j) const {
    if (!table) return b * vs[0] + j * vs[1] + g * vs[2];
    const std::int64_t page = table[b * table_stride + j / page_size];
    return page * v_page_stride + (j % page_size) * vs[1] + g * vs[2];
  }
};

/// A validated problem. key_len[b] (or lk) keys exist for batch b; only
/// keys below it are ever read.
struct problem {
  shape dims;
  tensor_in q;
  kv_source kv;
  tensor_out o;
  lse_out lse;
  float scale = 1.0f;
  bool causal = false;
  const std::int64_t* key_len = nullptr;
  mask_in mask;
  variants var;  ///< validated (check_variants)
  /// Added to every query position by one mutation point only (a packed
  /// sequence aligned to the batch's totals); 0 and unread otherwise.
  std::int64_t pos_shift = 0;
};

/// The problem of a one-shot call (attention_args, paged_attention_args):
/// the caller's shape, Q, O, LSE, scale (default_scale(D) when unset),
/// causal flag, key lengths, mask and variants, with K and V from kv.
template <class Args>
problem call_problem(const Args& a, const kv_source& kv) {
  problem p;
  p.dims = a.dims;
  p.q = a.q;
  p.kv = kv;
  p.o = a.o;
  p.lse = a.lse;
  p.scale = a.scale ? *a.scale : default_scale(a.dims.d);
  p.causal = a.causal;
  p.key_len = a.key_len;
  p.mask = a.mask;
  p.var = a.var;
  return p;
}

/// Computes the problem with a resolved config (every field > 0, simd
/// avx512, avx2 or portable), on that instruction set's build of the kernel.
void run(const problem& p, const config& cfg);

/// The kernel's exp on n floats (the accuracy test's view of it).
void exp_array(const float* x, float* y, std::size_t n, isa which);

/// The kernel's tanh on n floats (the softcap's, for its accuracy test).
void tanh_array(const float* x, float* y, std::size_t n, isa which);

/// One build of the kernel's entry points. kernel_avx512.cpp, kernel_avx2.cpp
/// and kernel_portable.cpp define one each (engine/kernel.hpp).
struct isa_build {
  void (*run)(const problem& p, const config& cfg);
  void (*exp_array)(const float* x, float* y, std::size_t n);
  void (*tanh_array)(const float* x, float* y, std::size_t n);
  void (*fma_array)(const float* a, const float* b, const float* c, float* out, std::size_t n);
};
namespace avx512 {
extern const isa_build entry_points;
}
namespace avx2 {
extern const isa_build entry_points;
}
namespace portable {
extern const isa_build entry_points;
}

/// The build of an instruction set (portable where the target is not x86-64).
const isa_build& build_for(isa which);

}  // namespace attnimpl::engine
