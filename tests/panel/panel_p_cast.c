/* Panel kernel p_cast: FlashAttention 2's forward as a GPU kernel computes it,
 * its stages at different precisions. Online softmax over tiles of 64 key
 * positions: per tile, scores s_j = (q . k_j) * scale (dimension order), the
 * tile's max; when it raises the running max m, l and acc are rescaled by
 * expf(m_old - m_new); then w_j = expf(s_j - m) in f32, p_j = w_j rounded once
 * to P's format, acc_e += p_j V_je, and l sums w_j (FlashAttention 2's row
 * sum, before the cast) or p_j (after). O = acc / l, LSE = m + logf(l).
 * Everything is f32 but the stage a mode changes; an accumulator "at k bits"
 * is rounded to k significand bits after every addition, with f32's range.
 *
 * Option mode=N says which, and what it declares (a version 4 profile,
 * docs/abi.md "Stage-wise precision profile"; u = 2^-24, exp_ulps 1, nb =
 * ceil(Lk / 64), scale after the dot):
 *   0  P bf16, row sum before the cast; declared so (the default)
 *   1  P f16, row sum after the cast; declared so
 *   2  P rounded to 6 significand bits (u = 2^-6), declared bf16 (2^-8): a stage worse than declared
 *   3  P f16, row sum after the cast, declared before: LSE carries an undeclared rounding
 *   4  P bf16, row sum before; declares no profile but one u of bf16 (2^-8),
 *      the honest one-u declaration: sound, and useless at long rows
 *   5  P V accumulated at 11 bits (ggml's f16 accumulator, f32's range), declared pv_accum_u 2^-11
 *   6  the same accumulator, undeclared (P V at u)
 *   7  dot products accumulated at 14 bits (a tensor core's truncated fp8
 *      accumulation, as DeepSeek-V3 reported for H800), declared qk_accum_u 2^-14
 *   8  the same dot products, undeclared
 *   9  P e4m3 after multiplying by 2^7 (FlashAttention 3's fp8 P V keeps P
 *      scaled up so that small weights stay above e4m3's 2^-9), row sum
 *      before the cast; declared so
 *  10  P e5m2 with no factor, row sum after the cast; declared so
 *  11  P e4m3 without the factor it declares (2^7): weights below 2^-10 round
 *      to 0 and long, peaked rows lose their mass (ROCm FlyDSL #1020's class)
 *  12  P e4m3 times 2^7, row sum after the cast, declared before
 * Modes 2, 3, 6, 8, 11 and 12 break their declarations and must fail; 0, 1, 4,
 * 5, 7, 9 and 10 are correct. With a factor 2^f, l sums w 2^f (exact) or the
 * scaled P, so O = acc / l; LSE = m + log(l 2^-f), the scaling exact. */
#include "panel.h"

#define P_CAST_TILE 64

typedef struct p_cast_format {
  int p, emin;
  double max_finite;
} p_cast_format;

static const p_cast_format bf16_p = {8, -126, 0x1.fep127}, f16_p = {11, -14, 65504.0}, six_bits_p = {6, -126, 0x1.f8p127},
                           bits11 = {11, -126, 0x1.ffcp127}, bits14 = {14, -126, 0x1.fffcp127}, e4m3_p = {4, -6, 448.0},
                           e5m2_p = {3, -14, 57344.0};

/* A mode's arithmetic: P's format (NULL: P kept in f32), the row sum after the
 * cast, the P V and dot-product accumulators' precisions (NULL: f32), and the
 * power of two P is multiplied by before its rounding. */
typedef struct p_cast_mode {
  const p_cast_format *p, *pv_acc, *dot_acc;
  int sum_after, factor_log2;
} p_cast_mode;

#define P_CAST_MODES 13
static const p_cast_mode modes[P_CAST_MODES] = {
    {&bf16_p, NULL, NULL, 0, 0}, {&f16_p, NULL, NULL, 1, 0},  {&six_bits_p, NULL, NULL, 0, 0}, {&f16_p, NULL, NULL, 1, 0},
    {&bf16_p, NULL, NULL, 0, 0}, {NULL, &bits11, NULL, 0, 0}, {NULL, &bits11, NULL, 0, 0},     {NULL, NULL, &bits14, 0, 0},
    {NULL, NULL, &bits14, 0, 0}, {&e4m3_p, NULL, NULL, 0, 7}, {&e5m2_p, NULL, NULL, 1, 0},     {&e4m3_p, NULL, NULL, 0, 0},
    {&e4m3_p, NULL, NULL, 1, 7},
};

static float at_bits(const p_cast_format* f, float x) { return f ? (float)panel_round(x, f->p, f->emin, f->max_finite) : x; }

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state, (void)lk, (void)d;
  return sizeof(float) * (size_t)(P_CAST_TILE + dv);
}

static void row(const void* state, const panel_row* r, double* o, double* lse) {
  const p_cast_mode* mode = &modes[panel_self(state)->size];
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
      for (int64_t x = 0; x < r->d; ++x) dot = at_bits(mode->dot_acc, dot + r->q[x] * r->k[j * r->d + x]);
      s[j - j0] = dot * r->scale;
      if (s[j - j0] > bm) bm = s[j - j0];
    }
    if (!seen) {
      m = bm;
      seen = 1;
    } else if (bm > m) {
      const float alpha = expf(m - bm);
      l *= alpha;
      for (int64_t e = 0; e < r->dv; ++e) acc[e] = at_bits(mode->pv_acc, acc[e] * alpha);
      m = bm;
    }
    for (int64_t j = j0; j < j1; ++j) {
      const float w = ldexpf(expf(s[j - j0] - m), mode->factor_log2); /* exact scaling */
      const float p = at_bits(mode->p, w);                            /* exact in f32 */
      l += mode->sum_after ? p : w;
      for (int64_t e = 0; e < r->dv; ++e) acc[e] = at_bits(mode->pv_acc, acc[e] + p * r->v[j * r->dv + e]);
    }
    j0 = j1;
  }
  for (int64_t e = 0; e < r->dv; ++e) o[e] = acc[e] / l;
  *lse = m + logf(ldexpf(l, -mode->factor_log2));
}

static int64_t tiles(void* state, const attncheck_problem* p) {
  (void)state;
  return (p->lk + P_CAST_TILE - 1) / P_CAST_TILE;
}

/* The profile each mode declares (mode 4 declares none); the rest inherits u. */
#define P_CAST_PROFILE(...) \
  { .struct_size = sizeof(attncheck_profile), .scale_mode = ATTNCHECK_SCALE_AFTER_DOT, __VA_ARGS__ }
static const attncheck_profile profiles[P_CAST_MODES] = {
    P_CAST_PROFILE(.p_format = ATTNCHECK_P_BF16),
    P_CAST_PROFILE(.p_format = ATTNCHECK_P_F16, .row_sum = ATTNCHECK_ROW_SUM_AFTER_CAST),
    P_CAST_PROFILE(.p_format = ATTNCHECK_P_BF16),
    P_CAST_PROFILE(.p_format = ATTNCHECK_P_F16),
    P_CAST_PROFILE(.p_format = ATTNCHECK_P_BF16),
    P_CAST_PROFILE(.pv_accum_u = 0x1p-11),
    P_CAST_PROFILE(.p_format = ATTNCHECK_P_COMPUTE),
    P_CAST_PROFILE(.qk_accum_u = 0x1p-14),
    P_CAST_PROFILE(.p_format = ATTNCHECK_P_COMPUTE),
    P_CAST_PROFILE(.p_format = ATTNCHECK_P_E4M3, .p_factor = ATTNCHECK_P_FACTOR_POW2, .p_factor_log2 = 7),
    P_CAST_PROFILE(.p_format = ATTNCHECK_P_E5M2, .row_sum = ATTNCHECK_ROW_SUM_AFTER_CAST),
    P_CAST_PROFILE(.p_format = ATTNCHECK_P_E4M3, .p_factor = ATTNCHECK_P_FACTOR_POW2, .p_factor_log2 = 7),
    P_CAST_PROFILE(.p_format = ATTNCHECK_P_E4M3, .p_factor = ATTNCHECK_P_FACTOR_POW2, .p_factor_log2 = 7),
};

/* Options: "mode=N" (0 <= N <= 12), or "" for mode 0. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len) {
  static const panel_option mode = {"mode", 0, 0, P_CAST_MODES - 1};
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
