/* Panel kernel sqrt_scale: the scale split as sqrt into Q and K, as PyTorch's
 * math path does (q' = q r, k' = k r with r = sqrtf(|scale|), K's sign flipped
 * for a negative scale, all in f32); scores s_j = q' . k'_j in dimension
 * order, then the textbook softmax (m = max_j s_j, w_j = expf(s_j - m),
 * l = sum_j w_j in key order, O_e = sum_j w_j V_je / l, LSE = m + logf(l)).
 *
 * Q * 2 with scale / 2 rounds sqrt(scale / 2) anew, so the scores differ in
 * their last bits: the kernel is correct (docs/spec.md "Scores and scale"
 * allows the split, and the bound counts its roundings: docs/bound.md, step 1)
 * but does not keep the scale law's bits. Option claim=1 makes it a version 4
 * instance that claims ATTNCHECK_CLAIM4_SCALE_EXACT anyway: a false claim the
 * scale law must catch.
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc expf and logf: below 1 ulp), nb = 1 (every key at once). */
#include "panel.h"

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state, (void)dv;
  return sizeof(float) * (size_t)(lk + d);
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  float* w = (float*)r->work;
  float* q = w + r->lk;
  const float root = sqrtf(fabsf(r->scale)), k_root = r->scale < 0 ? -root : root;
  for (int64_t x = 0; x < r->d; ++x) q[x] = r->q[x] * root;
  float m = -INFINITY;
  for (int64_t j = 0; j < r->n; ++j) {
    float dot = 0.0f;
    for (int64_t x = 0; x < r->d; ++x) dot += q[x] * (r->k[j * r->d + x] * k_root);
    w[j] = dot;
    if (w[j] > m) m = w[j]; /* a NaN score never becomes the max; it makes its weight NaN below */
  }
  panel_softmax_tail(r, w, m, o, lse);
}

/* Option claim=0 (default) or claim=1 (claims scale_exact, falsely). */
PANEL_EXPORT attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len) {
  static const panel_option claim = {"claim", 0, 0, 1};
  panel_instance* self = panel_new("sqrt_scale", row, work_bytes, &claim, 0, options, err, err_len);
  if (!self) return NULL;
  if (self->size) {
    self->desc.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
    self->desc.invariances_v4 = ATTNCHECK_CLAIM4_SCALE_EXACT;
  }
  return &self->desc;
}
