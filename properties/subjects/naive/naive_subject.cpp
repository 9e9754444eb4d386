// The naive f32 subject: materialized score rows, plain expf, sums in reverse
// key order. A second algorithm, independent of impl/, that proves the gate
// is implementation-agnostic and the bound sound for another summation order.
#include <cstddef>
#include <cstdint>
#include <new>

#include "attncheck/subject.h"
#ifndef ATTNCHECK_PLUGIN
#include "attncheck/bundled_subjects.hpp"
#endif
#include "naive_backward.hpp"
#include "naive_forward.hpp"
#include "naive_rows.hpp"

namespace {

int naive_attend(const attncheck_problem* p, char* err, std::size_t err_len) {
  return naive_attend_variants(p, nullptr, err, err_len);
}

const attncheck_subject naive_desc = {
    ATTNCHECK_SUBJECT_ABI_VERSION_1,
    "naive-f32",
    (1u << ATTNCHECK_F32) | (1u << ATTNCHECK_F16) | (1u << ATTNCHECK_BF16),
    ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_LSE |
        ATTNCHECK_FEATURE_CACHE,
    // Every row is computed alone in a fixed order over key positions.
    ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_THREADS | ATTNCHECK_CLAIM_BATCH | ATTNCHECK_CLAIM_CACHE |
        ATTNCHECK_CLAIM_LAYOUT | ATTNCHECK_CLAIM_LQ,
    0x1p-24,
    1.0,  // glibc expf: < 1 ulp
    nullptr,
    naive_attend,
    naive_cache_create,
    naive_cache_append,
    naive_cache_attend,
    naive_cache_free,
};

// ---- Version 3: the same subject with the contract 1.1 variants ----

int v3_attend(void*, const attncheck_problem* p, char* err, std::size_t err_len) {
  // variants, paged and ragged are read only where the host's problem is long enough to hold them.
  const bool has_v3 = p->struct_size >= offsetof(attncheck_problem, variants) + sizeof p->variants;
  const bool has_forms = p->struct_size >= offsetof(attncheck_problem, ragged) + sizeof p->ragged;
  return naive_attend_forms(p, has_v3 ? p->variants : nullptr, has_forms ? p->paged : nullptr, has_forms ? p->ragged : nullptr,
                            err, err_len);
}
void* v3_cache_create(void*, const attncheck_cache_config* cfg, char* err, std::size_t err_len) {
  return naive_cache_create(cfg, err, err_len);
}
int v3_cache_append(void*, void* cache, const attncheck_tensor* k, const attncheck_tensor* v, std::int64_t c,
                    const std::int64_t* count, char* err, std::size_t err_len) {
  return naive_cache_append(cache, k, v, c, count, err, err_len);
}
int v3_cache_attend(void*, void* cache, const attncheck_problem* p, char* err, std::size_t err_len) {
  return naive_cache_attend(cache, p, err, err_len);
}
void v3_cache_free(void*, void* cache) { naive_cache_free(cache); }
void v3_destroy(attncheck_instance* self) { delete self; }

attncheck_instance* naive_v3(const char* options, char* err, std::size_t err_len) {
  if (options && *options) {
    write_err(err, err_len, "naive takes no options");
    return nullptr;
  }
  auto* x = new (std::nothrow) attncheck_instance{};
  if (!x) {
    write_err(err, err_len, "out of memory");
    return nullptr;
  }
  x->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  x->struct_size = sizeof(attncheck_instance);
  x->name = naive_desc.name;
  // fp8 inputs with tensor and head descales, in the one-shot call (the cache path takes none).
  x->dtypes = naive_desc.dtypes | (1u << ATTNCHECK_E4M3) | (1u << ATTNCHECK_E5M2);
  x->features_v4 = ATTNCHECK_FEATURE4_FP8;
  x->features = naive_desc.features;
  x->invariances = naive_desc.invariances;
  x->compute_unit_roundoff = naive_desc.compute_unit_roundoff;
  x->exp_ulps = naive_desc.exp_ulps;
  x->attend = v3_attend;
  x->cache_create = v3_cache_create;
  x->cache_append = v3_cache_append;
  x->cache_attend = v3_cache_attend;
  x->cache_free = v3_cache_free;
  x->destroy = v3_destroy;
  // Every score variant, in the one-shot call (the cache path takes none).
  x->features_v3 = ATTNCHECK_FEATURE3_WINDOW | ATTNCHECK_FEATURE3_CHUNK | ATTNCHECK_FEATURE3_SOFTCAP | ATTNCHECK_FEATURE3_SINKS |
                   ATTNCHECK_FEATURE3_ALIBI | ATTNCHECK_FEATURE3_BIAS | ATTNCHECK_FEATURE3_BACKWARD |
                   ATTNCHECK_FEATURE3_BACKWARD_VARIANTS | ATTNCHECK_FEATURE3_PAGED | ATTNCHECK_FEATURE3_RAGGED;
  // Paged K/V and ragged batches: each sequence reads its own valid keys in the dense order, so the
  // forms give the dense form's bits.
  // Backward under every variant (d(sink) too); f32 compute and glibc expf as the forward. backward_blocks NULL: one
  // block each way.
  x->attend_backward = v3_attend_backward;
  // Same call, same bits: every sum runs in one fixed order whatever the thread count.
  x->invariances_v3 = ATTNCHECK_CLAIM3_BACKWARD_DETERMINISTIC | ATTNCHECK_CLAIM3_PAGE_PLACEMENT |
                      ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE | ATTNCHECK_CLAIM3_RAGGED_EQUALS_DENSE;
  x->tanh_ulps = 2.0;  // glibc tanhf: 2 ulps (its libm-test-ulps, x86_64)
  // The scale multiplies the f32 dot product: Q or K * 2^k with scale * 2^-k is the same score, bit for bit.
  x->invariances_v4 = ATTNCHECK_CLAIM4_SCALE_EXACT;
  return x;
}

}  // namespace

#ifdef ATTNCHECK_PLUGIN
extern "C" __attribute__((visibility("default"))) const attncheck_subject* attncheck_subject_v1(void) { return &naive_desc; }
extern "C" __attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v3(const char* options, char* err,
                                                                                           std::size_t err_len) {
  return naive_v3(options, err, err_len);
}
#else
namespace attncheck {
const attncheck_subject* naive_subject() { return &naive_desc; }
attncheck_instance* naive_instance_v3(const char* options, char* err, std::size_t err_len) {
  return naive_v3(options, err, err_len);
}
}  // namespace attncheck
#endif
