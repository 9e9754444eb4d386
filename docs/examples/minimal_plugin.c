/* A minimal attncheck subject, ABI version 4: naive attention in f32 with the causal mask, key padding and LSE.
 *   cc -O2 -shared -fPIC -Iproperties/abi/include docs/examples/minimal_plugin.c -o libminimal.so -lm
 *   build/attncheck gate --subject ./libminimal.so */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attncheck/subject.h"

/* Element [b, x, y, z] of a strided tensor; query head h reads KV head h / (hq / hkv). */
#define AT(t, s, b, x, y, z) ((t)[(b) * (s)[0] + (x) * (s)[1] + (y) * (s)[2] + (z) * (s)[3]])
#define KV_HEAD(p, h) ((h) / ((p)->hq / (p)->hkv))

static float score(const attncheck_problem* p, int64_t b, int64_t i, int64_t h, int64_t j) {
  const float *q = p->q.data, *k = p->k.data;
  float s = 0.0f;
  for (int64_t x = 0; x < p->d; ++x) s += AT(q, p->q.stride, b, i, h, x) * AT(k, p->k.stride, b, j, KV_HEAD(p, h), x);
  return s * p->scale;
}

/* Only what the instance declares arrives: f32, no mask, no cache. Keys a row does not see (causally hidden, or
 * past key_len[b]) may hold NaN: never read them. A case the kernel cannot compute is declined, not failed:
 * return ATTNCHECK_DECLINED with the reason in err (docs/abi.md "Return status: declined"). */
static int attend(void* state, const attncheck_problem* p, char* err, size_t err_len) {
  (void)state, (void)err, (void)err_len;
  const float* v = p->v.data;
  float* o = p->o;
  for (int64_t b = 0; b < p->b; ++b)
    for (int64_t h = 0; h < p->hq; ++h)
      for (int64_t i = 0; i < p->lq; ++i) {
        const int64_t n = p->key_len ? p->key_len[b] : p->lk, pos = n - p->lq + i; /* bottom-right causal */
        const int64_t last = p->causal && pos < n - 1 ? pos : n - 1;               /* row i sees keys 0..last */
        float m = -INFINITY, l = 0.0f;
        for (int64_t j = 0; j <= last; ++j) m = fmaxf(m, score(p, b, i, h, j));
        for (int64_t e = 0; e < p->dv; ++e) AT(o, p->o_stride, b, i, h, e) = 0.0f; /* stays 0 if no key is seen */
        for (int64_t j = 0; j <= last; ++j) {
          const float w = expf(score(p, b, i, h, j) - m);
          l += w;
          for (int64_t e = 0; e < p->dv; ++e) AT(o, p->o_stride, b, i, h, e) += w * AT(v, p->v.stride, b, j, KV_HEAD(p, h), e);
        }
        for (int64_t e = 0; e < p->dv && last >= 0; ++e) AT(o, p->o_stride, b, i, h, e) /= l;
        if (p->lse)
          p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = last >= 0 ? m + logf(l) : -INFINITY;
      }
  return 0;
}

static void destroy(attncheck_instance* self) { free(self); }

attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len) {
  attncheck_instance* d = options && *options ? NULL : calloc(1, sizeof *d);
  if (!d) {
    snprintf(err, err_len, "%s", options && *options ? "this subject takes no options" : "out of memory");
    return NULL;
  }
  d->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  d->struct_size = sizeof *d;
  d->name = "minimal-c";
  d->dtypes = 1u << ATTNCHECK_F32;
  d->features = ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_LSE;
  d->features_v3 = 0; /* ATTNCHECK_FEATURE3_*: variants, paged K/V, ragged batches, backward (docs/abi.md) */
  d->invariances = ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_LAYOUT | ATTNCHECK_CLAIM_BATCH | ATTNCHECK_CLAIM_LQ;
  d->compute_unit_roundoff = 0x1p-24;               /* f32 arithmetic */
  d->exp_ulps = 1.0;                                /* glibc expf */
  d->invariances_v4 = ATTNCHECK_CLAIM4_SCALE_EXACT; /* the scale multiplies the finished dot product */
  /* profile, conventions, limits: NULL, the contract's (one u for every stage, O = 0 and LSE = -inf for a row
   * that sees no key, masked slots never read, no size limits); docs/abi.md "Version 4" declares the others. */
  d->attend = attend;
  d->destroy = destroy;
  return d;
}
