/* A complete minimal attncheck subject in plain C: f32 storage, causal mask
 * and key padding, no LSE, no cache. Copy it to wrap your own kernel: fill
 * in attend(), declare what you take, and run
 *     build/attncheck gate --subject path/to/libyours.so
 * Laws the subject cannot take (f16, boolean masks, LSE, cache) are skipped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attncheck/subject.h"

/* The two index rules most often got wrong; tests/plugins builds broken
 * variants of this file by redefining them (MUTANTS.md gqa_modulo, causal_top_left). */
#ifndef EXAMPLE_KV_HEAD
#define EXAMPLE_KV_HEAD(h, group, hkv) ((h) / (group)) /* query head h reads KV head h / G */
#endif
#ifndef EXAMPLE_QUERY_POS
#define EXAMPLE_QUERY_POS(n, lq, i) ((n) - (lq) + (i)) /* bottom-right: last query meets last valid key */
#endif

static int attend(const attncheck_problem* p, char* err, size_t err_len) {
  if (p->dtype != ATTNCHECK_F32 || p->hkv < 1 || p->hq % p->hkv != 0) {
    snprintf(err, err_len, "example subject: f32 only, hq must be a multiple of hkv");
    return 1;
  }
  const float* q = (const float*)p->q.data;
  const float* k = (const float*)p->k.data;
  const float* v = (const float*)p->v.data;
  float* o = (float*)p->o;
  float* w = (float*)malloc(sizeof(float) * (size_t)(p->lk > 0 ? p->lk : 1));
  if (!w) {
    snprintf(err, err_len, "example subject: out of memory");
    return 2;
  }
  for (int64_t b = 0; b < p->b; ++b) {
    const int64_t n = p->key_len ? p->key_len[b] : p->lk; /* valid keys */
    for (int64_t h = 0; h < p->hq; ++h) {
      const int64_t g = EXAMPLE_KV_HEAD(h, p->hq / p->hkv, p->hkv);
      for (int64_t i = 0; i < p->lq; ++i) {
        const int64_t pos = EXAMPLE_QUERY_POS(n, p->lq, i);
        const int64_t last = p->causal ? (pos < n - 1 ? pos : n - 1) : n - 1;
        float m = -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j <= last; ++j) {
          float s = 0.0f;
          for (int64_t x = 0; x < p->d; ++x)
            s += q[b * p->q.stride[0] + i * p->q.stride[1] + h * p->q.stride[2] + x * p->q.stride[3]] *
                 k[b * p->k.stride[0] + j * p->k.stride[1] + g * p->k.stride[2] + x * p->k.stride[3]];
          w[j] = s * p->scale;
          if (w[j] > m) m = w[j];
        }
        for (int64_t j = 0; j <= last; ++j) sum += (w[j] = expf(w[j] - m));
        for (int64_t e = 0; e < p->dv; ++e) {
          float acc = 0.0f;
          for (int64_t j = 0; j <= last; ++j)
            acc += w[j] * v[b * p->v.stride[0] + j * p->v.stride[1] + g * p->v.stride[2] + e * p->v.stride[3]];
          /* A row that sees no key (last < 0) gives 0, never 0/0. */
          o[b * p->o_stride[0] + i * p->o_stride[1] + h * p->o_stride[2] + e * p->o_stride[3]] = last < 0 ? 0.0f : acc / sum;
        }
      }
    }
  }
  free(w);
  return 0;
}

/* The unsuffixed name: this file also builds against the frozen version 1
 * header (tests/abi/v1), which has no ATTNCHECK_SUBJECT_ABI_VERSION_1. */
static const attncheck_subject example = {
    ATTNCHECK_SUBJECT_ABI_VERSION,
    "example-c",
    1u << ATTNCHECK_F32,
    ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING,
    ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_LAYOUT,
    0x1p-24, /* f32 compute */
    1.0,     /* glibc expf: within 1 ulp */
    NULL,    /* key_blocks: sees all keys at once, nb = 1 */
    attend,
    NULL,
    NULL,
    NULL,
    NULL, /* no cache */
};

__attribute__((visibility("default"))) const attncheck_subject* attncheck_subject_v1(void) { return &example; }
