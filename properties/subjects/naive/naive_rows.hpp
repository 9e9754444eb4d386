// The naive subject's arithmetic on one query row: f16/bf16 by value, the
// contract 1.1 variants of a row, and the row's attention in f32 (plain expf,
// sums in reverse key order).
// Part of naive_subject.cpp, included there only (one translation unit: its
// anonymous namespace, and the hooks the broken test plugins define before they include it).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <vector>

#include "attncheck/subject.h"

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

// fp8 by value (docs/spec.md "fp8 storage"): E4M3FN (bias 7, no infinity,
// S.1111.111 its NaN) and E5M2 (bias 15, IEEE-like). Every value is exact in f32.
float fp8_value(attncheck_dtype t, std::uint8_t x) {
  const bool e4m3 = t == ATTNCHECK_E4M3;
  const int mant_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, exp_all = e4m3 ? 15 : 31;
  const int e = (x >> mant_bits) & exp_all, m = x & ((1 << mant_bits) - 1);
  const float sign = (x & 0x80) ? -1.0f : 1.0f;
  if (e4m3 && e == exp_all && m == 7) return std::numeric_limits<float>::quiet_NaN();
  if (!e4m3 && e == exp_all) return m ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
  return sign * std::ldexp(static_cast<float>(e ? (m | (1 << mant_bits)) : m), (e ? e : 1) - bias - mant_bits);
}

float load(attncheck_dtype t, const void* base, std::int64_t index) {
  if (t == ATTNCHECK_F32) return static_cast<const float*>(base)[index];
  if (t == ATTNCHECK_E4M3 || t == ATTNCHECK_E5M2) return fp8_value(t, static_cast<const std::uint8_t*>(base)[index]);
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

}  // namespace
