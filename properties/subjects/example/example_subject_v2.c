/* A complete attncheck subject for ABI version 2, in plain C: a blocked
 * online-softmax kernel (f32, causal mask, key padding, LSE) whose key block
 * is an option of each instance. It shows what version 2 adds to version 1
 * (example_subject.c): an option string, per-instance state handed to every
 * entry point, and size hints, the lengths where the code changes path.
 *
 *     build/attncheck gate --subject path/to/libattncheck_example_v2.so            (block=64)
 *     build/attncheck gate --subject path/to/libattncheck_example_v2.so:block=5
 *
 * Two instances with different blocks can live in one process: nothing is global. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attncheck/subject.h"

typedef struct example_v2 {
  attncheck_instance desc; /* first, so &desc is the instance */
  int64_t block;           /* keys per online-softmax block */
  char name[48];
} example_v2;

static int64_t key_blocks(void* state, const attncheck_problem* p) {
  const example_v2* self = (const example_v2*)state;
  return p->lk > 0 ? (p->lk + self->block - 1) / self->block : 1; /* one rescale per block */
}

static int attend(void* state, const attncheck_problem* p, char* err, size_t err_len) {
  const example_v2* self = (const example_v2*)state;
  if (p->dtype != ATTNCHECK_F32 || p->hkv < 1 || p->hq % p->hkv != 0) {
    snprintf(err, err_len, "example v2: f32 only, hq must be a multiple of hkv");
    return 1;
  }
  const float* q = (const float*)p->q.data;
  const float* k = (const float*)p->k.data;
  const float* v = (const float*)p->v.data;
  float* o = (float*)p->o;
  float* acc = (float*)malloc(sizeof(float) * (size_t)(p->dv > 0 ? p->dv : 1));
  if (!acc) {
    snprintf(err, err_len, "example v2: out of memory");
    return 2;
  }
  const int64_t group = p->hq / p->hkv;
  for (int64_t b = 0; b < p->b; ++b) {
    const int64_t n = p->key_len ? p->key_len[b] : p->lk;
    for (int64_t h = 0; h < p->hq; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < p->lq; ++i) {
        const int64_t pos = n - p->lq + i; /* bottom-right causal alignment */
        const int64_t last = p->causal ? (pos < n - 1 ? pos : n - 1) : n - 1;
        float m = -INFINITY, l = 0.0f;
        for (int64_t e = 0; e < p->dv; ++e) acc[e] = 0.0f;
        /* Online softmax over blocks of keys [j0, j0 + block). */
        for (int64_t j0 = 0; j0 <= last; j0 += self->block) {
          const int64_t j1 = j0 + self->block - 1 < last ? j0 + self->block - 1 : last;
          float bm = -INFINITY;
          for (int64_t j = j0; j <= j1; ++j) {
            float s = 0.0f;
            for (int64_t x = 0; x < p->d; ++x)
              s += q[b * p->q.stride[0] + i * p->q.stride[1] + h * p->q.stride[2] + x * p->q.stride[3]] *
                   k[b * p->k.stride[0] + j * p->k.stride[1] + g * p->k.stride[2] + x * p->k.stride[3]];
            s *= p->scale;
            if (s > bm) bm = s;
          }
          const float m_new = bm > m ? bm : m;
          const float rescale = m == -INFINITY ? 0.0f : expf(m - m_new);
          l *= rescale;
          for (int64_t e = 0; e < p->dv; ++e) acc[e] *= rescale;
          for (int64_t j = j0; j <= j1; ++j) {
            float s = 0.0f;
            for (int64_t x = 0; x < p->d; ++x)
              s += q[b * p->q.stride[0] + i * p->q.stride[1] + h * p->q.stride[2] + x * p->q.stride[3]] *
                   k[b * p->k.stride[0] + j * p->k.stride[1] + g * p->k.stride[2] + x * p->k.stride[3]];
            const float w = expf(s * p->scale - m_new);
            l += w;
            for (int64_t e = 0; e < p->dv; ++e)
              acc[e] += w * v[b * p->v.stride[0] + j * p->v.stride[1] + g * p->v.stride[2] + e * p->v.stride[3]];
          }
          m = m_new;
        }
        for (int64_t e = 0; e < p->dv; ++e)
          o[b * p->o_stride[0] + i * p->o_stride[1] + h * p->o_stride[2] + e * p->o_stride[3]] = last < 0 ? 0.0f : acc[e] / l;
        if (p->lse)
          p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = last < 0 ? -INFINITY : m + logf(l);
      }
    }
  }
  free(acc);
  return 0;
}

static void destroy(attncheck_instance* self) { free(self); }

/* Options: "block=N" (1 <= N <= 65536), or "" for the default 64. */
__attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len) {
  int64_t block = 64;
  if (options && *options) {
    char* end = NULL;
    if (strncmp(options, "block=", 6) != 0 || (block = strtoll(options + 6, &end, 10)) < 1 || block > 65536 || *end) {
      snprintf(err, err_len, "'%s': the only option is block=N with N in [1, 65536]", options);
      return NULL;
    }
  }
  example_v2* self = (example_v2*)calloc(1, sizeof *self);
  if (!self) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  self->block = block;
  snprintf(self->name, sizeof self->name, "example-c-v2 block=%lld", (long long)block);
  attncheck_instance* d = &self->desc;
  d->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_2;
  d->struct_size = sizeof *d;
  d->name = self->name;
  d->dtypes = 1u << ATTNCHECK_F32;
  d->features = ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_LSE;
  d->invariances = ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_LAYOUT | ATTNCHECK_CLAIM_BATCH | ATTNCHECK_CLAIM_LQ;
  d->compute_unit_roundoff = 0x1p-24; /* f32 compute */
  d->exp_ulps = 1.0;                  /* glibc expf: within 1 ulp */
  d->hints.k_tile = block;            /* the generators lean to block +- 1, 2 block + 1, ... */
  d->state = self;
  d->key_blocks = key_blocks;
  d->attend = attend;
  d->destroy = destroy;
  return d;
}
