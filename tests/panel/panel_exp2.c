/* Panel kernel exp2: FlashAttention's base-2 softmax. log2(e) is folded into
 * the scale once, c = fl(scale * log2 e); scores t_j = (q . k_j) * c in f32,
 * the dot product summed as 8 lanes then a tree (as an 8-wide SIMD register
 * would); online softmax over 128-key tiles in base 2: w_j = exp2f(t_j - m2),
 * rescales by exp2f(m2_old - m2_new); O = acc / l, LSE = (m2 + log2f(l)) * ln 2.
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc exp2f and log2f: below 1 ulp), nb = ceil(Lk / 128), size hint
 * k_tile = 128. The folded scale is the one extra rounding the bound's
 * gamma_(D+2) leaves room for (docs/bound.md, step 1). */
#include "panel.h"

#define TILE 128
#define LANES 8

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state, (void)lk, (void)d;
  return sizeof(float) * (size_t)(TILE + dv);
}

static float dot_lanes(const float* q, const float* k, int64_t d) {
  float lane[LANES] = {0};
  for (int64_t x = 0; x < d; ++x) lane[x % LANES] += q[x] * k[x];
  for (int width = LANES / 2; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) lane[i] += lane[i + width];
  return lane[0];
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  float* t = (float*)r->work;
  float* acc = t + TILE;
  /* scale * log2(e) in f32; a scale so large that it overflows is applied
   * first and log2(e) after (still one extra rounding). */
  const float c = (float)((double)r->scale * 1.4426950408889634);
  const int folded = isfinite(c);
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0f;
  float m2 = -INFINITY, l = 0.0f;
  for (int64_t j0 = 0; j0 < r->n;) {
    const int64_t j1 = panel_block_end(r, j0, TILE);
    float bm = -INFINITY;
    for (int64_t j = j0; j < j1; ++j) {
      const float dot = dot_lanes(r->q, r->k + j * r->d, r->d);
      t[j - j0] = folded ? dot * c : dot * r->scale * 1.44269502f;
      if (t[j - j0] > bm) bm = t[j - j0];
    }
    if (j0 == 0) {
      m2 = bm;
    } else if (bm > m2) {
      const float alpha = exp2f(m2 - bm);
      l *= alpha;
      for (int64_t e = 0; e < r->dv; ++e) acc[e] *= alpha;
      m2 = bm;
    }
    for (int64_t j = j0; j < j1; ++j) {
      const float w = exp2f(t[j - j0] - m2);
      l += w;
      for (int64_t e = 0; e < r->dv; ++e) acc[e] += w * r->v[j * r->dv + e];
    }
    j0 = j1;
  }
  for (int64_t e = 0; e < r->dv; ++e) o[e] = acc[e] / l;
  *lse = (m2 + log2f(l)) * 0.693147182f; /* ln 2 in f32 */
}

/* No options. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len) {
  panel_instance* self = panel_new("exp2", row, work_bytes, NULL, TILE, options, err, err_len);
  if (!self) return NULL;
  self->desc.hints.k_tile = TILE;
  self->desc.key_blocks = panel_tiles;
  return &self->desc;
}
