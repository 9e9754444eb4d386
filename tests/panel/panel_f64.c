/* Panel kernel f64: binary64 from the decoded inputs to the end, rounded once
 * into O's storage type (LSE once into binary32). Scores s_j = (q . k_j) *
 * scale in double (products of binary32 values are exact); two-pass softmax:
 * m = max_j s_j, w_j = exp(s_j - m), l and acc_e summed in key order; O = acc / l,
 * LSE = m + log(l).
 *
 * Declares f32, f16 and bf16 storage with binary64 compute (u = 2^-53, the
 * bound then takes binary64's range), exp_ulps 1 (glibc exp and log: below
 * 1 ulp), no key_blocks (nb = 1). */
#include "panel.h"

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state, (void)d;
  return sizeof(double) * (size_t)(lk + dv);
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  double* w = (double*)r->work;
  double* acc = w + r->n;
  double m = -INFINITY;
  for (int64_t j = 0; j < r->n; ++j) {
    double dot = 0.0;
    for (int64_t x = 0; x < r->d; ++x) dot += (double)r->q[x] * (double)r->k[j * r->d + x];
    w[j] = dot * (double)r->scale;
    if (w[j] > m) m = w[j];
  }
  double l = 0.0;
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0;
  for (int64_t j = 0; j < r->n; ++j) {
    const double wj = exp(w[j] - m);
    l += wj;
    for (int64_t e = 0; e < r->dv; ++e) acc[e] += wj * (double)r->v[j * r->dv + e];
  }
  for (int64_t e = 0; e < r->dv; ++e) o[e] = acc[e] / l;
  *lse = m + log(l);
}

/* No options. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len) {
  panel_instance* self = panel_new("f64", row, work_bytes, NULL, 0, options, err, err_len);
  if (self) self->desc.compute_unit_roundoff = 0x1p-53;
  return self ? &self->desc : NULL;
}
