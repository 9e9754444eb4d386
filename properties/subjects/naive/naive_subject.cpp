// The naive f32 subject: materialized score rows, plain expf, sums in reverse
// key order. A second algorithm, independent of impl/, that proves the gate
// is implementation-agnostic and the bound sound for another summation order.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
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

// One query row against keys key(j), values val(j, e), j < n visible when vis(j).
template <class Key, class Val, class Vis>
void attend_row(std::int64_t n, std::int64_t d, std::int64_t dv, float scale, const float* q, Key key, Val val, Vis vis,
                float* o_row, float* lse) {
  std::vector<float> s(static_cast<std::size_t>(n));
  std::vector<char> on(static_cast<std::size_t>(n), 0);
  float m = -std::numeric_limits<float>::infinity();
  bool any = false;
  for (std::int64_t j = 0; j < n; ++j) {
    if (!vis(j)) continue;
    float dot = 0.0f;
    for (std::int64_t x = d - 1; x >= 0; --x) dot += q[x] * key(j, x);  // reverse order on purpose
    s[static_cast<std::size_t>(j)] = dot * scale;
    on[static_cast<std::size_t>(j)] = 1;
    // A NaN score never becomes m; it poisons the row through exp(s - m) below.
    if (!any || s[static_cast<std::size_t>(j)] > m) m = s[static_cast<std::size_t>(j)];
    any = true;
  }
  if (!any) {
    for (std::int64_t e = 0; e < dv; ++e) o_row[e] = 0.0f;
    *lse = -std::numeric_limits<float>::infinity();
    return;
  }
  float sum = 0.0f;
  for (std::int64_t j = n - 1; j >= 0; --j) {
    if (!on[static_cast<std::size_t>(j)]) continue;
    s[static_cast<std::size_t>(j)] = std::exp(s[static_cast<std::size_t>(j)] - m);
    sum += s[static_cast<std::size_t>(j)];
  }
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

int naive_attend(const attncheck_problem* p, char* err, std::size_t err_len) {
  if (p->hkv < 1 || p->hq % p->hkv != 0) {
    write_err(err, err_len, "hq must be a positive multiple of hkv");
    return 1;
  }
  const std::int64_t group = p->hq / p->hkv;
  std::vector<float> q(static_cast<std::size_t>(p->d)), o(static_cast<std::size_t>(p->dv));
  for (std::int64_t b = 0; b < p->b; ++b) {
    const std::int64_t n = p->key_len ? p->key_len[b] : p->lk;
    for (std::int64_t h = 0; h < p->hq; ++h) {
      const std::int64_t g = h / group;
      for (std::int64_t i = 0; i < p->lq; ++i) {
        load_query(p, b, i, h, q);
        const std::int64_t pos = n - p->lq + i;
        auto key = [&](std::int64_t j, std::int64_t x) {
          return load(p->dtype, p->k.data, b * p->k.stride[0] + j * p->k.stride[1] + g * p->k.stride[2] + x * p->k.stride[3]);
        };
        auto val = [&](std::int64_t j, std::int64_t e) {
          return load(p->dtype, p->v.data, b * p->v.stride[0] + j * p->v.stride[1] + g * p->v.stride[2] + e * p->v.stride[3]);
        };
        auto vis = [&](std::int64_t j) {
          if (j >= n) return false;
          if (p->causal && j > pos) return false;
          if (p->mask)
            return p->mask[b * p->mask_stride[0] + h * p->mask_stride[1] + i * p->mask_stride[2] + j * p->mask_stride[3]] != 0;
          return true;
        };
        float lse;
        attend_row(p->lk, p->d, p->dv, p->scale, q.data(), key, val, vis, o.data(), &lse);
        for (std::int64_t e = 0; e < p->dv; ++e)
          store(p->dtype, p->o, b * p->o_stride[0] + i * p->o_stride[1] + h * p->o_stride[2] + e * p->o_stride[3],
                o[static_cast<std::size_t>(e)]);
        if (p->lse) p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = lse;
      }
    }
  }
  return 0;
}

// A contiguous (not paged) cache of decoded f32 values per sequence.
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
        attend_row(n, p->d, p->dv, p->scale, q.data(), key, val, vis, o.data(), &lse);
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

const attncheck_subject naive_desc = {
    ATTNCHECK_SUBJECT_ABI_VERSION,
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

}  // namespace

#ifdef ATTNCHECK_PLUGIN
extern "C" __attribute__((visibility("default"))) const attncheck_subject* attncheck_subject_v1(void) { return &naive_desc; }
#else
namespace attncheck {
const attncheck_subject* naive_subject() { return &naive_desc; }
}  // namespace attncheck
#endif
