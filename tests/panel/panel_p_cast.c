/* Panel kernel p_cast: FlashAttention 2's forward as a GPU kernel computes it,
 * with P rounded to a 16-bit format before P V and f32 everywhere else. Online
 * softmax over tiles of 64 key positions: per tile, scores s_j = (q . k_j) *
 * scale in f32 (dimension order), the tile's max; when it raises the running
 * max m, l and acc are rescaled by expf(m_old - m_new); then w_j = expf(s_j -
 * m) in f32, p_j = w_j rounded once to P's format, acc_e += p_j V_je in f32
 * (a bf16 or f16 product is exact in f32; an f32 V rounds it), and l sums w_j
 * (FlashAttention 2's row sum, before the cast) or p_j (after). O = acc / l,
 * LSE = m + logf(l).
 *
 * Option mode=N says which, and what it declares (a version 4 profile,
 * docs/abi.md "Stage-wise precision profile"; u = 2^-24, exp_ulps 1, nb =
 * ceil(Lk / 64)):
 *   0  P bf16, row sum before the cast; declared so (the default)
 *   1  P f16, row sum after the cast; declared so
 *   2  P rounded to 6 significand bits (u = 2^-6), declared bf16 (2^-8): a stage worse than declared
 *   3  P f16, row sum after the cast, declared before: LSE carries an undeclared rounding
 *   4  P bf16, row sum before; declares no profile but one u of bf16 (2^-8),
 *      today's honest one-u declaration: sound, and useless at long rows
 * Modes 2 and 3 are mutants a gate must fail; 0, 1 and 4 are correct. */
#include "panel.h"

#define P_CAST_TILE 64

typedef struct p_cast_format {
  int p, emin;
  double max_finite;
} p_cast_format;

static const p_cast_format bf16_p = {8, -126, 0x1.fep127}, f16_p = {11, -14, 65504.0}, six_bits_p = {6, -126, 0x1.f8p127};

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state, (void)lk, (void)d;
  return sizeof(float) * (size_t)(P_CAST_TILE + dv);
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  const int64_t mode = panel_self(state)->size;
  const p_cast_format* fmt = mode == 1 || mode == 3 ? &f16_p : mode == 2 ? &six_bits_p : &bf16_p;
  const int sum_after = mode == 1 || mode == 3;
  float* s = (float*)r->work;
  float* acc = s + P_CAST_TILE;
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  int seen = 0;
  for (int64_t j0 = 0; j0 < r->n;) {
    const int64_t j1 = panel_block_end(r, j0, P_CAST_TILE);
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
      const float p = (float)panel_round(w, fmt->p, fmt->emin, fmt->max_finite); /* exact in f32 */
      l += sum_after ? p : w;
      for (int64_t e = 0; e < r->dv; ++e) acc[e] += p * r->v[j * r->dv + e];
    }
    j0 = j1;
  }
  for (int64_t e = 0; e < r->dv; ++e) o[e] = acc[e] / l;
  *lse = m + logf(l);
}

static int64_t tiles(void* state, const attncheck_problem* p) {
  (void)state;
  return (p->lk + P_CAST_TILE - 1) / P_CAST_TILE;
}

/* The profile of each mode: P's format and where the row sum is taken; the rest inherits u. */
static const attncheck_profile profiles[4] = {
    {.struct_size = sizeof(attncheck_profile), .scale_mode = ATTNCHECK_SCALE_AFTER_DOT, .p_format = ATTNCHECK_P_BF16},
    {.struct_size = sizeof(attncheck_profile),
     .scale_mode = ATTNCHECK_SCALE_AFTER_DOT,
     .p_format = ATTNCHECK_P_F16,
     .row_sum = ATTNCHECK_ROW_SUM_AFTER_CAST},
    {.struct_size = sizeof(attncheck_profile), .scale_mode = ATTNCHECK_SCALE_AFTER_DOT, .p_format = ATTNCHECK_P_BF16},
    {.struct_size = sizeof(attncheck_profile), .scale_mode = ATTNCHECK_SCALE_AFTER_DOT, .p_format = ATTNCHECK_P_F16},
};

/* Options: "mode=N" (0 <= N <= 4), or "" for mode 0. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len) {
  static const panel_option mode = {"mode", 0, 0, 4};
  panel_instance* self = panel_new("p_cast", row, work_bytes, &mode, 0, options, err, err_len);
  if (!self) return NULL;
  self->desc.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  self->desc.key_blocks = tiles;
  self->desc.hints.k_tile = P_CAST_TILE;
  if (self->size == 4)
    self->desc.compute_unit_roundoff = 0x1p-8;
  else
    self->desc.profile = &profiles[self->size];
  return &self->desc;
}
