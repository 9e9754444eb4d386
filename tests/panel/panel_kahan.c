/* Panel kernel kahan: pairwise dot products and compensated sums. The raw
 * product q . k_j is summed pairwise (recursive halving, blocks of 4 summed
 * in order); the scale is applied after the shift, w_j = expf(scale * (r_j -
 * r*)) with r* the raw product of the row's largest score (the largest r_j
 * for scale >= 0, the smallest for scale < 0); l and every acc_e are Kahan
 * sums over the keys in order; O = acc / l, LSE = fl(scale * r*) + logf(l).
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc expf and logf: below 1 ulp), no key_blocks (nb = 1). A scale applied
 * after the subtraction is the second u (m - S_j) of docs/bound.md, step 2. */
#include "panel.h"

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state, (void)d;
  return sizeof(float) * (size_t)(lk + 2 * dv);
}

/* Sum of q_x k_x for x in [lo, hi), pairwise. */
static float dot_pairwise(const float* q, const float* k, int64_t lo, int64_t hi) {
  if (hi - lo <= 4) {
    float s = 0.0f;
    for (int64_t x = lo; x < hi; ++x) s += q[x] * k[x];
    return s;
  }
  const int64_t mid = lo + (hi - lo) / 2;
  return dot_pairwise(q, k, lo, mid) + dot_pairwise(q, k, mid, hi);
}

/* Adds y to the compensated sum (*sum, *comp). */
static void kahan_add(float* sum, float* comp, float y) {
  const float yc = y - *comp;
  const float t = *sum + yc;
  *comp = (t - *sum) - yc;
  *sum = t;
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  float* raw = (float*)r->work;
  float* acc = raw + r->n;
  float* comp = acc + r->dv;
  const int up = r->scale >= 0.0f; /* which raw product gives the largest score */
  float best = 0.0f;
  int have = 0;
  for (int64_t j = 0; j < r->n; ++j) {
    raw[j] = dot_pairwise(r->q, r->k + j * r->d, 0, r->d);
    if (!have || (up ? raw[j] > best : raw[j] < best)) {
      if (raw[j] == raw[j]) best = raw[j], have = 1; /* NaN products never become r* */
    }
  }
  float l = 0.0f, lc = 0.0f;
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0f, comp[e] = 0.0f;
  for (int64_t j = 0; j < r->n; ++j) {
    const float w = expf(r->scale * (raw[j] - best));
    kahan_add(&l, &lc, w);
    for (int64_t e = 0; e < r->dv; ++e) kahan_add(&acc[e], &comp[e], w * r->v[j * r->dv + e]);
  }
  for (int64_t e = 0; e < r->dv; ++e) o[e] = acc[e] / l;
  *lse = r->scale * best + logf(l);
}

/* No options. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len) {
  panel_instance* self = panel_new("kahan", row, work_bytes, NULL, 0, options, err, err_len);
  return self ? &self->desc : NULL;
}
