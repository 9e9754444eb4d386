// Key blocks: the K and V rows' addresses (paged caches too), prefetching,
// and packing (K transposed to f32, V widened or used in place).
// Part of engine/kernel.hpp, included there only: everything stays in its anonymous
// namespace (one translation unit, the same inlining as one file).
#pragma once

#include <algorithm>

#include "../convert.hpp"
#include "../mutation.hpp"
#include "../simd.hpp"
#include "unit_runner.hpp"

namespace attnimpl::engine {
namespace {

/// Element dd of a storage row, exactly, as f32.
template <dtype T>
float element(const char* row, std::int64_t dd) {
  if constexpr (T == dtype::f32)
    return reinterpret_cast<const float*>(row)[dd];
  else if constexpr (T == dtype::bf16)
    return convert::from_bf16(reinterpret_cast<const std::uint16_t*>(row)[dd]);
  else
    return convert::from_f16(reinterpret_cast<const std::uint16_t*>(row)[dd]);
}

/// The addresses of 8 storage rows, held by value: vector stores may alias
/// anything, so addresses read through a pointer or a member would be
/// reloaded after each one.
struct eight_rows {
  const char* r[8];

  explicit eight_rows(const char* const* rows) : r{rows[0], rows[1], rows[2], rows[3], rows[4], rows[5], rows[6], rows[7]} {}

  /// 8 vectors, what transposed() returns.
  struct block {
    simd::vf v[8];
  };
  /// The 8 elements from byte `at` of each row as f32, transposed: v[x]
  /// lane t = row t's element x. Returned by value: filled through an array
  /// parameter instead, GCC allocates the decode score loop's registers worse.
  __attribute__((always_inline)) block transposed(std::int64_t at, dtype t) const {
    block k = {{simd::load8(r[0] + at, t), simd::load8(r[1] + at, t), simd::load8(r[2] + at, t), simd::load8(r[3] + at, t),
                simd::load8(r[4] + at, t), simd::load8(r[5] + at, t), simd::load8(r[6] + at, t), simd::load8(r[7] + at, t)}};
    simd::transpose8(k.v);
    return k;
  }

  /// Element dd of the 8 rows (lane t: row t's).
  template <dtype T>
  __attribute__((always_inline)) simd::vf column(std::int64_t dd) const {
    return simd::setr(element<T>(r[0], dd), element<T>(r[1], dd), element<T>(r[2], dd), element<T>(r[3], dd),
                      element<T>(r[4], dd), element<T>(r[5], dd), element<T>(r[6], dd), element<T>(r[7], dd));
  }
};

/// kt[dd][t] = row t's element dd for 8 rows and dd < d rounded down to 8;
/// returns how many dims it did. Everything by value (eight_rows).
std::int64_t transpose_rows(const char* const* rows_in, dtype t_kv, std::int64_t esize, std::int64_t d, float* kt,
                            std::int64_t ld) {
  const eight_rows rows(rows_in);
  std::int64_t dd = 0;
  for (; dd + 8 <= d; dd += 8) {
    const eight_rows::block r = rows.transposed(dd * esize, t_kv);
    float* out = kt + dd * ld;
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) simd::store(out + t * ld, r.v[t]);
  }
  return dd;
}

/// How one (batch, KV head)'s rows of K or of V are addressed.
struct row_walk {
  const char* base;
  const strides4* stride;    // (batch, key, head, dim), elements
  std::int64_t page_stride;  // elements between pages (paged caches)
  std::int64_t esize;
};

/// out[t] = address of key row j0 + t (t < count) of batch b, KV head g: one
/// block-table lookup per page run, where a per-key lookup costs a 64-bit
/// division per row (several hundred cycles a block; decode has nothing to hide it behind).
void row_addresses(const kv_source& kv, const row_walk& w, std::int64_t b, std::int64_t g, std::int64_t j0, std::int64_t count,
                   const char** out) {
  const strides4& s = *w.stride;
  const std::int64_t step = s[1] * w.esize;
#ifdef ATTNIMPL_MUTATION
  // mutant: the key index held in 15 or 16 bits, so key j is read as key j mod 2^15 or 2^16
  const std::int64_t wrap = ATTNIMPL_MUTANT(key_index_wraps_32768) ? 32768 : ATTNIMPL_MUTANT(key_index_wraps_65536) ? 65536 : 0;
  for (std::int64_t t = 0; wrap && t < count; ++t) {
    const std::int64_t j = (j0 + t) % wrap;
    const std::int64_t row = kv.table ? kv.table[b * kv.table_stride + j / kv.page_size] * w.page_stride + j % kv.page_size * s[1]
                                      : b * s[0] + j * s[1];
    out[t] = w.base + (row + g * s[2]) * w.esize;
  }
  if (wrap) return;
#endif
  if (!kv.table) {
    const char* at = w.base + (b * s[0] + j0 * s[1] + g * s[2]) * w.esize;
    for (std::int64_t t = 0; t < count; ++t) out[t] = at + t * step;
    return;
  }
  for (std::int64_t t = 0, j = j0; t < count;) {
    const std::int64_t slot = j % kv.page_size;
    const std::int64_t run = std::min(kv.page_size - slot, count - t);
    std::int64_t entry = j / kv.page_size;
    if (ATTNIMPL_MUTANT(paged_wrong_page_size))  // the index by the next power of two, the slot by P
      entry = j >> (64 - __builtin_clzll(static_cast<unsigned long long>(kv.page_size - 1) | 1ull) - (kv.page_size == 1));
    std::int64_t page = kv.table[b * kv.table_stride + entry];
    if (ATTNIMPL_MUTANT(paged_table_tail_read)) page = std::clamp<std::int64_t>(page, 0, kv.num_pages - 1);  // "defensive"
    if (ATTNIMPL_MUTANT(paged_page_index_16_bits)) page &= 0xffff;  // the physical page number held in 16 bits
    const char* at = w.base + (page * w.page_stride + slot * s[1] + g * s[2]) * w.esize;
    for (std::int64_t x = 0; x < run; ++x) out[t + x] = at + x * step;
    t += run;
    j += run;
  }
}

/// Requests every cache line of rows[0 .. count), `bytes` long each. Rows of
/// a paged cache sit a page apart, where the hardware prefetcher stops.
void prefetch_rows(const char* const* rows, std::int64_t count, std::int64_t bytes) {
  for (std::int64_t t = 0; t < count; ++t)
    for (std::int64_t x = 0; x < bytes; x += 64) simd::prefetch(rows[t] + x);
}

/// Dims of a keys-across run that share one cache line, dstr bytes apart:
/// 64 / dstr where dstr divides 64 (so a power of two), else 1.
std::int64_t dims_per_line(std::int64_t dstr) { return dstr < 64 && 64 % dstr == 0 ? 64 / dstr : 1; }

/// Requests the K rows' lines of keys[0 .. count). Keys-across K (key stride
/// 1): a run of 8 keys shares its lines, dim by dim; otherwise each key's row.
void prefetch_keys(const kv_source& kv, const char* const* keys, std::int64_t count, std::int64_t d) {
  const std::int64_t es = convert::size_of(kv.type);
  if (kv.ks[1] != 1 || kv.ks[3] == 1) return prefetch_rows(keys, count, d * kv.ks[3] * es);
  const std::int64_t dstr = kv.ks[3] * es, every = dims_per_line(dstr);
  for (std::int64_t t = 0; t < count; t += 8)
    for (std::int64_t dd = 0; dd < d; dd += every) simd::prefetch(keys[t] + dd * dstr);
}

/// Addresses of K and V rows j0 .. j0 + count - 1 of the unit's KV head.
inline void unit_runner::locate(const unit_rows& ur, std::int64_t j0, std::int64_t count, const char** k, const char** v) const {
  const std::int64_t esize = convert::size_of(p_.kv.type);
  const row_walk kw{static_cast<const char*>(p_.kv.k), &p_.kv.ks, p_.kv.k_page_stride, esize};
  row_walk vw{static_cast<const char*>(p_.kv.v), &p_.kv.vs, p_.kv.v_page_stride, esize};
  if (ATTNIMPL_MUTANT(v_uses_k_strides)) vw = {vw.base, &p_.kv.ks, p_.kv.k_page_stride, esize};
  row_addresses(p_.kv, kw, ur.b, load_head(ur), j0, count, k);
  row_addresses(p_.kv, vw, ur.b, load_head(ur), j0, count, v);
}

/// K block [0, kpack) (rows at ws_.krows) transposed to f32 kt[d][j], zero
/// past kpack: nothing past what some row sees is read.
inline void unit_runner::pack_k(std::int64_t kpack) {
  const std::int64_t d = p_.dims.d;
  const std::int64_t esize = convert::size_of(p_.kv.type);
  const char* const* krows = ws_.krows.data();
  float* kt = ws_.kt.data();
  float* tmp = ws_.tmp.data();
  std::int64_t jj = 0;
  if (p_.kv.ks[1] == 1 && p_.kv.ks[3] != 1) {
    // Keys-across K (the cache's pages): a run of 8 keys is 8 lanes already
    // (key_group gathers the groups that are not one run, zero past kpack).
    char* gather = reinterpret_cast<char*>(ws_.kgather.data());
    for (; jj < kpack; jj += 8) {
      std::int64_t stride = 0;
      const char* group = key_group(jj, kpack, gather, stride);
      for (std::int64_t dd = 0; dd < d; ++dd)
        simd::store(kt + dd * g_.k_tile8 + jj, simd::load8(group + dd * stride, p_.kv.type));
    }
  }
  if (p_.kv.ks[3] == 1) {
    // 8 keys x 8 dims at a time: convert to f32 lanes, transpose in registers.
    const dtype t_kv = p_.kv.type;
    for (; jj + 8 <= kpack; jj += 8) {
      const char* const* rows = krows + jj;
      const std::int64_t dd = transpose_rows(rows, t_kv, esize, d, kt + jj, g_.k_tile8);
      if (dd < d) {
        for (int t = 0; t < 8; ++t) {
          convert::load_row(tmp, rows[t] + dd * esize, t_kv, 1, d - dd);
          for (std::int64_t x = dd; x < d; ++x) kt[x * g_.k_tile8 + jj + t] = tmp[x - dd];
        }
      }
    }
  }
  for (; jj < kpack; ++jj) {
    convert::load_row(tmp, krows[jj], p_.kv.type, p_.kv.ks[3], d);
    for (std::int64_t dd = 0; dd < d; ++dd) kt[dd * g_.k_tile8 + jj] = tmp[dd];
  }
  for (std::int64_t dd = 0; dd < d; ++dd) std::fill(kt + dd * g_.k_tile8 + kpack, kt + (dd + 1) * g_.k_tile8, 0.0f);
}

/// Points vrows at V rows [0, kpack); returns the storage type they hold.
/// Few rows (decode): the caller's rows are used in place, read and widened
/// to f32 in registers once (bf16/f16 too). Many rows: V is copied to a
/// contiguous f32 block, since the P.V kernel walks it once per row group
/// and the caller's rows may sit pages apart (TLB).
inline dtype unit_runner::pack_v(const unit_rows& ur, std::int64_t kpack) {
  const std::int64_t d = p_.dims.d, dv = p_.dims.dv;
  const bool v_in_place = ur.rows <= 16 && p_.kv.vs[3] == 1 && dv % 8 == 0 && !ATTNIMPL_MUTANT(dv_equals_d);
  if (v_in_place) {
    std::copy(ws_.vsrc.data(), ws_.vsrc.data() + kpack, ws_.vrows.data());
    return p_.kv.type;
  }
  for (std::int64_t jj = 0; jj < kpack; ++jj) {
    float* vrow = ws_.vp.data() + jj * g_.dv8;
    convert::load_row(vrow, ws_.vsrc[jj], p_.kv.type, ATTNIMPL_MUTANT(v_uses_k_strides) ? p_.kv.ks[3] : p_.kv.vs[3],
                      ATTNIMPL_MUTANT(dv_equals_d) ? std::min(d, dv) : dv);  // mutant: the value loop runs to D
    std::fill(vrow + (ATTNIMPL_MUTANT(dv_equals_d) ? std::min(d, dv) : dv), vrow + g_.dv8, 0.0f);
    ws_.vrows[jj] = reinterpret_cast<const char*>(vrow);
  }
  return dtype::f32;
}

/// Keys j .. j + 7 of the block (those below kpack) with K stored
/// keys-across: where they are one run (key stride 1, same page) their
/// element dd is at the returned pointer + dd * stride; otherwise they are
/// copied there first, lanes past kpack 0.
inline const char* unit_runner::key_group(std::int64_t j, std::int64_t kpack, char* gather, std::int64_t& stride) const {
  const std::int64_t es = convert::size_of(p_.kv.type), dstr = p_.kv.ks[3] * es;
  const char* first = ws_.krows[j];
  bool run = j + 8 <= kpack;
  for (std::int64_t t = 1; run && t < 8; ++t) run = ws_.krows[j + t] == first + t * es;
  if (run) {
    stride = dstr;
    return first;
  }
  const std::int64_t d = p_.dims.d;
  std::fill(gather, gather + d * 8 * es, char{0});
  for (std::int64_t t = 0; t < 8 && j + t < kpack; ++t)
    for (std::int64_t dd = 0; dd < d; ++dd) std::copy_n(ws_.krows[j + t] + dd * dstr, es, gather + (dd * 8 + t) * es);
  stride = 8 * es;
  return gather;
}

}  // namespace
}  // namespace attnimpl::engine
