/* Panel kernel ftz: a base-2 softmax run with subnormals flushed to zero, as
 * GPU kernels compiled with -ftz=true (nvcc's --use_fast_math, Triton's
 * default) and CPU code under -ffast-math compute. log2(e) is folded into the
 * scale once, c = fl(scale * log2 e); t_j = (q . k_j) * c in f32 (dimension
 * order); m2 = max_j t_j; w_j = exp2f(t_j - m2); l = sum_j w_j; O_e = sum_j
 * w_j V_je / l; LSE = (m2 + log2f(l)) * ln 2. Each row runs with SSE's
 * flush-to-zero mode on (MXCSR.FTZ): every f32 result below 2^-126 (a score,
 * a weight, a product w V, a partial sum, O itself) becomes 0, where gradual
 * underflow would keep a subnormal. Modes 0 and 1 read their inputs as they
 * are (MXCSR.DAZ off); modes 2 and 3 also read every input below 2^-126 as 0
 * (MXCSR.DAZ on: x86's denormals-are-zero, a GPU's ftz on the f32 values it
 * loads; an f16 input is normal in f32 and never flushed). Without SSE the
 * same flushes are applied by hand to each input, weight, product, partial
 * sum and output.
 *
 * Option mode=N:
 *   0  declares ATTNCHECK_FLUSH_INTERMEDIATES | ATTNCHECK_FLUSH_OUTPUTS (the default)
 *   1  declares nothing: an output or weight below 2^-126 lost to the flush
 *      lies outside gradual underflow's bound, and must fail
 *   2  flushes its inputs too, and declares all three stages
 *   3  flushes its inputs too, but declares mode 0's stages only: a subnormal
 *      input read as 0 moves O past the bound, and must fail
 *   4  reads its inputs as they are (mode 0), but declares all three stages:
 *      the oracle reads a subnormal Q as 0, and the kernel must fail
 * Modes 2 to 4 also declare how the scale is applied (the profile's
 * ATTNCHECK_SCALE_LOG2E_FOLDED, as the code does): with any scale mode, a
 * flushed scale * q for a subnormal q, times a large k, would be allowed, and
 * the bound of Q subnormal against K large would hold nothing.
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc's exp2f and log2f), nb = 1, no backward. */
#include "panel.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#define FTZ_ON(saved, daz) ((saved) = _mm_getcsr(), _mm_setcsr((saved) | 0x8000u | ((daz) ? 0x0040u : 0u)))
#define FTZ_OFF(saved) _mm_setcsr(saved)
#define FLUSH(x) (x)
#define INPUT(x, daz) (x)
#else
#define FTZ_ON(saved, daz) ((saved) = 0u, (void)(daz))
#define FTZ_OFF(saved) ((void)(saved))
#define FLUSH(x) (fabsf(x) < 0x1p-126f ? 0.0f * (x) : (x))
#define INPUT(x, daz) ((daz) ? FLUSH(x) : (x))
#endif

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  const int64_t mode = ((const panel_instance*)state)->size;
  const int daz = mode == 2 || mode == 3;
  unsigned saved;
  FTZ_ON(saved, daz);
  float* t = (float*)r->work;
  const float c = (float)((double)r->scale * 1.4426950408889634);
  const int folded = isfinite(c);
  float m2 = -INFINITY;
  for (int64_t j = 0; j < r->n; ++j) {
    float dot = 0.0f;
    for (int64_t x = 0; x < r->d; ++x) dot = FLUSH(dot + FLUSH(INPUT(r->q[x], daz) * INPUT(r->k[j * r->d + x], daz)));
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
    for (int64_t j = 0; j < r->n; ++j) acc = FLUSH(acc + FLUSH(t[j] * INPUT(r->v[j * r->dv + e], daz)));
    o[e] = FLUSH(acc / l);
  }
  *lse = FLUSH((m2 + log2f(l)) * 0.693147182f); /* ln 2 in f32 */
  FTZ_OFF(saved);
}

static const attncheck_conventions flushed = {.struct_size = sizeof(attncheck_conventions),
                                              .flush = ATTNCHECK_FLUSH_INTERMEDIATES | ATTNCHECK_FLUSH_OUTPUTS};
static const attncheck_conventions all_flushed = {
    .struct_size = sizeof(attncheck_conventions),
    .flush = ATTNCHECK_FLUSH_INPUTS | ATTNCHECK_FLUSH_INTERMEDIATES | ATTNCHECK_FLUSH_OUTPUTS};

static const attncheck_profile scale_after_dot = {.struct_size = sizeof(attncheck_profile),
                                                  .scale_mode = ATTNCHECK_SCALE_LOG2E_FOLDED};

/* Options: "mode=N" (0 <= N <= 4), or "" for mode 0. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len) {
  static const panel_option mode = {"mode", 0, 0, 4};
  panel_instance* self = panel_new("ftz", row, panel_score_row_bytes, &mode, 0, options, err, err_len);
  if (!self) return NULL;
  self->desc.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  if (self->size == 0 || self->size == 3) self->desc.conventions = &flushed;
  if (self->size == 2 || self->size == 4) self->desc.conventions = &all_flushed;
  if (self->size >= 2) self->desc.profile = &scale_after_dot;
  return &self->desc;
}
