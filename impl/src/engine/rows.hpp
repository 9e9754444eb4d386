// Query rows: a unit's rows and scaled Q, which keys of a block each row
// sees (causal, windows, chunks, mask, bias), and the score variants of a row.
// Part of engine/kernel.hpp, included there only: everything stays in its anonymous
// namespace (one translation unit, the same inlining as one file).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "../convert.hpp"
#include "../mutation.hpp"
#include "../simd.hpp"
#include "unit_runner.hpp"

namespace attnimpl::engine {
namespace {

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

}  // namespace
}  // namespace attnimpl::engine
