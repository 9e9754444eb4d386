/* Panel kernel masked_zero: masked and padded keys read and weighted by zero,
 * as ggml's CPU flash attention and PyTorch's math path do. Each query row
 * takes every key slot of the problem, 0 to lk - 1, whatever the mask, the
 * causal limit or key_len say: s_j = (q . k_j) * scale in f32 (dimension
 * order), plus an additive mask of 0 or -inf; m = max_j s_j; w_j =
 * expf(s_j - m), 0 for a masked key; l = sum_j w_j and O_e = sum_j w_j V_je / l
 * over every slot in key order, so a masked slot's V is multiplied by 0; LSE =
 * m + logf(l). A row whose slots are all masked gets O = 0 and LSE = -inf
 * (the contract's). A NaN in a masked slot reaches O (0 * NaN), so the
 * kernel is correct only over finite masked slots: it declares
 * ATTNCHECK_MASKED_WEIGHTED_BY_ZERO (docs/abi.md "Conventions").
 *
 * Option mode=N:
 *   0  as above, declared (the default)
 *   1  as above, not declared: NaN in a masked slot reaches O, and must fail
 *   2  declared, but the row maximum is taken before the mask, over every
 *      slot: the masked slots' scores move every weight's rounding (and can
 *      underflow the row), so their content matters, and must fail
 *
 * Declares f32, f16 and bf16 storage (f32 compute: u = 2^-24), exp_ulps 1,
 * nb = 1, causal, padding, mask and LSE; no cache. */
#include "panel.h"

typedef struct masked_zero {
  attncheck_instance desc;
  int mode;
} masked_zero;

static const attncheck_conventions weighted_by_zero = {sizeof(attncheck_conventions), ATTNCHECK_EMPTY_O_ZERO,
                                                       ATTNCHECK_EMPTY_LSE_MINUS_INF, ATTNCHECK_MASKED_WEIGHTED_BY_ZERO, 0};

static int visible(const attncheck_problem* p, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t valid = p->key_len ? p->key_len[b] : p->lk;
  if (j >= valid) return 0;
  if (p->causal && j > valid - p->lq + i) return 0;
  return !p->mask || p->mask[b * p->mask_stride[0] + h * p->mask_stride[1] + i * p->mask_stride[2] + j * p->mask_stride[3]];
}

static int attend(void* state, const attncheck_problem* p, char* err, size_t err_len) {
  const masked_zero* self = (const masked_zero*)state;
  if (!(self->desc.dtypes & (1u << p->dtype))) return panel_fail(err, err_len, "masked_zero", "storage type not declared");
  if (p->b < 1 || p->hq < 1 || p->hkv < 1 || p->lq < 1 || p->lk < 1 || p->d < 1 || p->dv < 1 || p->hq % p->hkv != 0)
    return panel_fail(err, err_len, "masked_zero", "b, hq, hkv, lq, lk, d, dv >= 1 and hq a multiple of hkv");
  float* s = (float*)malloc(sizeof(float) * (size_t)p->lk);
  float* q = (float*)malloc(sizeof(float) * (size_t)p->d);
  float* acc = (float*)malloc(sizeof(float) * (size_t)p->dv);
  if (!s || !q || !acc) {
    free(s), free(q), free(acc);
    return panel_fail(err, err_len, "masked_zero", "out of memory");
  }
  const int64_t group = p->hq / p->hkv;
  for (int64_t b = 0; b < p->b; ++b)
    for (int64_t h = 0; h < p->hq; ++h)
      for (int64_t i = 0; i < p->lq; ++i) {
        const int64_t g = h / group;
        for (int64_t x = 0; x < p->d; ++x)
          q[x] =
              panel_load(p->dtype, p->q.data, b * p->q.stride[0] + i * p->q.stride[1] + h * p->q.stride[2] + x * p->q.stride[3]);
        float m = -INFINITY, m_all = -INFINITY;
        int any = 0;
        for (int64_t j = 0; j < p->lk; ++j) {
          float dot = 0.0f;
          for (int64_t x = 0; x < p->d; ++x)
            dot += q[x] * panel_load(p->dtype, p->k.data,
                                     b * p->k.stride[0] + j * p->k.stride[1] + g * p->k.stride[2] + x * p->k.stride[3]);
          const float raw = dot * p->scale;
          const int seen = visible(p, b, h, i, j);
          any |= seen;
          s[j] = raw + (seen ? 0.0f : -INFINITY);
          if (s[j] > m) m = s[j];
          if (raw > m_all) m_all = raw;
        }
        float l = 0.0f;
        for (int64_t e = 0; e < p->dv; ++e) acc[e] = 0.0f;
        if (any) {
          const float shift = self->mode == 2 ? m_all : m;
          for (int64_t j = 0; j < p->lk; ++j) {
            const float w = expf(s[j] - shift);
            l += w;
            for (int64_t e = 0; e < p->dv; ++e)
              acc[e] += w * panel_load(p->dtype, p->v.data,
                                       b * p->v.stride[0] + j * p->v.stride[1] + g * p->v.stride[2] + e * p->v.stride[3]);
          }
          m = shift;
        }
        for (int64_t e = 0; e < p->dv; ++e)
          panel_store(p->dtype, p->o, b * p->o_stride[0] + i * p->o_stride[1] + h * p->o_stride[2] + e * p->o_stride[3],
                      any ? (double)(acc[e] / l) : 0.0);
        if (p->lse) p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = any ? m + logf(l) : -INFINITY;
      }
  free(s), free(q), free(acc);
  return 0;
}

static void destroy(attncheck_instance* self) { free(self); }

/* Options: "mode=N" (0 <= N <= 2), or "" for mode 0. */
PANEL_EXPORT attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len) {
  int64_t mode = 0;
  if (panel_int_option(options, "mode", 0, 2, &mode, err, err_len)) return NULL;
  masked_zero* self = (masked_zero*)calloc(1, sizeof *self);
  if (!self) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  self->mode = (int)mode;
  attncheck_instance* d = &self->desc;
  d->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  d->struct_size = sizeof *d;
  d->name = mode == 0 ? "panel masked_zero" : mode == 1 ? "panel masked_zero mode=1" : "panel masked_zero mode=2";
  d->dtypes = PANEL_ALL_DTYPES;
  d->features = ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_LSE;
  d->invariances = ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_BATCH | ATTNCHECK_CLAIM_LAYOUT;
  d->compute_unit_roundoff = 0x1p-24;
  d->exp_ulps = 1.0;
  d->state = self;
  d->attend = attend;
  d->destroy = destroy;
  if (mode != 1) d->conventions = &weighted_by_zero;
  return d;
}
