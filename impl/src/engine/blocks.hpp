// Query rows and key blocks: a unit's scaled Q, which keys of a block each row
// sees, the K and V rows' addresses (paged caches too), packing, and the
// scores Q K^T (direct from the caller's rows, or from a transposed block).
// Part of engine/kernel.hpp, included there only: everything stays in its anonymous
// namespace (one translation unit, the same inlining as one file).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "../convert.hpp"
#include "../micro_kernels.hpp"
#include "../mutation.hpp"
#include "../simd.hpp"
#include "unit_runner.hpp"

namespace attnimpl::engine {
namespace {

/// kt[dd][t] = row t's element dd for 8 rows and dd < d rounded down to 8;
/// returns how many dims it did. Everything by value: vector stores may alias
/// anything, so members would be reloaded after each one.
std::int64_t transpose_rows(const char* const* rows_in, dtype t_kv, std::int64_t esize, std::int64_t d, float* kt,
                            std::int64_t ld) {
  const char* r0 = rows_in[0];
  const char* r1 = rows_in[1];
  const char* r2 = rows_in[2];
  const char* r3 = rows_in[3];
  const char* r4 = rows_in[4];
  const char* r5 = rows_in[5];
  const char* r6 = rows_in[6];
  const char* r7 = rows_in[7];
  std::int64_t dd = 0;
  for (; dd + 8 <= d; dd += 8) {
    const std::int64_t at = dd * esize;
    simd::vf r[8] = {simd::load8(r0 + at, t_kv), simd::load8(r1 + at, t_kv), simd::load8(r2 + at, t_kv),
                     simd::load8(r3 + at, t_kv), simd::load8(r4 + at, t_kv), simd::load8(r5 + at, t_kv),
                     simd::load8(r6 + at, t_kv), simd::load8(r7 + at, t_kv)};
    simd::transpose8(r);
    float* out = kt + dd * ld;
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) simd::store(out + t * ld, r[t]);
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
    const char* at = w.base + (page * w.page_stride + slot * s[1] + g * s[2]) * w.esize;
    for (std::int64_t x = 0; x < run; ++x) out[t + x] = at + x * step;
    t += run;
    j += run;
  }
}

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

/// Whether any of rows r0 .. r0 + nr - 1 sees a key of the block.
inline bool unit_runner::sees_any(std::int64_t r0, std::int64_t nr) const {
  for (std::int64_t r = r0; r < r0 + nr; ++r)
    if (ws_.kind[r] != row_kind::none) return true;
  return false;
}

/// Fixes the rows of unit u, their visibility limits, and packs scaled Q.
inline unit_rows unit_runner::setup(std::int64_t u) {
  unit_rows ur;
  // Causal: each (batch, KV head) takes its last query tile (the most keys)
  // first, so the threads' last units are their smallest.
  const std::int64_t qt = p_.causal ? g_.q_tiles - 1 - u % g_.q_tiles : u % g_.q_tiles;
  const std::int64_t bg = u / g_.q_tiles;
  ur.kv_head = bg % p_.dims.hkv;
  ur.b = bg / p_.dims.hkv;
  ur.i0 = qt * g_.q_tile;
  const std::int64_t positions = std::min(g_.q_tile, p_.dims.lq - ur.i0);
  ur.rows = positions * g_.group;
  ur.keys = p_.key_len ? p_.key_len[ur.b] : p_.dims.lk;
  if (ATTNIMPL_MUTANT(padding_off_by_one) && p_.key_len) ur.keys = std::min(ur.keys + 1, p_.dims.lk);  // j <= n[b]
  if (ATTNIMPL_MUTANT(padding_uses_first_length) && p_.key_len) ur.keys = p_.key_len[0];
  const std::int64_t qsize = convert::size_of(p_.q.type);
  std::int64_t min_lo = std::numeric_limits<std::int64_t>::max();
  for (std::int64_t r = 0; r < ur.rows; ++r) {
    // Rows of one position are adjacent: in decode and on the causal
    // diagonal they share visibility, which keeps the fast paths busy.
    const std::int64_t i = ur.i0 + r / g_.group;
    std::int64_t h = ur.kv_head * g_.group + r % g_.group;
    if (ATTNIMPL_MUTANT(gqa_modulo)) h = (r % g_.group) * p_.dims.hkv + ur.kv_head;  // h % Hkv == kv_head
    std::int64_t pos = ur.keys - p_.dims.lq + i;
    if (ATTNIMPL_MUTANT(ragged_causal_total)) pos += p_.pos_shift;  // aligned to total_k - total_q
    if (ATTNIMPL_MUTANT(causal_top_left)) pos = i;
    if (ATTNIMPL_MUTANT(decode_position)) pos = p_.dims.lk - p_.dims.lq + i;  // the cache passes its capacity as lk
    bool causal = p_.causal;
    if (ATTNIMPL_MUTANT(causal_dropped_chunk)) causal = causal && p_.dims.lq == p_.dims.lk;
    std::int64_t hi = causal ? std::min(ur.keys, pos + 1) : ur.keys;
    if (ATTNIMPL_MUTANT(causal_no_diagonal)) hi = causal ? std::min(ur.keys, pos) : ur.keys;
    hi = std::max<std::int64_t>(hi, 0);
    // Windows and chunks (contract 1.1): keys [lo, hi) at most; none when empty.
    std::int64_t lo = 0;
    const variants& var = p_.var;
    const bool window = !ATTNIMPL_MUTANT(window_ignored);
    if (var.window_left >= 0 && window)
      lo = std::max(lo, pos - var.window_left - (ATTNIMPL_MUTANT(window_left_off_by_one) ? 1 : 0));
    if (var.window_right >= 0 && window && !ATTNIMPL_MUTANT(window_right_dropped))
      hi = std::min(hi, pos + var.window_right + (ATTNIMPL_MUTANT(window_right_off_by_one) ? 2 : 1));
    if (var.chunk > 0 && !ATTNIMPL_MUTANT(chunk_ignored)) {
      const std::int64_t c = var.chunk;
      // mutant: the chunk of pos - 1, so a chunk's first position joins the previous chunk
      const std::int64_t cp = ATTNIMPL_MUTANT(chunk_off_by_one) ? pos - 1 : pos;
      const std::int64_t start = (cp >= 0 ? cp / c : -((-cp + c - 1) / c)) * c;  // floor(pos / c) * c
      lo = std::max(lo, start);
      hi = std::min(hi, start + c);
    }
    if (hi <= lo) hi = lo = 0;
    ws_.lo[r] = lo;
    ws_.apos[r] = pos;
    if (hi > 0) min_lo = std::min(min_lo, lo);
    ws_.hi[r] = hi;
    ws_.head[r] = h;
    ws_.pos[r] = i;
    ur.max_hi = std::max(ur.max_hi, hi);
    if (ATTNIMPL_MUTANT(causal_unit_stops_at_first_row) && r > 0) ur.max_hi = ws_.hi[0];
    float* qrow = ws_.qp.data() + r * p_.dims.d;
    if (hi == 0) continue;  // sees nothing: its Q is never read
    const char* src =
        static_cast<const char*>(p_.q.data) + (ur.b * p_.q.stride[0] + i * p_.q.stride[1] + h * p_.q.stride[2]) * qsize;
    convert::load_row(qrow, src, p_.q.type, p_.q.stride[3], p_.dims.d);
    for (std::int64_t dd = 0; dd < p_.dims.d; ++dd) qrow[dd] *= p_.scale;
    if (ATTNIMPL_MUTANT(scale_dropped)) convert::load_row(qrow, src, p_.q.type, p_.q.stride[3], p_.dims.d);  // unscaled
    if (ATTNIMPL_MUTANT(scale_model_dim))  // 1/sqrt(Hq*D) where the caller's 1/sqrt(D) was meant
      for (std::int64_t dd = 0; dd < p_.dims.d; ++dd) qrow[dd] /= std::sqrt(static_cast<float>(p_.dims.hq));
    if (ATTNIMPL_MUTANT(head_dim_tail)) std::fill(qrow + p_.dims.d / 8 * 8, qrow + p_.dims.d, 0.0f);  // dims past the last 8
  }
  ur.min_lo = min_lo == std::numeric_limits<std::int64_t>::max() ? 0 : min_lo;
  return ur;
}

/// Sets kind/vis of every row for block [j0, j0 + kc); returns how many
/// leading keys of the block any row sees (0: skip the block).
inline std::int64_t unit_runner::classify(const unit_rows& ur, std::int64_t j0, std::int64_t kc) {
  std::int64_t kpack = 0;
  for (std::int64_t r = 0; r < ur.rows; ++r) {
    std::uint8_t* vis = ws_.vis.data() + r * g_.k_tile8;
    std::fill(vis, vis + g_.k_tile8, std::uint8_t{0});
    const std::int64_t cnt = std::clamp<std::int64_t>(ws_.hi[r] - j0, 0, kc);
    const std::int64_t from = std::clamp<std::int64_t>(ws_.lo[r] - j0, 0, cnt);  // window, chunk
    std::int64_t allowed = 0, last = 0;
    // mutant: a paged decode step skips slot 0 of every page after the first
    const bool drop_first_slot = ATTNIMPL_MUTANT(paged_decode_first_slot) && p_.kv.table && p_.dims.lq == 1;
    if (!p_.mask.data && !p_.var.bias.data && !drop_first_slot) {
      std::fill(vis + from, vis + cnt, std::uint8_t{1});
      allowed = cnt - from;
      last = allowed > 0 ? cnt : 0;
    } else {
      const std::uint8_t* mrow = nullptr;
      if (p_.mask.data)
        mrow = p_.mask.data + ur.b * p_.mask.stride[0] +
               (ATTNIMPL_MUTANT(mask_head_uses_kv_head) ? ur.kv_head : ws_.head[r]) * p_.mask.stride[1] +
               ws_.pos[r] * p_.mask.stride[2];
      const float* bias = bias_of(ur, r, j0, from, cnt);
      std::int64_t jj = from;
      if (!mrow && bias && !drop_first_slot) {
        // Bias only: 8 entries tested at a time, most groups hold no -inf.
        for (; jj + 8 <= cnt; jj += 8) {
          const int masked = simd::neg_inf_lanes(bias + jj);
          for (int t = 0; t < 8; ++t) vis[jj + t] = static_cast<std::uint8_t>(((masked >> t) & 1) ^ 1);
          if (masked == 0xff) continue;
          allowed += 8 - __builtin_popcount(static_cast<unsigned>(masked));
          last = jj + 8 - (__builtin_clz(static_cast<unsigned>(~masked & 0xff)) - 24);
        }
      }
      for (; jj < cnt; ++jj) {
        if (drop_first_slot && j0 + jj > 0 && (j0 + jj) % p_.kv.page_size == 0) continue;
        if (mrow && (mrow[(j0 + jj) * p_.mask.stride[3]] != 0) == ATTNIMPL_MUTANT(mask_polarity)) continue;
        if (bias && bias[jj] == neg_inf) continue;  // a -inf bias entry masks its key, as a false mask entry does
        vis[jj] = 1;
        ++allowed;
        last = jj + 1;
      }
    }
    std::int64_t reach = last;  // lanes [0, reach) hold every key the row sees
    // Lanes past the sequence's last key (zero K, never packed V) taken as keys.
    if (ATTNIMPL_MUTANT(tail_tile_unmasked) && cnt == kc && j0 + kc == ur.keys) {
      std::fill(vis + kc, vis + g_.k_tile, std::uint8_t{1});
      reach = g_.k_tile;
    }
    ws_.reach[r] = reach;
    ws_.kind[r] = allowed == 0 ? row_kind::none : allowed == kc ? row_kind::all : row_kind::partial;
    std::int64_t prefix = allowed == cnt ? cnt : 0;  // without holes the visible keys are [0, cnt)
    if (prefix == 0)
      while (prefix < cnt && vis[prefix]) ++prefix;
    if (ATTNIMPL_MUTANT(prefix_ignores_holes)) prefix = allowed;
    ws_.prefix[r] = prefix;
    if (prefix == 0 && allowed > 0) {
      std::int64_t first = from;
      while (!vis[first]) ++first;
      std::int64_t run = first;
      while (run < cnt && vis[run]) ++run;
      ws_.first[r] = first;
      ws_.run[r] = run;
    }
    kpack = std::max(kpack, ATTNIMPL_MUTANT(kpack_counts_visible) ? allowed : last);
  }
  return kpack;
}

/// Row r's bias entries of block j0 as f32, indexed by lane (null without a
/// bias); lanes [0, ws_.blanes[r]) may be read, those outside [from, to)
/// hold any value (masked). An f32 bias contiguous in the key dim is read in
/// place (lanes [0, to): keys below the row's limit) and the row's entries of
/// the next block are requested: rows of a unit sit a bias row apart, more
/// streams than the hardware prefetcher follows. Any other bias is converted
/// into the row's lane buffer.
inline const float* unit_runner::bias_of(const unit_rows& ur, std::int64_t r, std::int64_t j0, std::int64_t from,
                                         std::int64_t to) {
  const bias_in& bias = p_.var.bias;
  if (!bias.data) return nullptr;
  if (ATTNIMPL_MUTANT(bias_ignored)) return ws_.brow[r] = nullptr;
  const std::int64_t es = convert::size_of(bias.type);
  const std::int64_t head = ATTNIMPL_MUTANT(bias_broadcast_wrong) ? ur.kv_head : ws_.head[r];  // the KV head's bias row
  const char* at =
      static_cast<const char*>(bias.data) +
      (ur.b * bias.stride[0] + head * bias.stride[1] + ws_.pos[r] * bias.stride[2] + (j0 + from) * bias.stride[3]) * es;
  if (bias.type == dtype::f32 && bias.stride[3] == 1) {
    const float* row = reinterpret_cast<const float*>(at) - from;
    const std::int64_t ahead = std::min(g_.k_tile, ws_.hi[r] - j0 - g_.k_tile);
    if (ahead > 0) {
      const char* next = reinterpret_cast<const char*>(row + g_.k_tile);
      const char* end = next + ahead * 4;
      for (const char* line = next; line < end; line += 64) simd::prefetch(line);
      simd::prefetch(end - 1);  // a row need not start on a line
    }
    ws_.blanes[r] = to;
    return ws_.brow[r] = row;
  }
  float* out = ws_.bias.data() + r * g_.k_tile8;
  if (to > from) convert::load_row(out + from, at, bias.type, bias.stride[3], to - from);
  ws_.blanes[r] = g_.k_tile8;
  return ws_.brow[r] = out;
}

/// Softcap, ALiBi and bias of row r's scores of block j0 (contract 1.1:
/// S = softcap(x) + m_h (j - p) + Bias), applied by the softmax's max pass
/// to the lanes it loads (score_terms). The same lane operations on every
/// instruction set; 16 lanes at a time on AVX-512.
inline score_terms unit_runner::terms_of(std::int64_t r, std::int64_t j0) const {
  const variants& var = p_.var;
  score_terms t;
  t.softcap = var.softcap > 0.0f && !ATTNIMPL_MUTANT(softcap_ignored);
  t.cap_first = !ATTNIMPL_MUTANT(softcap_after_bias);  // mutant: the cap taken of x + ALiBi + bias
  t.alibi = var.alibi && !ATTNIMPL_MUTANT(alibi_ignored);
  t.cap = var.softcap;
  std::int64_t slope_head = ws_.head[r];
  if (ATTNIMPL_MUTANT(alibi_wrong_head)) slope_head = (slope_head + 1) % p_.dims.hq;  // head h + 1's slope
  t.slope = var.alibi ? var.alibi[slope_head] : 0.0f;
  t.rel = j0 - ws_.apos[r];  // j - p of lane 0
  t.bias = var.bias.data ? ws_.brow[r] : nullptr;
  t.bias_lanes = t.bias ? ws_.blanes[r] : 0;
  return t;
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

/// Scores of keys [0, kpack) straight from the caller's K rows: 8 keys x 8
/// dims loaded, widened and transposed in registers, then one FMA chain over
/// d per score, exactly as the packed path computes it (same bits). Each K
/// byte is read once for all the unit's rows; while a group of 8 keys
/// computes, the same keys of the next block are requested.
inline void unit_runner::direct_scores(const unit_rows& ur, std::int64_t kpack, std::int64_t next) {
  switch (p_.kv.type) {
    case dtype::f32: direct_scores_as<dtype::f32>(ur, kpack, next); break;
    case dtype::f16: direct_scores_as<dtype::f16>(ur, kpack, next); break;
    case dtype::bf16: direct_scores_as<dtype::bf16>(ur, kpack, next); break;
  }
}

template <dtype T>
inline void unit_runner::direct_scores_as(const unit_rows& ur, std::int64_t kpack, std::int64_t next) {
  const std::int64_t esize = convert::size_of(T);
  const std::int64_t kbytes = p_.dims.d * esize, vbytes = p_.dims.dv * p_.kv.vs[3] * esize;
  const char* zero = reinterpret_cast<const char*>(ws_.zero.data());
  for (std::int64_t jj = 0; jj < kpack; jj += 8) {
    const char* rows[8];
    for (std::int64_t t = 0; t < 8; ++t) rows[t] = jj + t < kpack ? ws_.krows[jj + t] : zero;  // lanes past kpack: K = 0
    // The first pass spreads the requests over its loads: a burst of a
    // hundred prefetches fills the load queue and stalls the arithmetic
    // that could run meanwhile.
    prefetch_set pf{ws_.knext.data() + jj, ws_.vnext.data() + jj, std::clamp<std::int64_t>(next - jj, 0, 8), kbytes, vbytes};
    for (std::int64_t r0 = 0; r0 < ur.rows; r0 += 4) {
      const std::int64_t nr = std::min<std::int64_t>(4, ur.rows - r0);
      if (!sees_any(r0, nr)) continue;
      switch (nr) {
        case 1: score_group<1, T>(rows, r0, jj, pf); break;
        case 2: score_group<2, T>(rows, r0, jj, pf); break;
        case 3: score_group<3, T>(rows, r0, jj, pf); break;
        default: score_group<4, T>(rows, r0, jj, pf); break;
      }
      pf.count = 0;
    }
    prefetch_rows(pf.k, pf.count, kbytes);  // no pass ran
    prefetch_rows(pf.v, pf.count, vbytes);
  }
}

template <int NR, dtype T>
inline void unit_runner::score_group(const char* const rows_in[8], std::int64_t r0, std::int64_t jj, const prefetch_set& pf) {
  constexpr std::int64_t es = T == dtype::f32 ? 4 : 2;
  const std::int64_t d = p_.dims.d, ld = g_.k_tile8;  // locals: vector stores may alias members
  const float* q = ws_.qp.data() + r0 * d;
  float* s = score_row(r0) + jj;
  const char* r0p = rows_in[0];
  const char* r1p = rows_in[1];
  const char* r2p = rows_in[2];
  const char* r3p = rows_in[3];
  const char* r4p = rows_in[4];
  const char* r5p = rows_in[5];
  const char* r6p = rows_in[6];
  const char* r7p = rows_in[7];
  simd::vf acc[NR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) acc[r] = simd::zero();
  const std::int64_t pf_count = pf.count, vbytes = pf.vbytes;
  const char* const* pk = pf.k;
  const char* const* pv = pf.v;
  std::int64_t dd = 0;
  for (; dd + 8 <= d; dd += 8) {
    const std::int64_t at = dd * es;
    if (at % 64 == 0) {
      for (std::int64_t t = 0; t < pf_count; ++t) simd::prefetch(pk[t] + at);
    } else if (at % 64 == 32 && at - 32 < vbytes) {
      for (std::int64_t t = 0; t < pf_count; ++t) simd::prefetch(pv[t] + at - 32);
    }
    simd::vf k[8] = {simd::load8(r0p + at, T), simd::load8(r1p + at, T), simd::load8(r2p + at, T), simd::load8(r3p + at, T),
                     simd::load8(r4p + at, T), simd::load8(r5p + at, T), simd::load8(r6p + at, T), simd::load8(r7p + at, T)};
    simd::transpose8(k);
#pragma GCC unroll 8
    for (int x = 0; x < 8; ++x)
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) acc[r] = simd::fmadd(simd::broadcast(q + r * d + dd + x), k[x], acc[r]);
  }
  // Lines the dim loop did not reach: K's tail, V's rest (dv > d, or d % 16).
  for (std::int64_t at = (dd * es + 63) / 64 * 64; at < pf.kbytes; at += 64)
    for (std::int64_t t = 0; t < pf_count; ++t) simd::prefetch(pk[t] + at);
  for (std::int64_t at = (dd * es + 31) / 64 * 64; at < vbytes; at += 64)
    for (std::int64_t t = 0; t < pf_count; ++t) simd::prefetch(pv[t] + at);
  for (; dd < d; ++dd) {
    const simd::vf k = simd::setr(element<T>(r0p, dd), element<T>(r1p, dd), element<T>(r2p, dd), element<T>(r3p, dd),
                                  element<T>(r4p, dd), element<T>(r5p, dd), element<T>(r6p, dd), element<T>(r7p, dd));
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) acc[r] = simd::fmadd(simd::broadcast(q + r * d + dd), k, acc[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) simd::store(s + r * ld, acc[r]);
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

inline void unit_runner::across_scores(const unit_rows& ur, std::int64_t kpack, std::int64_t next) {
  switch (p_.kv.type) {
    case dtype::f32: across_scores_as<dtype::f32>(ur, kpack, next); break;
    case dtype::f16: across_scores_as<dtype::f16>(ur, kpack, next); break;
    case dtype::bf16: across_scores_as<dtype::bf16>(ur, kpack, next); break;
  }
}

/// Scores of keys [0, kpack) from K stored keys-across: element dd of 8
/// consecutive keys is one vector, so each score is the same FMA chain over
/// d as every other path (same bits) with no transpose. 16 keys per pass:
/// 8 accumulators for 4 rows, enough independent chains to keep both FMA
/// units busy (8 keys leave the chain's latency exposed). While a pass
/// computes, the same keys of the next block are requested, K a line per
/// dim, V a line per dim.
template <dtype T>
inline void unit_runner::across_scores_as(const unit_rows& ur, std::int64_t kpack, std::int64_t next) {
  constexpr std::int64_t es = T == dtype::f32 ? 4 : 2;
  const std::int64_t dstr = p_.kv.ks[3] * es;
  const std::int64_t vbytes = p_.dims.dv * p_.kv.vs[3] * es;
  const std::int64_t k_every = dims_per_line(dstr);
  char* gather = reinterpret_cast<char*>(ws_.kgather.data());
  char* gather1 = gather + 8 * p_.dims.d * es;
  for (std::int64_t jj = 0; jj < kpack; jj += 16) {
    std::int64_t sa = 0, sb = 0;
    const char* a = key_group(jj, kpack, gather, sa);
    const bool two = jj + 8 < kpack;
    const char* b = two ? key_group(jj + 8, kpack, gather1, sb) : nullptr;
    across_prefetch pf{nullptr, nullptr, k_every, ws_.vnext.data() + jj, std::clamp<std::int64_t>(next - jj, 0, 16), vbytes};
    if (jj < next) {
      pf.k0 = ws_.knext[jj];
      if (jj + 8 < next) {
        const char* k1 = ws_.knext[jj + 8];
        const bool same_lines = k1 == pf.k0 + 8 * es && reinterpret_cast<std::uintptr_t>(pf.k0) % 64 + 16 * es <= 64;
        pf.k1 = same_lines ? nullptr : k1;
      }
    }
    for (std::int64_t r0 = 0; r0 < ur.rows; r0 += 4) {
      const std::int64_t nr = std::min<std::int64_t>(4, ur.rows - r0);
      if (!sees_any(r0, nr)) continue;
#define ATTNIMPL_ACROSS(NR)                              \
  if (two)                                               \
    across_group<NR, T, true>(a, sa, b, sb, r0, jj, pf); \
  else                                                   \
    across_group<NR, T, false>(a, sa, a, sa, r0, jj, pf);
      switch (nr) {
        case 1: ATTNIMPL_ACROSS(1) break;
        case 2: ATTNIMPL_ACROSS(2) break;
        case 3: ATTNIMPL_ACROSS(3) break;
        default: ATTNIMPL_ACROSS(4) break;
      }
#undef ATTNIMPL_ACROSS
      pf.k0 = pf.k1 = nullptr;  // requested by the first pass
      pf.v_rows = 0;
    }
    if (pf.k0) prefetch_keys(p_.kv, ws_.knext.data() + jj, std::min<std::int64_t>(16, next - jj), p_.dims.d);  // no pass ran
    prefetch_rows(pf.v, pf.v_rows, vbytes);
  }
  // Keys of the next block past this block's last pass.
  const std::int64_t from = std::min((kpack + 15) / 16 * 16, next);
  prefetch_keys(p_.kv, ws_.knext.data() + from, next - from, p_.dims.d);
  prefetch_rows(ws_.vnext.data() + from, next - from, vbytes);
}

template <int NR, dtype T, bool TWO>
inline void unit_runner::across_group(const char* a, std::int64_t sa, const char* b, std::int64_t sb, std::int64_t r0,
                                      std::int64_t jj, const across_prefetch& pf) {
  const std::int64_t d = p_.dims.d, ld = g_.k_tile8;  // locals: vector stores may alias members
  const float* q = ws_.qp.data() + r0 * d;
  float* s = score_row(r0) + jj;
  const char* const k0 = pf.k0;
  const char* const k1 = pf.k1;
  const std::int64_t k_mask = pf.k_every - 1, kstr = p_.kv.ks[3] * convert::size_of(T);  // k_every: a power of two
  const char* const* v = pf.v;
  const std::int64_t v_rows = pf.v_rows, vbytes = pf.vbytes;
  std::int64_t vt = 0, vx = 0;
  simd::vf acc0[NR], acc1[NR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) acc0[r] = acc1[r] = simd::zero();
  for (std::int64_t dd = 0; dd < d; ++dd) {
    if (k0 && (dd & k_mask) == 0) {  // not dd % k_every: a division per dim cost a quarter of the loop
      simd::prefetch(k0 + dd * kstr);
      if (k1) simd::prefetch(k1 + dd * kstr);
    }
    if (vt < v_rows) {
      simd::prefetch(v[vt] + vx);
      vx += 64;
      if (vx >= vbytes) vx = 0, ++vt;
    }
    const simd::vf ka = simd::load8(a + dd * sa, T);
    if constexpr (TWO) {
      const simd::vf kb = simd::load8(b + dd * sb, T);
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) {
        const simd::vf qv = simd::broadcast(q + r * d + dd);
        acc0[r] = simd::fmadd(qv, ka, acc0[r]);
        acc1[r] = simd::fmadd(qv, kb, acc1[r]);
      }
    } else {
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) acc0[r] = simd::fmadd(simd::broadcast(q + r * d + dd), ka, acc0[r]);
    }
  }
  for (; vt < v_rows; ++vt, vx = 0)
    for (; vx < vbytes; vx += 64) simd::prefetch(v[vt] + vx);
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    simd::store(s + r * ld, acc0[r]);
    if constexpr (TWO) simd::store(s + r * ld + 8, acc1[r]);
  }
}

template <int NR>
inline void unit_runner::score_rows(std::int64_t r0) {
  const std::int64_t d = p_.dims.d, ld = g_.k_tile8;
  const float* q = ws_.qp.data() + r0 * d;
  float* s = score_row(r0);
  // Columns past every row's last visible key (the causal diagonal) are not
  // computed: the softmax selects -inf there from the visibility flags.
  // Nor those before every row's first visible key (a window's or chunk's
  // first block): each column is its own FMA chain, skipping one changes no other.
  std::int64_t cols = 0, c = g_.k_tile8;
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    cols = std::max(cols, ws_.reach[r0 + r]);
    if (ws_.kind[r0 + r] != row_kind::none) c = std::min(c, ws_.prefix[r0 + r] > 0 ? 0 : ws_.first[r0 + r]);
  }
  cols = round8(cols);
  c = std::min(c / 8 * 8, cols);
#if ATTNIMPL_ISA_AVX512
  // 32 columns (two 16-lane registers) per row: 12 accumulators of the 32 registers.
  for (; c + 32 <= cols; c += 32) micro::scores<NR, 4>(q, d, ws_.kt.data() + c, ld, d, s + c, ld);
#endif
  for (; c + 16 <= cols; c += 16) micro::scores<NR, 2>(q, d, ws_.kt.data() + c, ld, d, s + c, ld);
  if (c < cols) micro::scores<NR, 1>(q, d, ws_.kt.data() + c, ld, d, s + c, ld);
}

inline void unit_runner::scores(row_range rr) {
  constexpr std::int64_t block = 6;
  for (std::int64_t r0 = rr.begin; r0 < rr.end; r0 += block) {
    const std::int64_t nr = std::min(block, rr.end - r0);
    if (!sees_any(r0, nr)) continue;
    switch (nr) {
      case 1: score_rows<1>(r0); break;
      case 2: score_rows<2>(r0); break;
      case 3: score_rows<3>(r0); break;
      case 4: score_rows<4>(r0); break;
      case 5: score_rows<5>(r0); break;
      default: score_rows<6>(r0); break;
    }
  }
}

}  // namespace
}  // namespace attnimpl::engine
