/* A correct f32 kernel, written from docs/spec.md alone, whose arithmetic the
 * laws that demand an effect must not mistake for a bug:
 *  - q.k is a plain f32 dot product that may overflow to +-inf, with no
 *    rescue: a row whose every visible score is -inf is empty (O = 0,
 *    LSE = -inf), as the contract allows where the oracle's bound is +inf;
 *  - exp is glibc's expf moved one ulp towards zero, so exp(0) = 1 - 2^-24
 *    (within the declared 2 ulps);
 *  - O is normalized by a reciprocal, acc * (1 / l): with one visible key,
 *    O is V within the bound but often not V bit for bit.
 * Takes causal and padding, gives LSE. tests/laws/effect_audit_test.sh
 * replays the cases that falsely failed it before the rule of require_changes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attncheck/subject.h"

static float exp_low(float x) { return nextafterf(expf(x), 0.0f); }

static int attend(const attncheck_problem* p, char* err, size_t err_len) {
  if (p->dtype != ATTNCHECK_F32 || p->hkv < 1 || p->hq % p->hkv != 0) {
    snprintf(err, err_len, "effect audit kernel: f32 only, hq must be a multiple of hkv");
    return 1;
  }
  const float* q = (const float*)p->q.data;
  const float* k = (const float*)p->k.data;
  const float* v = (const float*)p->v.data;
  float* o = (float*)p->o;
  float* w = (float*)malloc(sizeof(float) * (size_t)(p->lk > 0 ? p->lk : 1));
  if (!w) {
    snprintf(err, err_len, "effect audit kernel: out of memory");
    return 2;
  }
  for (int64_t b = 0; b < p->b; ++b) {
    const int64_t n = p->key_len ? p->key_len[b] : p->lk;
    for (int64_t h = 0; h < p->hq; ++h) {
      const int64_t g = h / (p->hq / p->hkv);
      for (int64_t i = 0; i < p->lq; ++i) {
        const int64_t pos = n - p->lq + i; /* bottom-right causal alignment */
        const int64_t last = p->causal ? (pos < n - 1 ? pos : n - 1) : n - 1;
        float m = -INFINITY, l = 0.0f;
        for (int64_t j = 0; j <= last; ++j) {
          float s = 0.0f;
          for (int64_t x = 0; x < p->d; ++x)
            s += q[b * p->q.stride[0] + i * p->q.stride[1] + h * p->q.stride[2] + x * p->q.stride[3]] *
                 k[b * p->k.stride[0] + j * p->k.stride[1] + g * p->k.stride[2] + x * p->k.stride[3]];
          w[j] = s * p->scale;
          if (w[j] > m) m = w[j];
        }
        const int empty = last < 0 || m == -INFINITY; /* no key, or every score overflowed to -inf */
        for (int64_t j = 0; j <= last && !empty; ++j) l += (w[j] = exp_low(w[j] - m));
        const float r = empty ? 0.0f : 1.0f / l;
        for (int64_t e = 0; e < p->dv; ++e) {
          float acc = 0.0f;
          for (int64_t j = 0; j <= last && !empty; ++j)
            acc += w[j] * v[b * p->v.stride[0] + j * p->v.stride[1] + g * p->v.stride[2] + e * p->v.stride[3]];
          o[b * p->o_stride[0] + i * p->o_stride[1] + h * p->o_stride[2] + e * p->o_stride[3]] = acc * r;
        }
        if (p->lse) p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = empty ? -INFINITY : m + logf(l);
      }
    }
  }
  free(w);
  return 0;
}

static const attncheck_subject effect_audit = {
    ATTNCHECK_SUBJECT_ABI_VERSION_1,
    "effect-audit-f32",
    1u << ATTNCHECK_F32,
    ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_LSE,
    ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_LAYOUT,
    0x1p-24, /* f32 compute */
    2.0,     /* expf (1 ulp) moved one ulp towards zero */
    NULL,    /* sees all keys at once, nb = 1 */
    attend,
    NULL,
    NULL,
    NULL,
    NULL, /* no cache */
};

__attribute__((visibility("default"))) const attncheck_subject* attncheck_subject_v1(void) { return &effect_audit; }
