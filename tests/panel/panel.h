/* The plumbing every panel kernel shares: storage decoding and encoding,
 * visibility (docs/spec.md, "Visibility"), and a contiguous KV cache. Each
 * kernel supplies only its row arithmetic: one query row against the keys that
 * row may see, gathered in key order, decoded to f32.
 *
 * Written from docs/spec.md and properties/abi/include/attncheck/subject.h alone,
 * independent of impl/ and of properties/subjects/. A kernel's row function is
 * called only for rows with at least one visible key; rows that see none get
 * O = 0 and LSE = -inf here, as the contract says, or the kernel's own
 * convention (panel_kernel.empty). */
#ifndef ATTNCHECK_PANEL_H
#define ATTNCHECK_PANEL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attncheck/subject.h"

#define PANEL_EXPORT __attribute__((visibility("default")))

/* One query row, as a row function sees it. */
typedef struct panel_row {
  int64_t n;          /* visible keys, >= 1 */
  int64_t d, dv;      /* head sizes, >= 1 */
  int64_t lk;         /* key slots of the problem (the capacity for a cache) */
  float scale;        /* the problem's scale, as given */
  const float* q;     /* d values */
  const float* k;     /* n x d: the visible keys, in increasing position */
  const float* v;     /* n x dv */
  const int64_t* pos; /* n key positions, increasing, in [0, lk) */
  void* work;         /* the kernel's scratch: work_bytes(lk, d, dv) bytes, 16-aligned */
} panel_row;

/* The end of the run of r's visible keys from j0 on that share key j0's block
 * of `size` positions (the keys a tiled kernel takes together). */
static inline int64_t panel_block_end(const panel_row* r, int64_t j0, int64_t size) {
  int64_t j1 = j0;
  while (j1 < r->n && r->pos[j1] / size == r->pos[j0] / size) ++j1;
  return j1;
}

/* A kernel: its row arithmetic and what it takes. */
typedef struct panel_kernel {
  const char* name;
  uint32_t dtypes; /* bit (1u << dtype) for each storage type taken */
  /* Writes O (dv values, rounded once to the storage type by the caller) and LSE. */
  void (*row)(const void* state, const panel_row* r, double* o, double* lse);
  /* Bytes of scratch one row needs. */
  size_t (*work_bytes)(const void* state, int64_t lk, int64_t d, int64_t dv);
  const void* state;
  /* NULL: a row that sees no key gets the contract's O = 0 and LSE = -inf;
   * else O = empty[0] and LSE = empty[1] (a kernel's own convention). */
  const double* empty;
} panel_kernel;

/* One-pass online softmax over tiles of `tile` key positions (panel_online's
 * arithmetic, and panel_fp8's): per tile, s_j = (q . k_j) * scale in f32 in
 * dimension order, the tile's max; when it raises the running max m, l and
 * acc are rescaled by expf(m_old - m_new); then w_j = expf(s_j - m), l += w_j,
 * acc += w_j V_j. O = acc / l, LSE = m + logf(l). work: tile + dv floats. */
static inline void panel_online_row(const panel_row* r, int64_t tile, double* o, double* lse) {
  float* s = (float*)r->work;
  float* acc = s + tile;
  for (int64_t e = 0; e < r->dv; ++e) acc[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  int seen = 0;
  for (int64_t j0 = 0; j0 < r->n;) {
    const int64_t j1 = panel_block_end(r, j0, tile);
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

/* Scratch of lk floats: a materialized score row (the work_bytes of the kernels that keep one). */
static inline size_t panel_score_row_bytes(const void* state, int64_t lk, int64_t d, int64_t dv) {
  (void)state, (void)d, (void)dv;
  return sizeof(float) * (size_t)lk;
}

/* The textbook scores s_j = (q . k_j) * scale in f32, dimension order, into w;
 * returns max(m, max_j s_j). A NaN score never becomes the max: it makes its
 * weight NaN later. */
static inline float panel_scores(const panel_row* r, float* w, float m) {
  for (int64_t j = 0; j < r->n; ++j) {
    float dot = 0.0f;
    for (int64_t x = 0; x < r->d; ++x) dot += r->q[x] * r->k[j * r->d + x];
    w[j] = dot * r->scale;
    if (w[j] > m) m = w[j];
  }
  return m;
}

/* The textbook softmax's second half over a row's n scores w (max m), in f32
 * and key order: w_j = expf(w_j - m), l = sum_j w_j, O_e = sum_j w_j V_je / l,
 * LSE = m + logf(l). */
static inline void panel_softmax_tail(const panel_row* r, float* w, float m, double* o, double* lse) {
  float l = 0.0f;
  for (int64_t j = 0; j < r->n; ++j) {
    w[j] = expf(w[j] - m);
    l += w[j];
  }
  for (int64_t e = 0; e < r->dv; ++e) {
    float acc = 0.0f;
    for (int64_t j = 0; j < r->n; ++j) acc += w[j] * r->v[j * r->dv + e];
    o[e] = acc / l;
  }
  *lse = m + logf(l);
}

/* ---- Storage types --------------------------------------------------------- */

/* Decodes a binary16 bit pattern exactly. */
static inline float panel_f16_value(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  if (e == 0x1f) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * ldexpf((float)m, -24);
  return sign * ldexpf((float)(m | 0x400), e - 25);
}

static inline float panel_bf16_value(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Decodes an fp8 byte exactly (OCP E4M3FN: bias 7, no infinity, S.1111.111
 * its NaN; E5M2: bias 15, IEEE-like). */
static inline float panel_fp8_value(attncheck_dtype t, uint8_t x) {
  const int e4m3 = t == ATTNCHECK_E4M3, mant = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, top = e4m3 ? 15 : 31;
  const int e = (x >> mant) & top, m = x & ((1 << mant) - 1);
  const float sign = (x & 0x80u) ? -1.0f : 1.0f;
  if (e4m3 && e == top && m == 7) return NAN;
  if (!e4m3 && e == top) return m ? NAN : sign * INFINITY;
  return sign * ldexpf((float)(e ? (m | (1 << mant)) : m), (e ? e : 1) - bias - mant);
}

static inline float panel_load(attncheck_dtype t, const void* base, int64_t index) {
  if (t == ATTNCHECK_F32) return ((const float*)base)[index];
  if (t == ATTNCHECK_E4M3 || t == ATTNCHECK_E5M2) return panel_fp8_value(t, ((const uint8_t*)base)[index]);
  const uint16_t h = ((const uint16_t*)base)[index];
  return t == ATTNCHECK_F16 ? panel_f16_value(h) : panel_bf16_value(h);
}

/* Rounds x once, to nearest even, to a binary format of p significand bits,
 * smallest normal exponent emin and largest finite max_finite (gradual
 * underflow; +-inf past the overflow threshold, ties included). */
static inline double panel_round(double x, int p, int emin, double max_finite) {
  if (x == 0 || !isfinite(x)) return x;
  const double a = fabs(x);
  int e = ilogb(a);
  if (e < emin) e = emin;
  const double r = ldexp(nearbyint(ldexp(a, p - 1 - e)), e - (p - 1)); /* exact scalings, one rounding */
  const double y = r > max_finite ? INFINITY : r;
  return x < 0 ? -y : y;
}

/* Encodes x, rounded once, into O's storage type. */
static inline void panel_store(attncheck_dtype t, void* base, int64_t index, double x) {
  if (t == ATTNCHECK_F32) {
    ((float*)base)[index] = (float)x; /* the conversion rounds to nearest */
    return;
  }
  uint16_t bits;
  const uint16_t sign = signbit(x) ? 0x8000u : 0u;
  if (t == ATTNCHECK_F16) {
    const double r = isnan(x) ? x : fabs(panel_round(x, 11, -14, 65504.0));
    if (isnan(r)) {
      bits = 0x7e00u;
    } else if (isinf(r)) {
      bits = 0x7c00u;
    } else if (r < 0x1p-14) {
      bits = (uint16_t)ldexp(r, 24); /* subnormal: r = m 2^-24 */
    } else {
      const int e = ilogb(r);
      bits = (uint16_t)(((e + 15) << 10) | ((int)ldexp(r, 10 - e) - 1024));
    }
  } else {
    if (isnan(x)) {
      bits = 0x7fc0u;
    } else {
      const float r = (float)fabs(panel_round(x, 8, -126, 0x1.fep127)); /* exact in binary32 */
      uint32_t u;
      memcpy(&u, &r, sizeof u);
      bits = (uint16_t)(u >> 16);
    }
  }
  ((uint16_t*)base)[index] = (uint16_t)(bits | sign);
}

static inline int panel_fail(char* err, size_t err_len, const char* name, const char* what) {
  if (err && err_len) snprintf(err, err_len, "%s: %s", name, what);
  return 1;
}

/* ---- One-shot attention ---------------------------------------------------- */

/* Scratch of one call: the gathered row and the kernel's work. */
typedef struct panel_buffers {
  float *q, *k, *v;
  int64_t* pos;
  double* o;
  void* work;
} panel_buffers;

static inline void panel_buffers_free(panel_buffers* b) {
  free(b->q), free(b->k), free(b->v), free(b->pos), free(b->o), free(b->work);
}

static inline int panel_buffers_alloc(const panel_kernel* kn, panel_buffers* b, int64_t lk, int64_t d, int64_t dv) {
  const size_t keys = (size_t)(lk > 0 ? lk : 1);
  const size_t work = kn->work_bytes(kn->state, lk, d, dv);
  b->q = (float*)malloc(sizeof(float) * (size_t)d);
  b->k = (float*)malloc(sizeof(float) * keys * (size_t)d);
  b->v = (float*)malloc(sizeof(float) * keys * (size_t)dv);
  b->pos = (int64_t*)malloc(sizeof(int64_t) * keys);
  b->o = (double*)malloc(sizeof(double) * (size_t)dv);
  b->work = aligned_alloc(16, (work + 15) / 16 * 16 + 16);
  if (b->q && b->k && b->v && b->pos && b->o && b->work) return 0;
  panel_buffers_free(b);
  return 1;
}

/* How the rows of one head read their inputs: each input's storage type, the
 * scale handed to the row function, and V's descale on O. Without fp8 inputs
 * (problem->quant NULL): the problem's type for all, its scale, no descale.
 * With them (only a kernel that declares ATTNCHECK_FEATURE4_FP8 is handed
 * any), FlashAttention 3's form: the stored values read raw (every e4m3 and
 * e5m2 value is exact in f32), the descales folded into the scale as
 * fl(fl(s_q s_k) scale), and O = fl(O_row s_v). */
typedef struct panel_head {
  attncheck_dtype q, k, v, o;
  float scale, v_descale;
  int fp8;
} panel_head;

/* A descale of a group (1 without one: docs/abi.md "attncheck_quant"). */
static inline float panel_descale(const float* d, uint32_t granularity, int64_t group) {
  if (!d || granularity == ATTNCHECK_DESCALE_NONE) return 1.0f;
  return d[granularity == ATTNCHECK_DESCALE_TENSOR ? 0 : group];
}

/* The reading of query head h (KV head g) of batch element b. */
static inline panel_head panel_head_of(const attncheck_problem* p, int64_t b, int64_t h, int64_t g) {
  const attncheck_quant* z = p->struct_size >= offsetof(attncheck_problem, quant) + sizeof p->quant ? p->quant : NULL;
  panel_head hd = {p->dtype, p->dtype, p->dtype, p->dtype, p->scale, 1.0f, 0};
  if (!z) return hd;
  hd.q = (attncheck_dtype)z->q_dtype, hd.k = (attncheck_dtype)z->k_dtype, hd.v = (attncheck_dtype)z->v_dtype;
  hd.o = (attncheck_dtype)z->o_dtype;
  const float qs = panel_descale(z->q_descale, z->q_granularity, b * p->hq + h);
  const float ks = panel_descale(z->k_descale, z->k_granularity, b * p->hkv + g);
  hd.scale = (qs * ks) * p->scale; /* two f32 roundings */
  hd.v_descale = panel_descale(z->v_descale, z->v_granularity, b * p->hkv + g);
  hd.fp8 = 1;
  return hd;
}

/* Runs the row function (or the empty-row rule) and writes O and LSE of row (b, i, h), read as hd says. */
static inline void panel_finish_row(const panel_kernel* kn, const attncheck_problem* p, panel_buffers* buf, int64_t n, int64_t lk,
                                    int64_t b, int64_t i, int64_t h, const panel_head* hd) {
  double lse = -INFINITY;
  if (n == 0) {
    for (int64_t e = 0; e < p->dv; ++e) buf->o[e] = kn->empty ? kn->empty[0] : 0.0;
    if (kn->empty) lse = kn->empty[1];
  } else {
    const panel_row r = {n, p->d, p->dv, lk, hd->scale, buf->q, buf->k, buf->v, buf->pos, buf->work};
    kn->row(kn->state, &r, buf->o, &lse);
    if (hd->fp8)
      for (int64_t e = 0; e < p->dv; ++e) buf->o[e] = (float)buf->o[e] * hd->v_descale; /* one f32 rounding */
  }
  for (int64_t e = 0; e < p->dv; ++e)
    panel_store(hd->o, p->o, b * p->o_stride[0] + i * p->o_stride[1] + h * p->o_stride[2] + e * p->o_stride[3], buf->o[e]);
  if (p->lse) p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = (float)lse;
}

static inline int panel_check(const panel_kernel* kn, const attncheck_problem* p, char* err, size_t err_len) {
  if (!(kn->dtypes & (1u << p->dtype))) return panel_fail(err, err_len, kn->name, "storage type not declared");
  if (p->b < 1 || p->hq < 1 || p->hkv < 1 || p->lq < 1 || p->lk < 1 || p->d < 1 || p->dv < 1)
    return panel_fail(err, err_len, kn->name, "b, hq, hkv, lq, lk, d and dv must be >= 1");
  if (p->hq % p->hkv != 0) return panel_fail(err, err_len, kn->name, "hq must be a multiple of hkv");
  return 0;
}

/* Computes one attention call: gathers each row's visible keys and hands them to the kernel. */
static inline int panel_attend(const panel_kernel* kn, const attncheck_problem* p, char* err, size_t err_len) {
  if (panel_check(kn, p, err, err_len)) return 1;
  panel_buffers buf;
  if (panel_buffers_alloc(kn, &buf, p->lk, p->d, p->dv)) return panel_fail(err, err_len, kn->name, "out of memory");
  const int64_t group = p->hq / p->hkv;
  for (int64_t b = 0; b < p->b; ++b) {
    const int64_t valid = p->key_len ? p->key_len[b] : p->lk;
    for (int64_t h = 0; h < p->hq; ++h) {
      const int64_t g = h / group; /* contiguous groups: heads gG..gG+G-1 read KV head g */
      const panel_head hd = panel_head_of(p, b, h, g);
      for (int64_t i = 0; i < p->lq; ++i) {
        const int64_t qpos = valid - p->lq + i; /* bottom-right causal alignment */
        int64_t n = 0;
        for (int64_t j = 0; j < valid; ++j) {
          if (p->causal && j > qpos) break;
          if (p->mask && !p->mask[b * p->mask_stride[0] + h * p->mask_stride[1] + i * p->mask_stride[2] + j * p->mask_stride[3]])
            continue;
          for (int64_t x = 0; x < p->d; ++x)
            buf.k[n * p->d + x] =
                panel_load(hd.k, p->k.data, b * p->k.stride[0] + j * p->k.stride[1] + g * p->k.stride[2] + x * p->k.stride[3]);
          for (int64_t e = 0; e < p->dv; ++e)
            buf.v[n * p->dv + e] =
                panel_load(hd.v, p->v.data, b * p->v.stride[0] + j * p->v.stride[1] + g * p->v.stride[2] + e * p->v.stride[3]);
          buf.pos[n++] = j;
        }
        if (n > 0)
          for (int64_t x = 0; x < p->d; ++x)
            buf.q[x] =
                panel_load(hd.q, p->q.data, b * p->q.stride[0] + i * p->q.stride[1] + h * p->q.stride[2] + x * p->q.stride[3]);
        panel_finish_row(kn, p, &buf, n, p->lk, b, i, h, &hd);
      }
    }
  }
  panel_buffers_free(&buf);
  return 0;
}

/* ---- KV cache -------------------------------------------------------------- */

/* Decoded f32 keys and values per sequence, contiguous (capacity x hkv x d);
 * page_size and page_order are hints a contiguous cache ignores. Rows are
 * gathered as in panel_attend, so prefill and any chunking agree bit for bit. */
typedef struct panel_cache {
  attncheck_cache_config cfg;
  float *k, *v;
  int64_t* len;
} panel_cache;

static inline void panel_cache_free(void* cache) {
  panel_cache* c = (panel_cache*)cache;
  if (!c) return;
  free(c->k), free(c->v), free(c->len), free(c);
}

static inline void* panel_cache_create(const panel_kernel* kn, const attncheck_cache_config* cfg, char* err, size_t err_len) {
  if (!(kn->dtypes & (1u << cfg->dtype))) {
    panel_fail(err, err_len, kn->name, "cache storage type not declared");
    return NULL;
  }
  if (cfg->b < 1 || cfg->hkv < 1 || cfg->d < 1 || cfg->dv < 1 || cfg->capacity < 0) {
    panel_fail(err, err_len, kn->name, "cache b, hkv, d and dv must be >= 1, capacity >= 0");
    return NULL;
  }
  panel_cache* c = (panel_cache*)calloc(1, sizeof *c);
  const size_t slots = (size_t)(cfg->capacity > 0 ? cfg->capacity : 1) * (size_t)cfg->hkv * (size_t)cfg->b;
  if (c) {
    c->cfg = *cfg;
    c->k = (float*)malloc(sizeof(float) * slots * (size_t)cfg->d);
    c->v = (float*)malloc(sizeof(float) * slots * (size_t)cfg->dv);
    c->len = (int64_t*)calloc((size_t)cfg->b, sizeof(int64_t));
  }
  if (!c || !c->k || !c->v || !c->len) {
    panel_cache_free(c);
    panel_fail(err, err_len, kn->name, "out of memory");
    return NULL;
  }
  return c;
}

/* Element (b, t, g, x) of the cache's keys or values of width w. */
static inline int64_t panel_cache_index(const panel_cache* c, int64_t b, int64_t t, int64_t g, int64_t x, int64_t w) {
  return ((b * c->cfg.capacity + t) * c->cfg.hkv + g) * w + x;
}

static inline int panel_cache_append(const panel_kernel* kn, void* cache, const attncheck_tensor* k, const attncheck_tensor* v,
                                     const int64_t* count, char* err, size_t err_len) {
  panel_cache* c = (panel_cache*)cache;
  const attncheck_cache_config* f = &c->cfg;
  for (int64_t b = 0; b < f->b; ++b)
    if (count[b] < 0 || c->len[b] + count[b] > f->capacity)
      return panel_fail(err, err_len, kn->name, "append beyond the cache capacity");
  for (int64_t b = 0; b < f->b; ++b) {
    for (int64_t t = 0; t < count[b]; ++t)
      for (int64_t g = 0; g < f->hkv; ++g) {
        for (int64_t x = 0; x < f->d; ++x)
          c->k[panel_cache_index(c, b, c->len[b] + t, g, x, f->d)] =
              panel_load(f->dtype, k->data, b * k->stride[0] + t * k->stride[1] + g * k->stride[2] + x * k->stride[3]);
        for (int64_t x = 0; x < f->dv; ++x)
          c->v[panel_cache_index(c, b, c->len[b] + t, g, x, f->dv)] =
              panel_load(f->dtype, v->data, b * v->stride[0] + t * v->stride[1] + g * v->stride[2] + x * v->stride[3]);
      }
    c->len[b] += count[b];
  }
  return 0;
}

static inline int panel_cache_attend(const panel_kernel* kn, void* cache, const attncheck_problem* p, char* err, size_t err_len) {
  const panel_cache* c = (const panel_cache*)cache;
  const attncheck_cache_config* f = &c->cfg;
  if (p->dtype != f->dtype || p->b != f->b || p->hkv != f->hkv || p->d != f->d || p->dv != f->dv || p->hq < 1 || p->lq < 1 ||
      p->hq % f->hkv != 0)
    return panel_fail(err, err_len, kn->name, "problem does not match the cache");
  panel_buffers buf;
  const int64_t cap = f->capacity > 0 ? f->capacity : 1;
  if (panel_buffers_alloc(kn, &buf, cap, p->d, p->dv)) return panel_fail(err, err_len, kn->name, "out of memory");
  const int64_t group = p->hq / f->hkv;
  for (int64_t b = 0; b < p->b; ++b) {
    const int64_t valid = c->len[b];
    for (int64_t h = 0; h < p->hq; ++h) {
      const int64_t g = h / group;
      const panel_head hd = panel_head_of(p, b, h, g); /* the host hands the cache no fp8: the plain reading */
      for (int64_t i = 0; i < p->lq; ++i) {
        const int64_t qpos = valid - p->lq + i;
        int64_t n = 0;
        for (int64_t j = 0; j < valid; ++j) {
          if (p->causal && j > qpos) break;
          memcpy(buf.k + n * p->d, c->k + panel_cache_index(c, b, j, g, 0, f->d), sizeof(float) * (size_t)p->d);
          memcpy(buf.v + n * p->dv, c->v + panel_cache_index(c, b, j, g, 0, f->dv), sizeof(float) * (size_t)p->dv);
          buf.pos[n++] = j;
        }
        if (n > 0)
          for (int64_t x = 0; x < p->d; ++x)
            buf.q[x] = panel_load(p->dtype, p->q.data,
                                  b * p->q.stride[0] + i * p->q.stride[1] + h * p->q.stride[2] + x * p->q.stride[3]);
        panel_finish_row(kn, p, &buf, n, cap, b, i, h, &hd);
      }
    }
  }
  panel_buffers_free(&buf);
  return 0;
}

/* ---- Version 2 instances ---------------------------------------------------- */

/* An instance whose state is a panel_kernel (first member of the plugin's state). */
static inline int panel_v2_attend(void* state, const attncheck_problem* p, char* err, size_t err_len) {
  return panel_attend((const panel_kernel*)state, p, err, err_len);
}
static inline void* panel_v2_cache_create(void* state, const attncheck_cache_config* cfg, char* err, size_t err_len) {
  return panel_cache_create((const panel_kernel*)state, cfg, err, err_len);
}
static inline int panel_v2_cache_append(void* state, void* cache, const attncheck_tensor* k, const attncheck_tensor* v, int64_t c,
                                        const int64_t* count, char* err, size_t err_len) {
  (void)c;
  return panel_cache_append((const panel_kernel*)state, cache, k, v, count, err, err_len);
}
static inline int panel_v2_cache_attend(void* state, void* cache, const attncheck_problem* p, char* err, size_t err_len) {
  return panel_cache_attend((const panel_kernel*)state, cache, p, err, err_len);
}
static inline void panel_v2_cache_free(void* state, void* cache) {
  (void)state;
  panel_cache_free(cache);
}

/* What every panel kernel declares: causal, padding, mask, LSE and the cache,
 * and the bit-for-bit claims its row-at-a-time structure makes true. */
#define PANEL_FEATURES                                                                                     \
  (ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_LSE | \
   ATTNCHECK_FEATURE_CACHE)
#define PANEL_CLAIMS \
  (ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_BATCH | ATTNCHECK_CLAIM_CACHE | ATTNCHECK_CLAIM_LAYOUT | ATTNCHECK_CLAIM_LQ)
#define PANEL_ALL_DTYPES ((1u << ATTNCHECK_F32) | (1u << ATTNCHECK_F16) | (1u << ATTNCHECK_BF16))

/* Fills the parts of a version 2 instance every panel kernel shares. */
static inline void panel_v2_fill(attncheck_instance* d, const panel_kernel* kn, void* state) {
  d->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_2;
  d->struct_size = sizeof *d;
  d->name = kn->name;
  d->dtypes = kn->dtypes;
  d->features = PANEL_FEATURES;
  d->invariances = PANEL_CLAIMS;
  d->state = state;
  d->attend = panel_v2_attend;
  d->cache_create = panel_v2_cache_create;
  d->cache_append = panel_v2_cache_append;
  d->cache_attend = panel_v2_cache_attend;
  d->cache_free = panel_v2_cache_free;
}

/* Parses "key=N" with N in [lo, hi] from options ("" keeps *value). Returns 0,
 * or 1 with a message naming the option and its range. */
static inline int panel_int_option(const char* options, const char* key, int64_t lo, int64_t hi, int64_t* value, char* err,
                                   size_t err_len) {
  if (!options || !*options) return 0;
  const size_t klen = strlen(key);
  char* end = NULL;
  long long x = 0;
  if (strncmp(options, key, klen) != 0 || options[klen] != '=' || (x = strtoll(options + klen + 1, &end, 10), *end) || x < lo ||
      x > hi) {
    if (err && err_len)
      snprintf(err, err_len, "'%s': the only option is %s=N with N in [%lld, %lld]", options, key, (long long)lo, (long long)hi);
    return 1;
  }
  *value = x;
  return 0;
}

/* ---- The entry point of a version 2 kernel ---------------------------------- */

/* An instance: the ABI's instance first (it is the allocation), the kernel,
 * and its one size (the tile or chunk its option sets, or its fixed tile; 0
 * when it has none). Row and work_bytes functions get it as their state. */
typedef struct panel_instance {
  attncheck_instance desc;
  panel_kernel kn;
  int64_t size;
  char name[48];
} panel_instance;

/* The one option a kernel may take: "key=N" with N in [lo, hi], def when "". */
typedef struct panel_option {
  const char* key;
  int64_t def, lo, hi;
} panel_option;

static inline void panel_destroy(attncheck_instance* self) { free(self); }

/* A new instance of the kernel "panel NAME" (" key=N" added when it takes an
 * option), declaring f32, f16 and bf16 storage, f32 compute (u = 2^-24) and
 * exp_ulps 1 (glibc's expf, exp2f, logf, log2f: below 1 ulp); the caller
 * changes what differs. option NULL: it takes no options, and its size is
 * `fixed`. NULL, with a message in err, for a bad option or no memory. */
static inline panel_instance* panel_new(const char* name, void (*row)(const void*, const panel_row*, double*, double*),
                                        size_t (*work_bytes)(const void*, int64_t, int64_t, int64_t), const panel_option* option,
                                        int64_t fixed, const char* options, char* err, size_t err_len) {
  int64_t size = fixed;
  if (option) {
    size = option->def;
    if (panel_int_option(options, option->key, option->lo, option->hi, &size, err, err_len)) return NULL;
  } else if (options && *options) {
    snprintf(err, err_len, "'%s': panel %s takes no options", options, name);
    return NULL;
  }
  panel_instance* self = (panel_instance*)calloc(1, sizeof *self);
  if (!self) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  self->size = size;
  if (option)
    snprintf(self->name, sizeof self->name, "panel %s %s=%lld", name, option->key, (long long)size);
  else
    snprintf(self->name, sizeof self->name, "panel %s", name);
  self->kn = (panel_kernel){self->name, PANEL_ALL_DTYPES, row, work_bytes, self, NULL};
  panel_v2_fill(&self->desc, &self->kn, &self->kn);
  self->desc.compute_unit_roundoff = 0x1p-24;
  self->desc.exp_ulps = 1.0;
  self->desc.destroy = panel_destroy;
  return self;
}

/* The instance behind a row function's state. */
static inline const panel_instance* panel_self(const void* state) { return (const panel_instance*)state; }

/* key_blocks of a kernel whose blocks are tiles of `size` keys from key 0. */
static inline int64_t panel_tiles(void* state, const attncheck_problem* p) {
  const panel_instance* self = panel_self(((const panel_kernel*)state)->state);
  return (p->lk + self->size - 1) / self->size;
}

#endif /* ATTNCHECK_PANEL_H */
