/* The smallest useful attncheck subject (ABI version 2, plain C, f32): all
 * keys of a row at once (no online softmax), sums in double, one rounding to
 * f32 per output. Causal mask, key padding and LSE; no options. It is built
 * with nothing of attncheck but the ABI header (attncheck::abi). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attncheck/subject.h"

#define AT(t, s, b, i, h, e) ((t)[(b) * (s)[0] + (i) * (s)[1] + (h) * (s)[2] + (e) * (s)[3]])

static int attend(void* state, const attncheck_problem* p, char* err, size_t err_len) {
  (void)state;
  if (p->dtype != ATTNCHECK_F32 || p->hkv < 1 || p->hq % p->hkv != 0) {
    snprintf(err, err_len, "tiny: f32 only, hq must be a multiple of hkv");
    return 1;
  }
  const float *q = (const float*)p->q.data, *k = (const float*)p->k.data, *v = (const float*)p->v.data;
  float* o = (float*)p->o;
  double* w = (double*)malloc(sizeof(double) * (size_t)(p->lk > 0 ? p->lk : 1));
  if (!w) {
    snprintf(err, err_len, "tiny: out of memory");
    return 2;
  }
  for (int64_t b = 0; b < p->b; ++b) {
    const int64_t n = p->key_len ? p->key_len[b] : p->lk;
    for (int64_t h = 0; h < p->hq; ++h) {
      const int64_t g = h / (p->hq / p->hkv);
      for (int64_t i = 0; i < p->lq; ++i) {
        const int64_t pos = n - p->lq + i; /* bottom-right causal alignment */
        const int64_t last = p->causal && pos < n - 1 ? pos : n - 1;
        double m = -INFINITY, l = 0;
        for (int64_t j = 0; j <= last; ++j) {
          double s = 0;
          for (int64_t x = 0; x < p->d; ++x) s += (double)AT(q, p->q.stride, b, i, h, x) * AT(k, p->k.stride, b, j, g, x);
          w[j] = s * p->scale;
          if (w[j] > m) m = w[j];
        }
        for (int64_t j = 0; j <= last; ++j) l += (w[j] = exp(w[j] - m));
        for (int64_t e = 0; e < p->dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j <= last; ++j) acc += w[j] * AT(v, p->v.stride, b, j, g, e);
          AT(o, p->o_stride, b, i, h, e) = last < 0 ? 0.0f : (float)(acc / l);
        }
        if (p->lse)
          p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = last < 0 ? -INFINITY : (float)(m + log(l));
      }
    }
  }
  free(w);
  return 0;
}

static void destroy(attncheck_instance* self) { free(self); }

__attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len) {
  if (options && *options) {
    snprintf(err, err_len, "'%s': tiny takes no options", options);
    return NULL;
  }
  attncheck_instance* d = (attncheck_instance*)calloc(1, sizeof *d);
  if (!d) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  d->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_2;
  d->struct_size = sizeof *d;
  d->name = "tiny-consumer";
  d->dtypes = 1u << ATTNCHECK_F32;
  d->features = ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_LSE;
  d->invariances = ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_LAYOUT | ATTNCHECK_CLAIM_BATCH | ATTNCHECK_CLAIM_LQ;
  d->compute_unit_roundoff = 0x1p-24; /* declared as f32 compute: loose for sums in double */
  d->exp_ulps = 1.0;
  d->state = d;
  d->attend = attend;
  d->destroy = destroy;
  return d;
}
