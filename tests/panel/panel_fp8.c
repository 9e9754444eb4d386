/* Panel kernel fp8: attention on fp8 inputs as FlashAttention 3's fp8
 * forward computes it (docs/spec.md "fp8 storage"), written from the spec
 * and subject.h alone. The stored values are decoded to f32 as they are
 * (every e4m3 and e5m2 value is exact in f32) and never multiplied by their
 * descales: the scores are s_j = (q . k_j) * c, the dot product of the raw
 * values in f32 in dimension order, with c = fl(fl(s_q s_k) * scale) the
 * descales folded into the scale; an online softmax over tiles of 64 key
 * positions in f32 (expf); and O = fl(fl(acc / l) * s_v): V's descale on the
 * output. LSE = m + logf(l). Inputs not in fp8 (f32, f16, bf16) are read
 * the same way, with a descale of 1.
 *
 * That is not the naive subject's arithmetic (each value times its descale
 * as it is read): it checks the bound's descale terms (docs/bound.md "fp8
 * storage") on the other common form. Declared: u = 2^-24, exp 1 ulp, nb =
 * ceil(Lk / 64), the scale applied after the dot product, fp8 inputs
 * (e4m3, e5m2) with tensor and head descales in the one-shot call. Its cache
 * takes no fp8. */
#include "panel.h"

#define FP8_TILE 64

static size_t work_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state, (void)lk, (void)d;
  return sizeof(float) * (size_t)(FP8_TILE + dv);
}

/* The descale of a group (1 without one). */
static float descale_of(const float* d, uint32_t granularity, int64_t group) {
  if (!d || granularity == ATTNCHECK_DESCALE_NONE) return 1.0f;
  return d[granularity == ATTNCHECK_DESCALE_TENSOR ? 0 : group];
}

/* One row on raw values: r->scale holds the folded c, *v_descale multiplies O. */
static void fp8_row(const panel_row* r, float v_descale, double* o, double* lse) {
  float* s = (float*)r->work;
  float* acc = s + FP8_TILE;
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  int seen = 0;
  for (int64_t j0 = 0; j0 < r->n;) {
    const int64_t j1 = panel_block_end(r, j0, FP8_TILE);
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
  for (int64_t e = 0; e < r->dv; ++e) o[e] = (acc[e] / l) * v_descale;
  *lse = m + logf(l);
}

static void unused_row(const void* state, const panel_row* r, double* o, double* lse) {
  (void)state;
  fp8_row(r, 1.0f, o, lse);
}

static int fp8_attend(void* state, const attncheck_problem* p, char* err, size_t err_len) {
  const panel_instance* self = panel_self(((const panel_kernel*)state)->state);
  const attncheck_quant* z = p->struct_size >= offsetof(attncheck_problem, quant) + sizeof p->quant ? p->quant : NULL;
  if (!z) return panel_attend(&self->kn, p, err, err_len); /* no fp8: the plain loop, descales of 1 */
  const attncheck_dtype qt = (attncheck_dtype)z->q_dtype, kt = (attncheck_dtype)z->k_dtype, vt = (attncheck_dtype)z->v_dtype;
  const attncheck_dtype ot = (attncheck_dtype)z->o_dtype;
  if (p->b < 1 || p->hq < 1 || p->hkv < 1 || p->lq < 1 || p->lk < 1 || p->d < 1 || p->dv < 1 || p->hq % p->hkv != 0)
    return panel_fail(err, err_len, self->name, "bad sizes");
  panel_buffers buf;
  if (panel_buffers_alloc(&self->kn, &buf, p->lk, p->d, p->dv)) return panel_fail(err, err_len, self->name, "out of memory");
  const int64_t group = p->hq / p->hkv;
  for (int64_t b = 0; b < p->b; ++b) {
    const int64_t valid = p->key_len ? p->key_len[b] : p->lk;
    for (int64_t h = 0; h < p->hq; ++h) {
      const int64_t g = h / group;
      const float qs = descale_of(z->q_descale, z->q_granularity, b * p->hq + h);
      const float ks = descale_of(z->k_descale, z->k_granularity, b * p->hkv + g);
      const float vs = descale_of(z->v_descale, z->v_granularity, b * p->hkv + g);
      const float folded = (qs * ks) * p->scale; /* two f32 roundings, as FlashAttention 3 folds them */
      for (int64_t i = 0; i < p->lq; ++i) {
        const int64_t qpos = valid - p->lq + i;
        int64_t n = 0;
        for (int64_t j = 0; j < valid; ++j) {
          if (p->causal && j > qpos) break;
          if (p->mask && !p->mask[b * p->mask_stride[0] + h * p->mask_stride[1] + i * p->mask_stride[2] + j * p->mask_stride[3]])
            continue;
          for (int64_t x = 0; x < p->d; ++x)
            buf.k[n * p->d + x] =
                panel_load(kt, p->k.data, b * p->k.stride[0] + j * p->k.stride[1] + g * p->k.stride[2] + x * p->k.stride[3]);
          for (int64_t e = 0; e < p->dv; ++e)
            buf.v[n * p->dv + e] =
                panel_load(vt, p->v.data, b * p->v.stride[0] + j * p->v.stride[1] + g * p->v.stride[2] + e * p->v.stride[3]);
          buf.pos[n++] = j;
        }
        double lse = -INFINITY;
        if (n == 0) {
          for (int64_t e = 0; e < p->dv; ++e) buf.o[e] = 0.0;
        } else {
          for (int64_t x = 0; x < p->d; ++x)
            buf.q[x] =
                panel_load(qt, p->q.data, b * p->q.stride[0] + i * p->q.stride[1] + h * p->q.stride[2] + x * p->q.stride[3]);
          const panel_row r = {n, p->d, p->dv, p->lk, folded, buf.q, buf.k, buf.v, buf.pos, buf.work};
          fp8_row(&r, vs, buf.o, &lse);
        }
        for (int64_t e = 0; e < p->dv; ++e)
          panel_store(ot, p->o, b * p->o_stride[0] + i * p->o_stride[1] + h * p->o_stride[2] + e * p->o_stride[3], buf.o[e]);
        if (p->lse) p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = (float)lse;
      }
    }
  }
  panel_buffers_free(&buf);
  return 0;
}

static int64_t tiles(void* state, const attncheck_problem* p) {
  (void)state;
  return (p->lk + FP8_TILE - 1) / FP8_TILE;
}

static const attncheck_profile profile = {.struct_size = sizeof(attncheck_profile), .scale_mode = ATTNCHECK_SCALE_AFTER_DOT};

PANEL_EXPORT attncheck_instance* attncheck_subject_v4(const char* options, char* err, size_t err_len) {
  panel_instance* self = panel_new("fp8", unused_row, work_bytes, NULL, FP8_TILE, options, err, err_len);
  if (!self) return NULL;
  self->desc.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  self->desc.dtypes |= (1u << ATTNCHECK_E4M3) | (1u << ATTNCHECK_E5M2);
  self->desc.features_v4 = ATTNCHECK_FEATURE4_FP8;
  self->desc.attend = fp8_attend;
  self->desc.key_blocks = tiles;
  self->desc.hints.k_tile = FP8_TILE;
  self->desc.profile = &profile;
  return &self->desc;
}
