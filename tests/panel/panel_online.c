/* Panel kernel online: one-pass online softmax over tiles of key positions,
 * the tile an option (tile=N, default 64; the panel gates 1, 7, 64 and 256).
 * Per tile: scores s_j = (q . k_j) * scale in f32 (dot product in dimension
 * order), the tile's max; when it raises the running max m, the running sum
 * l and accumulator acc are rescaled by expf(m_old - m_new) (skipped while
 * nothing was seen); then w_j = expf(s_j - m), l += w_j, acc += w_j V_j.
 * O = acc / l, LSE = m + logf(l). Tiles the row's visibility empties are
 * skipped.
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc expf and logf: below 1 ulp), nb = ceil(Lk / tile) (one rescale per
 * tile), size hint k_tile = tile. */
#include "panel.h"

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  const panel_instance* self = panel_self(state);
  (void)lk, (void)d;
  return sizeof(float) * (size_t)(self->size + dv);
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  const panel_instance* self = panel_self(state);
  float* s = (float*)r->work;
  float* acc = s + self->size;
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  int seen = 0;
  for (int64_t j0 = 0; j0 < r->n;) {
    const int64_t tile = r->pos[j0] / self->size;
    int64_t j1 = j0;
    while (j1 < r->n && r->pos[j1] / self->size == tile) ++j1;
    float bm = -INFINITY;
    for (int64_t j = j0; j < j1; ++j) {
      float dot = 0.0f;
      for (int64_t x = 0; x < r->d; ++x) dot += r->q[x] * r->k[j * r->d + x];
      s[j - j0] = dot * r->scale;
      if (s[j - j0] > bm) bm = s[j - j0];
    }
    if (!seen) {
      m = bm;
      seen = 1;
    } else if (bm > m) {
      const float alpha = expf(m - bm);
      l *= alpha;
      for (int64_t e = 0; e < r->dv; ++e) acc[e] *= alpha;
      m = bm;
    }
    for (int64_t j = j0; j < j1; ++j) {
      const float w = expf(s[j - j0] - m);
      l += w;
      for (int64_t e = 0; e < r->dv; ++e) acc[e] += w * r->v[j * r->dv + e];
    }
    j0 = j1;
  }
  for (int64_t e = 0; e < r->dv; ++e) o[e] = acc[e] / l;
  *lse = m + logf(l);
}

/* Options: "tile=N" (1 <= N <= 65536), or "" for the default 64. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len) {
  static const panel_option tile = {"tile", 64, 1, 65536};
  panel_instance* self = panel_new("online", row, work_bytes, &tile, 0, options, err, err_len);
  if (!self) return NULL;
  self->desc.hints.k_tile = self->size;
  self->desc.key_blocks = panel_tiles;
  return &self->desc;
}
