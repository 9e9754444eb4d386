/* Panel kernel ftz: a base-2 softmax run with subnormals flushed to zero, as
 * GPU kernels compiled with -ftz=true (nvcc's --use_fast_math, Triton's
 * default) and CPU code under -ffast-math compute. log2(e) is folded into the
 * scale once, c = fl(scale * log2 e); t_j = (q . k_j) * c in f32 (dimension
 * order); m2 = max_j t_j; w_j = exp2f(t_j - m2); l = sum_j w_j; O_e = sum_j
 * w_j V_je / l; LSE = (m2 + log2f(l)) * ln 2. Each row runs with SSE's
 * flush-to-zero mode on (MXCSR.FTZ): every f32 result below 2^-126 (a score,
 * a weight, a product w V, a partial sum, O itself) becomes 0, where gradual
 * underflow would keep a subnormal. Inputs are not flushed (MXCSR.DAZ off).
 * Without SSE the same flush is applied by hand to each weight, product,
 * partial sum and output.
 *
 * Option mode=N:
 *   0  declares ATTNCHECK_FLUSH_INTERMEDIATES | ATTNCHECK_FLUSH_OUTPUTS (the default)
 *   1  declares nothing: an output or weight below 2^-126 lost to the flush
 *      lies outside gradual underflow's bound, and must fail
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc's exp2f and log2f), nb = 1, no backward. */
#include "panel.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#define FTZ_ON(saved) ((saved) = _mm_getcsr(), _mm_setcsr((saved) | 0x8000u))
#define FTZ_OFF(saved) _mm_setcsr(saved)
#define FLUSH(x) (x)
#else
#define FTZ_ON(saved) ((saved) = 0u)
#define FTZ_OFF(saved) ((void)(saved))
#define FLUSH(x) (fabsf(x) < 0x1p-126f ? 0.0f * (x) : (x))
#endif

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  unsigned saved;
  FTZ_ON(saved);
  float* t = (float*)r->work;
  const float c = (float)((double)r->scale * 1.4426950408889634);
  const int folded = isfinite(c);
  float m2 = -INFINITY;
  for (int64_t j = 0; j < r->n; ++j) {
    float dot = 0.0f;
    for (int64_t x = 0; x < r->d; ++x) dot = FLUSH(dot + FLUSH(r->q[x] * r->k[j * r->d + x]));
    t[j] = FLUSH(folded ? dot * c : dot * r->scale * 1.44269502f);
    if (t[j] > m2) m2 = t[j];
  }
  float l = 0.0f;
  for (int64_t j = 0; j < r->n; ++j) {
    t[j] = FLUSH(exp2f(t[j] - m2));
    l += t[j];
  }
  for (int64_t e = 0; e < r->dv; ++e) {
    float acc = 0.0f;
    for (int64_t j = 0; j < r->n; ++j) acc = FLUSH(acc + FLUSH(t[j] * r->v[j * r->dv + e]));
    o[e] = FLUSH(acc / l);
  }
  *lse = FLUSH((m2 + log2f(l)) * 0.693147182f); /* ln 2 in f32 */
  FTZ_OFF(saved);
}

static const attncheck_conventions flushed = {sizeof(attncheck_conventions), ATTNCHECK_EMPTY_O_ZERO,
                                              ATTNCHECK_EMPTY_LSE_MINUS_INF, ATTNCHECK_MASKED_SKIPPED,
                                              ATTNCHECK_FLUSH_INTERMEDIATES | ATTNCHECK_FLUSH_OUTPUTS};

/* Options: "mode=N" (0 <= N <= 1), or "" for mode 0. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len) {
  static const panel_option mode = {"mode", 0, 0, 1};
  panel_instance* self = panel_new("ftz", row, panel_score_row_bytes, &mode, 0, options, err, err_len);
  if (!self) return NULL;
  self->desc.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  if (self->size == 0) self->desc.conventions = &flushed;
  return &self->desc;
}
