/* Panel kernel fma: every multiply-add fused (C's fmaf, one rounding each).
 * The scale is folded into the query first, qs_d = q_d * scale; scores
 * s_j = fmaf-chained qs . k_j over the dimensions in reverse order; two-pass
 * softmax with keys visited from the last to the first: m = max_j s_j,
 * w_j = expf(s_j - m), l = sum_j w_j, acc_e = fmaf(w_j, V_je, acc_e);
 * O = acc / l, LSE = m + logf(l).
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc expf and logf: below 1 ulp), no key_blocks (nb = 1). */
#include "panel.h"

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state;
  return sizeof(float) * (size_t)(lk + d + dv);
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  float* w = (float*)r->work;
  float* qs = w + r->n;
  float* acc = qs + r->d;
  for (int64_t x = 0; x < r->d; ++x) qs[x] = r->q[x] * r->scale;
  float m = -INFINITY;
  for (int64_t j = r->n - 1; j >= 0; --j) {
    float dot = 0.0f;
    for (int64_t x = r->d - 1; x >= 0; --x) dot = fmaf(qs[x], r->k[j * r->d + x], dot);
    w[j] = dot;
    if (dot > m) m = dot;
  }
  float l = 0.0f;
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0f;
  for (int64_t j = r->n - 1; j >= 0; --j) {
    const float wj = expf(w[j] - m);
    l += wj;
    for (int64_t e = 0; e < r->dv; ++e) acc[e] = fmaf(wj, r->v[j * r->dv + e], acc[e]);
  }
  for (int64_t e = 0; e < r->dv; ++e) o[e] = acc[e] / l;
  *lse = m + logf(l);
}

/* No options. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len) {
  panel_instance* self = panel_new("fma", row, work_bytes, NULL, 0, options, err, err_len);
  return self ? &self->desc : NULL;
}
