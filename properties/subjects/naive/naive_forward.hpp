// The naive subject's forward: one-shot calls over dense, paged and ragged
// K/V, and the KV cache.
// Part of naive_subject.cpp, included there only (one translation unit: its
// anonymous namespace, and the hooks the broken test plugins define before they include it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <new>
#include <vector>

#include "attncheck/subject.h"
#include "naive_rows.hpp"

namespace {

// Hooks for the broken test plugins (tests/plugins/broken_paged_*.cpp,
// broken_ragged_*.cpp define one and include naive_subject.cpp), each at its correct default.
#ifndef NAIVE_PAGED_KEYS
#define NAIVE_PAGED_KEYS(n, page) (n) /* keys of a paged sequence read: n[b], never past it */
#endif
#ifndef NAIVE_RAGGED_ALIGN_QUERIES
#define NAIVE_RAGGED_ALIGN_QUERIES(own, longest) (own) /* causal alignment: the sequence's own query count */
#endif
#ifndef NAIVE_PAGED_SLOT
#define NAIVE_PAGED_SLOT(table_row, j, page) (table_row)[(j) / (page)], (j) % (page) /* page and slot of logical key j */
#endif

// Hooks for the broken fp8 test plugins (tests/plugins/broken_fp8_*.cpp), each at its correct default.
#ifndef NAIVE_FP8_READ_AS
#define NAIVE_FP8_READ_AS(t) (t) /* the storage type an input is decoded as: its own */
#endif
#ifndef NAIVE_KV_DESCALE
#define NAIVE_KV_DESCALE(values, k_descale, v_descale) ((values) ? (v_descale) : (k_descale)) /* V's for values, K's for keys */
#endif
#ifndef NAIVE_DESCALE_HEAD
#define NAIVE_DESCALE_HEAD(g, h, hkv) (g) /* the KV head whose descale query head h's keys take: its own */
#endif
#ifndef NAIVE_DEQUANT
#define NAIVE_DEQUANT(x, s) ((x) * (s)) /* a stored value times its descale, once */
#endif
#ifndef NAIVE_K_DESCALE_USED
#define NAIVE_K_DESCALE_USED(q_is_fp8) true /* K's descale is applied whatever Q's type */
#endif

// The fp8 storage of a problem (docs/abi.md, attncheck_quant): each input's
// type, and the descale of a group (1 without one).
struct quant_view {
  attncheck_dtype q, k, v, o;
  const attncheck_quant* z = nullptr;
  explicit quant_view(const attncheck_problem* p) : q(p->dtype), k(p->dtype), v(p->dtype), o(p->dtype) {
    if (p->struct_size >= offsetof(attncheck_problem, quant) + sizeof p->quant) z = p->quant;
    if (!z) return;
    q = NAIVE_FP8_READ_AS(static_cast<attncheck_dtype>(z->q_dtype));
    k = NAIVE_FP8_READ_AS(static_cast<attncheck_dtype>(z->k_dtype));
    v = NAIVE_FP8_READ_AS(static_cast<attncheck_dtype>(z->v_dtype));
    o = static_cast<attncheck_dtype>(z->o_dtype);
  }
  static float of(const float* d, std::uint32_t granularity, std::int64_t group) {
    if (!d || granularity == ATTNCHECK_DESCALE_NONE) return 1.0f;
    return d[granularity == ATTNCHECK_DESCALE_TENSOR ? 0 : group];
  }
  float q_descale(std::int64_t b, std::int64_t h, std::int64_t hq) const {
    return z ? of(z->q_descale, z->q_granularity, b * hq + h) : 1.0f;
  }
  float k_descale(std::int64_t b, std::int64_t g, std::int64_t hkv) const {
    if (!z || !NAIVE_K_DESCALE_USED(z->q_dtype == ATTNCHECK_E4M3 || z->q_dtype == ATTNCHECK_E5M2)) return 1.0f;
    return of(z->k_descale, z->k_granularity, b * hkv + g);
  }
  float v_descale(std::int64_t b, std::int64_t g, std::int64_t hkv) const {
    return z ? of(z->v_descale, z->v_granularity, b * hkv + g) : 1.0f;
  }
};

// Where sequence b's rows and keys are (docs/abi.md "Paged K/V", "Ragged
// batches"): dense, packed (ragged: rows from cu_seqlens), or K and V through
// the block table (paged). Only valid entries are read: key j < n[b] only.
struct sequence_view {
  const attncheck_problem* p;
  const attncheck_paged_kv* paged;  // NULL: K and V are tensors
  const attncheck_ragged* ragged;   // NULL: batch-strided rows
  attncheck_dtype k_type, v_type;
  std::int64_t b = 0, n = 0, lq = 0, q0 = 0, k0 = 0;

  sequence_view(const attncheck_problem* p_, const attncheck_paged_kv* pg, const attncheck_ragged* rg, std::int64_t b_,
                const quant_view& qv)
      : p(p_), paged(pg), ragged(rg), k_type(qv.k), v_type(qv.v), b(b_) {
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
      return load(values ? v_type : k_type, t.data,
                  at[0] * t.stride[0] + at[1] * t.stride[1] + g * t.stride[2] + x * t.stride[3]);
    }
    const attncheck_tensor& t = values ? p->v : p->k;
    const std::int64_t r = ragged ? (k0 + j) * t.stride[1] : b * t.stride[0] + j * t.stride[1];
    return load(values ? v_type : k_type, t.data, r + g * t.stride[2] + x * t.stride[3]);
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
  const quant_view qv(p);
  std::vector<float> q(static_cast<std::size_t>(p->d)), o(static_cast<std::size_t>(p->dv));
  for (std::int64_t b = 0; b < p->b; ++b) {
    const sequence_view sv(p, pg, rg, b, qv);
    const std::int64_t n = sv.n, n_read = pg ? NAIVE_PAGED_KEYS(n, pg->page_size) : n;
    for (std::int64_t h = 0; h < p->hq; ++h) {
      const std::int64_t g = h / group;
      // fp8: each value times its descale in f32, once, as it is read.
      const float qs = qv.q_descale(b, h, p->hq);
      const float ks_k = qv.k_descale(b, NAIVE_DESCALE_HEAD(g, h, p->hkv), p->hkv);
      [[maybe_unused]] const float vs_v = qv.v_descale(b, NAIVE_DESCALE_HEAD(g, h, p->hkv), p->hkv);
      const float ks = NAIVE_KV_DESCALE(false, ks_k, vs_v), vsc = NAIVE_KV_DESCALE(true, ks_k, vs_v);
      for (std::int64_t i = 0; i < sv.lq; ++i) {
        const std::int64_t qr = sv.row(p->q.stride, i);
        for (std::int64_t x = 0; x < p->d; ++x)
          q[static_cast<std::size_t>(x)] = NAIVE_DEQUANT(load(qv.q, p->q.data, qr + h * p->q.stride[2] + x * p->q.stride[3]), qs);
        const std::int64_t pos = n - (rg ? NAIVE_RAGGED_ALIGN_QUERIES(sv.lq, p->lq) : sv.lq) + i;
        auto key = [&](std::int64_t j, std::int64_t x) { return NAIVE_DEQUANT(sv.kv(false, j, g, x), ks); };
        auto val = [&](std::int64_t j, std::int64_t e) { return NAIVE_DEQUANT(sv.kv(true, j, g, e), vsc); };
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
          store(qv.o, p->o, orow + h * p->o_stride[2] + e * p->o_stride[3], o[static_cast<std::size_t>(e)]);
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

}  // namespace
