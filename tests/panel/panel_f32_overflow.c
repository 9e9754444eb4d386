/* Panel kernel f32_overflow: FlashAttention-2's arithmetic on the CPU. The raw
 * product q . k is computed in f32 (four interleaved partial sums, as a SIMD
 * lane would) and multiplied by the scale with no rescue, so for |q|, |k| near
 * 1e25 it overflows to +-inf, which the contract allows (the bound is +inf
 * there). Online softmax over 16-key tiles with FlashAttention's guards: a
 * running max of -inf is replaced by 0 before any exp (so a row whose every
 * score is -inf has all weights 0), and a row whose sum is 0 or NaN is
 * divided by 1: O = 0 for a row of -inf scores, LSE = -inf.
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc expf and logf: below 1 ulp), nb = ceil(Lk / 16). */
#include "panel.h"

#define TILE 16

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state, (void)lk, (void)d;
  return sizeof(float) * (size_t)(TILE + dv);
}

static float dot4(const float* q, const float* k, int64_t d) {
  float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t x = 0; x < d; ++x) part[x & 3] += q[x] * k[x];
  return (part[0] + part[1]) + (part[2] + part[3]);
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  float* s = (float*)r->work;
  float* acc = s + TILE;
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int64_t j0 = 0; j0 < r->n;) {
    /* The visible keys of one 16-position tile. */
    const int64_t j1 = panel_block_end(r, j0, TILE);
    float m_new = m;
    for (int64_t j = j0; j < j1; ++j) {
      s[j - j0] = dot4(r->q, r->k + j * r->d, r->d) * r->scale;
      m_new = fmaxf(m_new, s[j - j0]);
    }
    const float m_use = m_new == -INFINITY ? 0.0f : m_new; /* FlashAttention's Check_inf */
    const float alpha = expf(m - m_use);
    l *= alpha;
    for (int64_t e = 0; e < r->dv; ++e) acc[e] *= alpha;
    for (int64_t j = j0; j < j1; ++j) {
      const float w = expf(s[j - j0] - m_use);
      l += w;
      for (int64_t e = 0; e < r->dv; ++e) acc[e] += w * r->v[j * r->dv + e];
    }
    m = m_new;
    j0 = j1;
  }
  const int empty = l == 0.0f || l != l;
  const float inv = empty ? 1.0f : 1.0f / l;
  for (int64_t e = 0; e < r->dv; ++e) o[e] = acc[e] * inv;
  *lse = empty ? -INFINITY : m + logf(l);
}

/* No options. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len) {
  panel_instance* self = panel_new("f32_overflow", row, work_bytes, NULL, TILE, options, err, err_len);
  if (!self) return NULL;
  self->desc.hints.k_tile = TILE;
  self->desc.key_blocks = panel_tiles;
  return &self->desc;
}
