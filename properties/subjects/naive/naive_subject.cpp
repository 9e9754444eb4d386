// The naive f32 subject: materialized score rows, plain expf, sums in reverse
// key order. A second algorithm, independent of impl/, that proves the gate
// is implementation-agnostic and the bound sound for another summation order.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "attncheck/subject.h"
#ifndef ATTNCHECK_PLUGIN
#include "attncheck/bundled_subjects.hpp"
#endif

namespace {

// f16 by arithmetic on values, not bit fields (a different route from the
// bundled kernel's): exact decoding, and encoding rounded once to nearest even.
float f16_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (e == 0x1f) return m ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
  return sign * std::ldexp(static_cast<float>(e ? (m | 0x400) : m), (e ? e : 1) - 25);
}

std::uint16_t f16_bits(float x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const float a = std::fabs(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | 0x7e00);
  if (a >= 65520.0f) return static_cast<std::uint16_t>(sign | 0x7c00);  // rounds to inf
  // a = q * 2^(e - 10) with q an integer of at most 11 bits: e is a's binade,
  // or -14 below the normal range; nearbyint rounds q to nearest even.
  const int e = a == 0 ? -14 : std::max(std::ilogb(a), -14);
  float q = std::nearbyint(std::ldexp(a, 10 - e));  // exact scaling, one rounding
  int be = e + 15;
  if (q >= 2048.0f) q = 1024.0f, ++be;  // rounded up into the next binade
  if (q < 1024.0f) be = 0;              // subnormal (or zero)
  return static_cast<std::uint16_t>(sign | (be << 10) | (static_cast<int>(q) & 0x3ff));
}

float load(attncheck_dtype t, const void* base, std::int64_t index) {
  if (t == ATTNCHECK_F32) return static_cast<const float*>(base)[index];
  const std::uint16_t h = static_cast<const std::uint16_t*>(base)[index];
  if (t == ATTNCHECK_F16) return f16_value(h);
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

void store(attncheck_dtype t, void* base, std::int64_t index, float x) {
  if (t == ATTNCHECK_F32) {
    static_cast<float*>(base)[index] = x;
    return;
  }
  std::uint16_t h;
  if (t == ATTNCHECK_F16) {
    h = f16_bits(x);
  } else {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    if (std::isnan(x)) {
      h = static_cast<std::uint16_t>((u >> 16) | 0x40u);
    } else {  // round to nearest, ties to even
      h = static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
  static_cast<std::uint16_t*>(base)[index] = h;
}

// The contract 1.1 variants of one query row (docs/spec.md "Variants"), f32:
// the score of key j is softcap(x) + slope * (j - pos) + bias(j); a key the
// window or chunk hides, or a -inf bias entry, is not visible; sigma joins the
// denominator. Every field at its default: contract 1.0.
struct row_variants {
  const attncheck_variants* v = nullptr;  // NULL: none
  std::int64_t pos = 0;                   // aligned position of the query
  float slope = 0, sigma = -std::numeric_limits<float>::infinity();
  const void* bias_row = nullptr;  // bias at (b, h, i, 0), stepping bias_stride[3]
  bool visible(std::int64_t j) const {
    if (!v) return true;
    if (v->window_left >= 0 && j < pos - v->window_left) return false;
    if (v->window_right >= 0 && j > pos + v->window_right) return false;
    if (v->chunk > 0) {
      // floor division toward minus infinity: rows before key 0 see nothing of chunk 0
      const auto chunk_of = [&](std::int64_t x) { return x >= 0 ? x / v->chunk : -((-x + v->chunk - 1) / v->chunk); };
      if (chunk_of(j) != chunk_of(pos)) return false;
    }
    return !bias_row || bias(j) != -std::numeric_limits<float>::infinity();
  }
  float bias(std::int64_t j) const { return bias_row ? load(v->bias_dtype, bias_row, j * v->bias_stride[3]) : 0.0f; }
  float score(float x, std::int64_t j) const {
    if (!v) return x;
    if (v->softcap != 0) x = v->softcap * std::tanh(x / v->softcap);
    if (v->alibi) x += slope * static_cast<float>(j - pos);
    return x + bias(j);
  }
};

// One query row against keys key(j), values val(j, e), j < n visible when vis(j) and the variants allow it.
template <class Key, class Val, class Vis>
void attend_row(std::int64_t n, std::int64_t d, std::int64_t dv, float scale, const float* q, Key key, Val val, Vis vis,
                float* o_row, float* lse, const row_variants& rv = {}) {
  std::vector<float> s(static_cast<std::size_t>(n));
  std::vector<char> on(static_cast<std::size_t>(n), 0);
  float m = -std::numeric_limits<float>::infinity();
  bool any = false;
  for (std::int64_t j = 0; j < n; ++j) {
    if (!vis(j) || !rv.visible(j)) continue;
    float dot = 0.0f;
    for (std::int64_t x = d - 1; x >= 0; --x) dot += q[x] * key(j, x);  // reverse order on purpose
    s[static_cast<std::size_t>(j)] = rv.score(dot * scale, j);
    on[static_cast<std::size_t>(j)] = 1;
    // A NaN score never becomes m; it poisons the row through exp(s - m) below.
    if (!any || s[static_cast<std::size_t>(j)] > m) m = s[static_cast<std::size_t>(j)];
    any = true;
  }
  const bool sink = rv.sigma != -std::numeric_limits<float>::infinity();
  if (!any) {  // O = 0; LSE = sigma with a sink, else -inf
    for (std::int64_t e = 0; e < dv; ++e) o_row[e] = 0.0f;
    *lse = rv.sigma;
    return;
  }
  if (sink && rv.sigma > m) m = rv.sigma;  // the sink shifts like one more score
  float sum = 0.0f;
  for (std::int64_t j = n - 1; j >= 0; --j) {
    if (!on[static_cast<std::size_t>(j)]) continue;
    s[static_cast<std::size_t>(j)] = std::exp(s[static_cast<std::size_t>(j)] - m);
    sum += s[static_cast<std::size_t>(j)];
  }
  if (sink) sum += std::exp(rv.sigma - m);
  for (std::int64_t e = 0; e < dv; ++e) {
    float acc = 0.0f;
    for (std::int64_t j = n - 1; j >= 0; --j)
      if (on[static_cast<std::size_t>(j)]) acc += s[static_cast<std::size_t>(j)] * val(j, e);
    o_row[e] = acc / sum;
  }
  *lse = m + std::log(sum);
}

// Query row (b, i, h) of the problem into q (D values).
void load_query(const attncheck_problem* p, std::int64_t b, std::int64_t i, std::int64_t h, std::vector<float>& q) {
  for (std::int64_t x = 0; x < p->d; ++x)
    q[static_cast<std::size_t>(x)] =
        load(p->dtype, p->q.data, b * p->q.stride[0] + i * p->q.stride[1] + h * p->q.stride[2] + x * p->q.stride[3]);
}

void write_err(char* err, std::size_t len, const char* msg) {
  if (err && len) std::snprintf(err, len, "%s", msg);
}

// The variants of row (b, h, i) at position pos; vs NULL: none (version 1 and 2 problems).
row_variants variants_of(const attncheck_variants* vs, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t pos) {
  row_variants rv;
  if (!vs) return rv;
  rv.v = vs;
  rv.pos = pos;
  if (vs->alibi) rv.slope = vs->alibi[h];
  if (vs->sinks) rv.sigma = vs->sinks[h];
  if (vs->bias) {
    const std::int64_t w = vs->bias_dtype == ATTNCHECK_F32 ? 4 : 2;
    rv.bias_row = static_cast<const unsigned char*>(vs->bias) +
                  w * (b * vs->bias_stride[0] + h * vs->bias_stride[1] + i * vs->bias_stride[2]);
  }
  return rv;
}

#ifndef NAIVE_PAGED_KEYS
#define NAIVE_PAGED_KEYS(n, page) (n) /* keys of a paged sequence read: n[b], never past it */
#endif
#ifndef NAIVE_RAGGED_ALIGN_QUERIES
#define NAIVE_RAGGED_ALIGN_QUERIES(own, longest) (own) /* causal alignment: the sequence's own query count */
#endif
#ifndef NAIVE_PAGED_SLOT
#define NAIVE_PAGED_SLOT(table_row, j, page) (table_row)[(j) / (page)], (j) % (page) /* page and slot of logical key j */
#endif

// Where sequence b's rows and keys are (docs/abi.md "Paged K/V", "Ragged
// batches"): dense, packed (ragged: rows from cu_seqlens), or K and V through
// the block table (paged). Only valid entries are read: key j < n[b] only.
struct sequence_view {
  const attncheck_problem* p;
  const attncheck_paged_kv* paged;  // NULL: K and V are tensors
  const attncheck_ragged* ragged;   // NULL: batch-strided rows
  std::int64_t b = 0, n = 0, lq = 0, q0 = 0, k0 = 0;

  sequence_view(const attncheck_problem* p_, const attncheck_paged_kv* pg, const attncheck_ragged* rg, std::int64_t b_)
      : p(p_), paged(pg), ragged(rg), b(b_) {
    lq = ragged ? ragged->cu_seqlens_q[b + 1] - ragged->cu_seqlens_q[b] : p->lq;
    q0 = ragged ? ragged->cu_seqlens_q[b] : 0;
    if (ragged && !paged) {
      k0 = ragged->cu_seqlens_k[b];
      n = ragged->cu_seqlens_k[b + 1] - k0;
    } else {
      n = p->key_len ? p->key_len[b] : p->lk;
    }
  }
  // Element offset of row i (query side: Q, O) along a tensor's strides.
  std::int64_t row(const std::int64_t* stride, std::int64_t i) const {
    return ragged ? (q0 + i) * stride[1] : b * stride[0] + i * stride[1];
  }
  std::int64_t lse_at(std::int64_t h, std::int64_t i) const {
    return ragged ? h * p->lse_stride[1] + (q0 + i) * p->lse_stride[2]
                  : b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2];
  }
  float kv(bool values, std::int64_t j, std::int64_t g, std::int64_t x) const {
    if (paged) {
      const attncheck_tensor& t = values ? paged->v_pages : paged->k_pages;
      const std::int64_t at[2] = {NAIVE_PAGED_SLOT(paged->block_table + b * paged->block_table_stride, j, paged->page_size)};
      return load(p->dtype, t.data, at[0] * t.stride[0] + at[1] * t.stride[1] + g * t.stride[2] + x * t.stride[3]);
    }
    const attncheck_tensor& t = values ? p->v : p->k;
    const std::int64_t r = ragged ? (k0 + j) * t.stride[1] : b * t.stride[0] + j * t.stride[1];
    return load(p->dtype, t.data, r + g * t.stride[2] + x * t.stride[3]);
  }
};

// attend for a problem whose variants, paged K/V and ragged batch (each NULL: none) the subject was given.
int naive_attend_forms(const attncheck_problem* p, const attncheck_variants* vs, const attncheck_paged_kv* pg,
                       const attncheck_ragged* rg, char* err, std::size_t err_len) {
  if (p->hkv < 1 || p->hq % p->hkv != 0) {
    write_err(err, err_len, "hq must be a positive multiple of hkv");
    return 1;
  }
  const std::int64_t group = p->hq / p->hkv;
  std::vector<float> q(static_cast<std::size_t>(p->d)), o(static_cast<std::size_t>(p->dv));
  for (std::int64_t b = 0; b < p->b; ++b) {
    const sequence_view sv(p, pg, rg, b);
    const std::int64_t n = sv.n, n_read = pg ? NAIVE_PAGED_KEYS(n, pg->page_size) : n;
    for (std::int64_t h = 0; h < p->hq; ++h) {
      const std::int64_t g = h / group;
      for (std::int64_t i = 0; i < sv.lq; ++i) {
        const std::int64_t qr = sv.row(p->q.stride, i);
        for (std::int64_t x = 0; x < p->d; ++x)
          q[static_cast<std::size_t>(x)] = load(p->dtype, p->q.data, qr + h * p->q.stride[2] + x * p->q.stride[3]);
        const std::int64_t pos = n - (rg ? NAIVE_RAGGED_ALIGN_QUERIES(sv.lq, p->lq) : sv.lq) + i;
        auto key = [&](std::int64_t j, std::int64_t x) { return sv.kv(false, j, g, x); };
        auto val = [&](std::int64_t j, std::int64_t e) { return sv.kv(true, j, g, e); };
        auto vis = [&](std::int64_t j) {
          if (j >= n_read) return false;
          if (p->causal && j > pos) return false;
          if (p->mask && j < n)
            return p->mask[b * p->mask_stride[0] + h * p->mask_stride[1] + i * p->mask_stride[2] + j * p->mask_stride[3]] != 0;
          return true;
        };
        float lse;
        attend_row(std::max(p->lk, n_read), p->d, p->dv, p->scale, q.data(), key, val, vis, o.data(), &lse,
                   variants_of(vs, b, h, i, pos));
        const std::int64_t orow = sv.row(p->o_stride, i);
        for (std::int64_t e = 0; e < p->dv; ++e)
          store(p->dtype, p->o, orow + h * p->o_stride[2] + e * p->o_stride[3], o[static_cast<std::size_t>(e)]);
        if (p->lse) p->lse[sv.lse_at(h, i)] = lse;
      }
    }
  }
  return 0;
}

int naive_attend_variants(const attncheck_problem* p, const attncheck_variants* vs, char* err, std::size_t err_len) {
  return naive_attend_forms(p, vs, nullptr, nullptr, err, err_len);
}

struct naive_cache {
  attncheck_cache_config cfg;
  std::vector<std::vector<float>> k, v;  // per sequence: capacity x hkv x d (dv)
  std::vector<std::int64_t> len;
};

void* naive_cache_create(const attncheck_cache_config* cfg, char* err, std::size_t err_len) {
  if (cfg->b < 1 || cfg->hkv < 1 || cfg->d < 1 || cfg->dv < 1 || cfg->capacity < 0) {
    write_err(err, err_len, "cache sizes must be positive");
    return nullptr;
  }
  auto* c = new (std::nothrow) naive_cache{*cfg, {}, {}, {}};
  if (!c) return nullptr;
  c->k.assign(static_cast<std::size_t>(cfg->b), std::vector<float>(static_cast<std::size_t>(cfg->capacity * cfg->hkv * cfg->d)));
  c->v.assign(static_cast<std::size_t>(cfg->b), std::vector<float>(static_cast<std::size_t>(cfg->capacity * cfg->hkv * cfg->dv)));
  c->len.assign(static_cast<std::size_t>(cfg->b), 0);
  return c;
}

int naive_cache_append(void* cache, const attncheck_tensor* k, const attncheck_tensor* v, std::int64_t, const std::int64_t* count,
                       char* err, std::size_t err_len) {
  auto* c = static_cast<naive_cache*>(cache);
  const auto& f = c->cfg;
  for (std::int64_t b = 0; b < f.b; ++b) {
    auto& n = c->len[static_cast<std::size_t>(b)];
    if (count[b] < 0 || n + count[b] > f.capacity) {
      write_err(err, err_len, "append beyond the cache capacity");
      return 1;
    }
    for (std::int64_t t = 0; t < count[b]; ++t)
      for (std::int64_t g = 0; g < f.hkv; ++g) {
        for (std::int64_t x = 0; x < f.d; ++x)
          c->k[static_cast<std::size_t>(b)][static_cast<std::size_t>(((n + t) * f.hkv + g) * f.d + x)] =
              load(f.dtype, k->data, b * k->stride[0] + t * k->stride[1] + g * k->stride[2] + x * k->stride[3]);
        for (std::int64_t x = 0; x < f.dv; ++x)
          c->v[static_cast<std::size_t>(b)][static_cast<std::size_t>(((n + t) * f.hkv + g) * f.dv + x)] =
              load(f.dtype, v->data, b * v->stride[0] + t * v->stride[1] + g * v->stride[2] + x * v->stride[3]);
      }
    n += count[b];
  }
  return 0;
}

int naive_cache_attend(void* cache, const attncheck_problem* p, char* err, std::size_t err_len) {
  auto* c = static_cast<naive_cache*>(cache);
  const auto& f = c->cfg;
  if (p->hq % f.hkv != 0 || p->d != f.d || p->dv != f.dv || p->b != f.b) {
    write_err(err, err_len, "problem does not match the cache");
    return 1;
  }
  const std::int64_t group = p->hq / f.hkv;
  // The variants (version 3 problems): positions are absolute in the cache, as in a one-shot call.
  const attncheck_variants* vs =
      p->struct_size >= offsetof(attncheck_problem, variants) + sizeof p->variants ? p->variants : nullptr;
  std::vector<float> q(static_cast<std::size_t>(p->d)), o(static_cast<std::size_t>(p->dv));
  for (std::int64_t b = 0; b < p->b; ++b) {
    const std::int64_t n = c->len[static_cast<std::size_t>(b)];
    const auto& kb = c->k[static_cast<std::size_t>(b)];
    const auto& vb = c->v[static_cast<std::size_t>(b)];
    for (std::int64_t h = 0; h < p->hq; ++h) {
      const std::int64_t g = h / group;
      for (std::int64_t i = 0; i < p->lq; ++i) {
        load_query(p, b, i, h, q);
        const std::int64_t pos = n - p->lq + i;
        auto key = [&](std::int64_t j, std::int64_t x) { return kb[static_cast<std::size_t>((j * f.hkv + g) * f.d + x)]; };
        auto val = [&](std::int64_t j, std::int64_t e) { return vb[static_cast<std::size_t>((j * f.hkv + g) * f.dv + e)]; };
        auto vis = [&](std::int64_t j) { return j < n && (!p->causal || j <= pos); };
        float lse;
        attend_row(n, p->d, p->dv, p->scale, q.data(), key, val, vis, o.data(), &lse, variants_of(vs, b, h, i, pos));
        for (std::int64_t e = 0; e < p->dv; ++e)
          store(p->dtype, p->o, b * p->o_stride[0] + i * p->o_stride[1] + h * p->o_stride[2] + e * p->o_stride[3],
                o[static_cast<std::size_t>(e)]);
        if (p->lse) p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = lse;
      }
    }
  }
  return 0;
}

void naive_cache_free(void* cache) { delete static_cast<naive_cache*>(cache); }

int naive_attend(const attncheck_problem* p, char* err, std::size_t err_len) {
  return naive_attend_variants(p, nullptr, err, err_len);
}

const attncheck_subject naive_desc = {
    ATTNCHECK_SUBJECT_ABI_VERSION_1,
    "naive-f32",
    (1u << ATTNCHECK_F32) | (1u << ATTNCHECK_F16) | (1u << ATTNCHECK_BF16),
    ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_LSE |
        ATTNCHECK_FEATURE_CACHE,
    // Every row is computed alone in a fixed order over key positions.
    ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_THREADS | ATTNCHECK_CLAIM_BATCH | ATTNCHECK_CLAIM_CACHE |
        ATTNCHECK_CLAIM_LAYOUT | ATTNCHECK_CLAIM_LQ,
    0x1p-24,
    1.0,  // glibc expf: < 1 ulp
    nullptr,
    naive_attend,
    naive_cache_create,
    naive_cache_append,
    naive_cache_attend,
    naive_cache_free,
};

// ---- Version 3: the same subject with the contract 1.1 variants ----

int v3_attend(void*, const attncheck_problem* p, char* err, std::size_t err_len) {
  // variants, paged and ragged are read only where the host's problem is long enough to hold them.
  const bool has_v3 = p->struct_size >= offsetof(attncheck_problem, variants) + sizeof p->variants;
  const bool has_forms = p->struct_size >= offsetof(attncheck_problem, ragged) + sizeof p->ragged;
  return naive_attend_forms(p, has_v3 ? p->variants : nullptr, has_forms ? p->paged : nullptr, has_forms ? p->ragged : nullptr,
                            err, err_len);
}
void* v3_cache_create(void*, const attncheck_cache_config* cfg, char* err, std::size_t err_len) {
  return naive_cache_create(cfg, err, err_len);
}
int v3_cache_append(void*, void* cache, const attncheck_tensor* k, const attncheck_tensor* v, std::int64_t c,
                    const std::int64_t* count, char* err, std::size_t err_len) {
  return naive_cache_append(cache, k, v, c, count, err, err_len);
}
int v3_cache_attend(void*, void* cache, const attncheck_problem* p, char* err, std::size_t err_len) {
  return naive_cache_attend(cache, p, err, err_len);
}
void v3_cache_free(void*, void* cache) { naive_cache_free(cache); }
void v3_destroy(attncheck_instance* self) { delete self; }

// ---- Backward (docs/spec.md "Backward"): straight loops from the formulas ----
//
// Per query row r = (b, h, i) that sees a key, in f32: the scores as the
// forward computes them (variants included), P_j = exp(S_j - LSE_in) from the
// LSE handed in, dP_j = dO . V_j, D = dO . O_in (the O handed in),
// dS_j = P_j (dP_j - D), times 1 - tanh^2(x_j / c) under a softcap c; with
// sinks d_sinks[h] -= exp(sigma - LSE_in) D;
// then dQ = scale sum_j dS_j K_j, and into one running f32 sum per key over
// every row of its KV head (the G query heads, rows in order):
// dK_j += dS_j Q_r (times scale at the end) and dV_j += P_j dO_r. One block
// each way: backward_blocks is NULL (nb 1 and 1).
// Hooks for the broken test plugins (tests/properties/plugins/broken_backward_*.cpp
// define one and include this file), each at its correct default.
#ifndef NAIVE_BACKWARD_DQ_SCALE
#define NAIVE_BACKWARD_DQ_SCALE(scale) (scale) /* dQ = scale dS K */
#endif
#ifndef NAIVE_BACKWARD_D_TERM
#define NAIVE_BACKWARD_D_TERM(d_o, o) ((d_o) * (o)) /* D = rowsum(dO O) */
#endif
#ifndef NAIVE_BACKWARD_SOFTCAP_GRAD
#define NAIVE_BACKWARD_SOFTCAP_GRAD(th) (1.0f - (th) * (th)) /* d softcap(x) / dx at tanh(x / c) = th */
#endif
#ifndef NAIVE_BACKWARD_SINK_TERM
#define NAIVE_BACKWARD_SINK_TERM(p_sink, d) (-(p_sink) * (d)) /* d(sink) += -P_sink D */
#endif
#ifndef NAIVE_BACKWARD_ADDS_TO_KV
#define NAIVE_BACKWARD_ADDS_TO_KV(h, first) true /* every query head of the group adds into dK, dV */
#endif
int v3_attend_backward(void*, const attncheck_backward_problem* bp, char* err, std::size_t err_len) {
  const attncheck_problem* p = bp->forward;
  if (p->hkv < 1 || p->hq % p->hkv != 0) {
    write_err(err, err_len, "hq must be a positive multiple of hkv");
    return 1;
  }
  const attncheck_variants* vs =
      p->struct_size >= offsetof(attncheck_problem, variants) + sizeof p->variants ? p->variants : nullptr;
  if (vs && vs->sinks && !bp->d_sinks) {
    write_err(err, err_len, "d_sinks: must be set (hq entries) when the problem has sinks");
    return 1;
  }
  if (vs && vs->sinks)
    for (std::int64_t h = 0; h < p->hq; ++h) bp->d_sinks[h] = 0.0f;
  const std::int64_t group = p->hq / p->hkv;
  const attncheck_dtype t = p->dtype;
  const auto at4 = [](const std::int64_t* st, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
    return a * st[0] + b * st[1] + c * st[2] + d * st[3];
  };
  std::vector<float> q(static_cast<std::size_t>(p->d)), pr(static_cast<std::size_t>(p->lk)), ds(static_cast<std::size_t>(p->lk));
  std::vector<char> on(static_cast<std::size_t>(p->lk));
  std::vector<float> dk_acc(static_cast<std::size_t>(p->lk * p->d)), dv_acc(static_cast<std::size_t>(p->lk * p->dv));
  for (std::int64_t b = 0; b < p->b; ++b) {
    const std::int64_t n = p->key_len ? p->key_len[b] : p->lk;
    for (std::int64_t g = 0; g < p->hkv; ++g) {
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
      const auto key = [&](std::int64_t j, std::int64_t x) { return load(t, p->k.data, at4(p->k.stride, b, j, g, x)); };
      const auto val = [&](std::int64_t j, std::int64_t e) { return load(t, p->v.data, at4(p->v.stride, b, j, g, e)); };
      for (std::int64_t h = g * group; h < (g + 1) * group; ++h)
        for (std::int64_t i = 0; i < p->lq; ++i) {
          load_query(p, b, i, h, q);
          const std::int64_t pos = n - p->lq + i;
          const row_variants rv = variants_of(vs, b, h, i, pos);
          bool any = false;
          for (std::int64_t j = 0; j < p->lk; ++j) {
            bool vis = j < n && !(p->causal && j > pos);
            if (vis && p->mask) vis = p->mask[at4(p->mask_stride, b, h, i, j)] != 0;
            vis = vis && rv.visible(j);
            on[static_cast<std::size_t>(j)] = vis;
            any = any || vis;
          }
          for (std::int64_t x = 0; x < p->d; ++x)
            if (!any) store(t, bp->dq, at4(bp->dq_stride, b, i, h, x), 0.0f);
          if (!any) continue;  // a row that sees nothing adds nothing
          const float lse = bp->lse[b * bp->lse_stride[0] + h * bp->lse_stride[1] + i * bp->lse_stride[2]];
          const auto d_o = [&](std::int64_t e) { return load(t, bp->d_o.data, at4(bp->d_o.stride, b, i, h, e)); };
          float big_d = 0.0f;
          for (std::int64_t e = 0; e < p->dv; ++e)
            big_d += NAIVE_BACKWARD_D_TERM(d_o(e), load(t, bp->o.data, at4(bp->o.stride, b, i, h, e)));
          // d(sink): this row's -exp(sigma - LSE) D, rows in order.
          if (rv.sigma != -std::numeric_limits<float>::infinity())
            bp->d_sinks[h] += NAIVE_BACKWARD_SINK_TERM(std::exp(rv.sigma - lse), big_d);
          for (std::int64_t j = 0; j < p->lk; ++j) {
            if (!on[static_cast<std::size_t>(j)]) continue;
            float dot = 0.0f;
            for (std::int64_t x = p->d - 1; x >= 0; --x) dot += q[static_cast<std::size_t>(x)] * key(j, x);
            const float x_j = dot * p->scale;
            const float pj = std::exp(rv.score(x_j, j) - lse);
            float dp = 0.0f;
            for (std::int64_t e = 0; e < p->dv; ++e) dp += d_o(e) * val(j, e);
            pr[static_cast<std::size_t>(j)] = pj;
            ds[static_cast<std::size_t>(j)] = pj * (dp - big_d);
            if (vs && vs->softcap != 0) {  // d softcap(x) / dx = 1 - tanh^2(x / c)
              const float th = std::tanh(x_j / vs->softcap);
              ds[static_cast<std::size_t>(j)] *= NAIVE_BACKWARD_SOFTCAP_GRAD(th);
            }
          }
          for (std::int64_t x = 0; x < p->d; ++x) {
            float acc = 0.0f;
            for (std::int64_t j = 0; j < p->lk; ++j)
              if (on[static_cast<std::size_t>(j)]) acc += ds[static_cast<std::size_t>(j)] * key(j, x);
            store(t, bp->dq, at4(bp->dq_stride, b, i, h, x), NAIVE_BACKWARD_DQ_SCALE(p->scale) * acc);
          }
          for (std::int64_t j = 0; j < p->lk; ++j) {
            if (!on[static_cast<std::size_t>(j)] || !(NAIVE_BACKWARD_ADDS_TO_KV(h, g * group))) continue;
            for (std::int64_t x = 0; x < p->d; ++x)
              dk_acc[static_cast<std::size_t>(j * p->d + x)] += ds[static_cast<std::size_t>(j)] * q[static_cast<std::size_t>(x)];
            for (std::int64_t e = 0; e < p->dv; ++e)
              dv_acc[static_cast<std::size_t>(j * p->dv + e)] += pr[static_cast<std::size_t>(j)] * d_o(e);
          }
        }
      for (std::int64_t j = 0; j < p->lk; ++j) {
        for (std::int64_t x = 0; x < p->d; ++x)
          store(t, bp->dk, at4(bp->dk_stride, b, j, g, x), p->scale * dk_acc[static_cast<std::size_t>(j * p->d + x)]);
        for (std::int64_t e = 0; e < p->dv; ++e)
          store(t, bp->dv, at4(bp->dv_stride, b, j, g, e), dv_acc[static_cast<std::size_t>(j * p->dv + e)]);
      }
    }
  }
  return 0;
}

attncheck_instance* naive_v3(const char* options, char* err, std::size_t err_len) {
  if (options && *options) {
    write_err(err, err_len, "naive takes no options");
    return nullptr;
  }
  auto* x = new (std::nothrow) attncheck_instance{};
  if (!x) {
    write_err(err, err_len, "out of memory");
    return nullptr;
  }
  x->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_3;
  x->struct_size = sizeof(attncheck_instance);
  x->name = naive_desc.name;
  x->dtypes = naive_desc.dtypes;
  x->features = naive_desc.features;
  x->invariances = naive_desc.invariances;
  x->compute_unit_roundoff = naive_desc.compute_unit_roundoff;
  x->exp_ulps = naive_desc.exp_ulps;
  x->attend = v3_attend;
  x->cache_create = v3_cache_create;
  x->cache_append = v3_cache_append;
  x->cache_attend = v3_cache_attend;
  x->cache_free = v3_cache_free;
  x->destroy = v3_destroy;
  // Every score variant, in the one-shot call (the cache path takes none).
  x->features_v3 = ATTNCHECK_FEATURE3_WINDOW | ATTNCHECK_FEATURE3_CHUNK | ATTNCHECK_FEATURE3_SOFTCAP | ATTNCHECK_FEATURE3_SINKS |
                   ATTNCHECK_FEATURE3_ALIBI | ATTNCHECK_FEATURE3_BIAS | ATTNCHECK_FEATURE3_BACKWARD |
                   ATTNCHECK_FEATURE3_BACKWARD_VARIANTS | ATTNCHECK_FEATURE3_PAGED | ATTNCHECK_FEATURE3_RAGGED;
  // Paged K/V and ragged batches: each sequence reads its own valid keys in the dense order, so the
  // forms give the dense form's bits.
  // Backward under every variant (d(sink) too); f32 compute and glibc expf as the forward. backward_blocks NULL: one
  // block each way.
  x->attend_backward = v3_attend_backward;
  // Same call, same bits: every sum runs in one fixed order whatever the thread count.
  x->invariances_v3 = ATTNCHECK_CLAIM3_BACKWARD_DETERMINISTIC | ATTNCHECK_CLAIM3_PAGE_PLACEMENT |
                      ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE | ATTNCHECK_CLAIM3_RAGGED_EQUALS_DENSE;
  x->tanh_ulps = 2.0;  // glibc tanhf: 2 ulps (its libm-test-ulps, x86_64)
  return x;
}

}  // namespace

#ifdef ATTNCHECK_PLUGIN
extern "C" __attribute__((visibility("default"))) const attncheck_subject* attncheck_subject_v1(void) { return &naive_desc; }
extern "C" __attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v3(const char* options, char* err,
                                                                                           std::size_t err_len) {
  return naive_v3(options, err, err_len);
}
#else
namespace attncheck {
const attncheck_subject* naive_subject() { return &naive_desc; }
attncheck_instance* naive_instance_v3(const char* options, char* err, std::size_t err_len) {
  return naive_v3(options, err, err_len);
}
}  // namespace attncheck
#endif
