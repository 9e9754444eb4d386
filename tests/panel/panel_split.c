/* Panel kernel split: split-KV (FlashDecoding) with an LSE merge. The key
 * positions are cut into chunks (chunk=N, default 32); each chunk that holds
 * visible keys runs a two-pass softmax on its own in f32 (scores (q . k_j) *
 * scale with the dot product in dimension order, m_c, w_j = expf(s_j - m_c),
 * l_c, acc_c) and returns its normalized output O_c = acc_c / l_c and its
 * lse_c = m_c + logf(l_c), as a split kernel writes its partial results. The
 * merge (FlashInfer's merge_state): M = max_c lse_c, a_c = expf(lse_c - M),
 * O = sum_c a_c O_c / sum_c a_c, LSE = M + logf(sum_c a_c).
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1
 * (glibc expf and logf: below 1 ulp), nb = 2 ceil(Lk / chunk) - 1 (one block
 * per chunk plus its merges, as docs/spec.md counts them), size hint
 * split_keys = chunk. */
#include "panel.h"

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  const panel_instance* self = panel_self(state);
  (void)d;
  const int64_t chunks = (lk + self->size - 1) / self->size;
  return sizeof(float) * (size_t)(self->size + dv + chunks * (dv + 1)); /* scores, acc, then (lse_c, O_c) per chunk */
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  const panel_instance* self = panel_self(state);
  float* s = (float*)r->work;
  float* acc = s + self->size;
  float* part = acc + r->dv; /* per chunk: lse_c, then O_c */
  int64_t parts = 0;
  for (int64_t j0 = 0; j0 < r->n;) {
    const int64_t j1 = panel_block_end(r, j0, self->size);
    float m = -INFINITY;
    for (int64_t j = j0; j < j1; ++j) {
      float dot = 0.0f;
      for (int64_t x = 0; x < r->d; ++x) dot += r->q[x] * r->k[j * r->d + x];
      s[j - j0] = dot * r->scale;
      if (s[j - j0] > m) m = s[j - j0];
    }
    float l = 0.0f;
    for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0f;
    for (int64_t j = j0; j < j1; ++j) {
      const float w = expf(s[j - j0] - m);
      l += w;
      for (int64_t e = 0; e < r->dv; ++e) acc[e] += w * r->v[j * r->dv + e];
    }
    float* out = part + parts * (r->dv + 1);
    out[0] = m + logf(l);
    for (int64_t e = 0; e < r->dv; ++e) out[1 + e] = acc[e] / l;
    ++parts;
    j0 = j1;
  }
  float big = -INFINITY;
  for (int64_t c = 0; c < parts; ++c)
    if (part[c * (r->dv + 1)] > big) big = part[c * (r->dv + 1)];
  if (big == -INFINITY) big = part[0]; /* every lse_c NaN: let it through */
  float a_sum = 0.0f;
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0f;
  for (int64_t c = 0; c < parts; ++c) {
    const float* in = part + c * (r->dv + 1);
    const float a = expf(in[0] - big);
    a_sum += a;
    for (int64_t e = 0; e < r->dv; ++e) acc[e] += a * in[1 + e];
  }
  for (int64_t e = 0; e < r->dv; ++e) o[e] = acc[e] / a_sum;
  *lse = big + logf(a_sum);
}

static int64_t key_blocks(void* state, const attncheck_problem* p) {
  const panel_instance* self = panel_self(((const panel_kernel*)state)->state);
  return 2 * ((p->lk + self->size - 1) / self->size) - 1;
}

/* Options: "chunk=N" (1 <= N <= 65536), or "" for the default 32. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v2(const char* options, char* err, size_t err_len) {
  static const panel_option chunk = {"chunk", 32, 1, 65536};
  panel_instance* self = panel_new("split", row, work_bytes, &chunk, 0, options, err, err_len);
  if (!self) return NULL;
  self->desc.hints.split_keys = self->size;
  self->desc.key_blocks = key_blocks;
  return &self->desc;
}
