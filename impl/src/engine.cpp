// FlashAttention-2 style engine. A work unit is (batch, KV head, query tile):
// its rows are the G query heads of that KV head times q_tile positions, so
// each K/V block is packed once per group. Keys are walked in blocks at fixed
// absolute boundaries (multiples of k_tile from key 0) grouped in split
// chunks (multiples of split_keys); a row's arithmetic depends only on which
// keys it sees, never on the batch, Lq, the tile it shares or the threads.
#include "engine.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "convert.hpp"
#include "micro_kernels.hpp"
#include "mutation.hpp"
#include "simd.hpp"
#include "thread_pool.hpp"

namespace attnimpl::engine {
namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

std::int64_t round8(std::int64_t n) { return (n + 7) / 8 * 8; }

enum class row_kind : std::uint8_t { none, all, partial };

/// Sizes shared by every unit of one call.
struct geometry {
  std::int64_t group = 1;    // G
  std::int64_t q_tile = 1;   // query positions per unit
  std::int64_t rows = 1;     // G * q_tile
  std::int64_t q_tiles = 1;  // per (batch, KV head)
  std::int64_t units = 1;
  std::int64_t k_tile = 1, k_tile8 = 8;
  std::int64_t split = 1, chunks = 1;
  std::int64_t dv8 = 8;
};

/// Online-softmax state of every row of a unit over some key range.
struct row_state {
  float* m;    // running max (-inf: nothing seen)
  float* l;    // running sum of exp(s - m)
  float* acc;  // rows x dv8, unnormalized output
};

std::int64_t state_floats(const geometry& g) { return g.rows * (g.dv8 + 2); }

row_state view_state(float* base, const geometry& g) {
  return {base, base + g.rows, base + 2 * g.rows};
}

void reset_state(const row_state& st, const geometry& g, std::int64_t rows) {
  std::fill(st.m, st.m + rows, neg_inf);
  std::fill(st.l, st.l + rows, 0.0f);
  std::fill(st.acc, st.acc + rows * g.dv8, 0.0f);
}

/// Per-thread scratch, reused across calls (grows only).
struct workspace {
  std::vector<float> qp, kt, vp, s, tmp, chunk, total;
  std::vector<float> zero;  // d zeros: the K row of a padding lane, never written
  // Row addresses of the block's keys (K, and V where the caller stores it),
  // of the next block's (prefetch), and V row jj as the P.V kernel reads it
  // (the caller's row or its f32 copy in vp).
  std::vector<const char*> krows, vsrc, knext, vnext, vrows;
  std::vector<std::uint8_t> vis;
  std::vector<row_kind> kind;
  std::vector<std::int64_t> hi, head, pos, prefix, group_keys;

  void ensure(const problem& p, const geometry& g) {
    const auto grow = [](auto& v, std::int64_t n) {
      if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
    };
    grow(qp, g.rows * p.dims.d);
    grow(kt, p.dims.d * g.k_tile8);
    grow(vp, g.k_tile * g.dv8);
    grow(zero, p.dims.d);
    grow(krows, g.k_tile);
    grow(vsrc, g.k_tile);
    grow(knext, g.k_tile);
    grow(vnext, g.k_tile);
    grow(vrows, g.k_tile);
    grow(s, g.rows * g.k_tile8);
    grow(tmp, std::max(p.dims.d, g.dv8) + (ATTNIMPL_MUTANT(masked_row_mean) ? g.dv8 : 0));
    grow(chunk, state_floats(g));
    grow(total, state_floats(g));
    grow(vis, g.rows * g.k_tile8);
    grow(kind, g.rows);
    grow(hi, g.rows);
    grow(head, g.rows);
    grow(pos, g.rows);
    grow(prefix, g.rows);
    grow(group_keys, g.rows / 4 + 1);
  }
};

/// One work unit's fixed facts: where its rows are and what they may see.
struct unit_rows {
  std::int64_t b = 0, kv_head = 0, i0 = 0, rows = 0;
  std::int64_t keys = 0;      // keys that exist for this batch element (n[b])
  std::int64_t max_hi = 0;    // no row sees a key at or beyond this
};

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
    __m256 r[8] = {simd::load8(r0 + at, t_kv), simd::load8(r1 + at, t_kv), simd::load8(r2 + at, t_kv),
                   simd::load8(r3 + at, t_kv), simd::load8(r4 + at, t_kv), simd::load8(r5 + at, t_kv),
                   simd::load8(r6 + at, t_kv), simd::load8(r7 + at, t_kv)};
    simd::transpose8(r);
    float* out = kt + dd * ld;
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) _mm256_storeu_ps(out + t * ld, r[t]);
  }
  return dd;
}

/// How one (batch, KV head)'s rows of K or of V are addressed.
struct row_walk {
  const char* base;
  const strides4* stride;   // (batch, key, head, dim), elements
  std::int64_t page_stride; // elements between pages (paged caches)
  std::int64_t esize;
};

/// out[t] = address of key row j0 + t (t < count) of batch b, KV head g: one
/// block-table lookup per page run, where a per-key lookup costs a 64-bit
/// division per row (several hundred cycles a block; decode has nothing to hide it behind).
void row_addresses(const kv_source& kv, const row_walk& w, std::int64_t b, std::int64_t g, std::int64_t j0,
                   std::int64_t count, const char** out) {
  const strides4& s = *w.stride;
  const std::int64_t step = s[1] * w.esize;
  if (!kv.table) {
    const char* at = w.base + (b * s[0] + j0 * s[1] + g * s[2]) * w.esize;
    for (std::int64_t t = 0; t < count; ++t) out[t] = at + t * step;
    return;
  }
  for (std::int64_t t = 0, j = j0; t < count;) {
    const std::int64_t slot = j % kv.page_size;
    const std::int64_t run = std::min(kv.page_size - slot, count - t);
    const std::int64_t page = kv.table[b * kv.table_stride + j / kv.page_size];
    const char* at = w.base + (page * w.page_stride + slot * s[1] + g * s[2]) * w.esize;
    for (std::int64_t x = 0; x < run; ++x) out[t + x] = at + x * step;
    t += run;
    j += run;
  }
}

/// Element dd of a storage row, exactly, as f32.
template <dtype T>
float element(const char* row, std::int64_t dd) {
  if constexpr (T == dtype::f32) return reinterpret_cast<const float*>(row)[dd];
  else if constexpr (T == dtype::bf16) return convert::from_bf16(reinterpret_cast<const std::uint16_t*>(row)[dd]);
  else return convert::from_f16(reinterpret_cast<const std::uint16_t*>(row)[dd]);
}

/// Requests every cache line of rows[0 .. count), `bytes` long each. Rows of
/// a paged cache sit a page apart, where the hardware prefetcher stops.
void prefetch_rows(const char* const* rows, std::int64_t count, std::int64_t bytes) {
  for (std::int64_t t = 0; t < count; ++t)
    for (std::int64_t x = 0; x < bytes; x += 64) _mm_prefetch(rows[t] + x, _MM_HINT_T0);
}

class unit_runner {
 public:
  unit_runner(const problem& p, const geometry& g, workspace& ws) : p_(p), g_(g), ws_(ws) {}

  /// Fixes the rows of unit u, their visibility limits, and packs scaled Q.
  unit_rows setup(std::int64_t u) {
    unit_rows ur;
    const std::int64_t qt = u % g_.q_tiles;
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
    for (std::int64_t r = 0; r < ur.rows; ++r) {
      // Rows of one position are adjacent: in decode and on the causal
      // diagonal they share visibility, which keeps the fast paths busy.
      const std::int64_t i = ur.i0 + r / g_.group;
      std::int64_t h = ur.kv_head * g_.group + r % g_.group;
      if (ATTNIMPL_MUTANT(gqa_modulo)) h = (r % g_.group) * p_.dims.hkv + ur.kv_head;  // h % Hkv == kv_head
      std::int64_t pos = ur.keys - p_.dims.lq + i;
      if (ATTNIMPL_MUTANT(causal_top_left)) pos = i;
      if (ATTNIMPL_MUTANT(decode_position)) pos = p_.dims.lk - p_.dims.lq + i;  // the cache passes its capacity as lk
      bool causal = p_.causal;
      if (ATTNIMPL_MUTANT(causal_dropped_chunk)) causal = causal && p_.dims.lq == p_.dims.lk;
      std::int64_t hi = causal ? std::min(ur.keys, pos + 1) : ur.keys;
      if (ATTNIMPL_MUTANT(causal_no_diagonal)) hi = causal ? std::min(ur.keys, pos) : ur.keys;
      hi = std::max<std::int64_t>(hi, 0);
      ws_.hi[r] = hi;
      ws_.head[r] = h;
      ws_.pos[r] = i;
      ur.max_hi = std::max(ur.max_hi, hi);
      if (ATTNIMPL_MUTANT(causal_unit_stops_at_first_row) && r > 0) ur.max_hi = ws_.hi[0];
      float* qrow = ws_.qp.data() + r * p_.dims.d;
      if (hi == 0) continue;  // sees nothing: its Q is never read
      const char* src = static_cast<const char*>(p_.q.data) +
                        (ur.b * p_.q.stride[0] + i * p_.q.stride[1] + h * p_.q.stride[2]) * qsize;
      convert::load_row(qrow, src, p_.q.type, p_.q.stride[3], p_.dims.d);
      for (std::int64_t dd = 0; dd < p_.dims.d; ++dd) qrow[dd] *= p_.scale;
      if (ATTNIMPL_MUTANT(scale_dropped)) convert::load_row(qrow, src, p_.q.type, p_.q.stride[3], p_.dims.d);  // unscaled
      if (ATTNIMPL_MUTANT(scale_model_dim))  // 1/sqrt(Hq*D) where the caller's 1/sqrt(D) was meant
        for (std::int64_t dd = 0; dd < p_.dims.d; ++dd) qrow[dd] /= std::sqrt(static_cast<float>(p_.dims.hq));
      if (ATTNIMPL_MUTANT(head_dim_tail)) std::fill(qrow + p_.dims.d / 8 * 8, qrow + p_.dims.d, 0.0f);  // dims past the last 8
    }
    return ur;
  }

  /// Online softmax of the unit's rows over keys [c0, c1) into st.
  void chunk(const unit_rows& ur, std::int64_t c0, std::int64_t c1, const row_state& st) {
    reset_state(st, g_, ur.rows);
    std::int64_t end = std::min({c1, ur.max_hi, ur.keys});
    if (ATTNIMPL_MUTANT(split_boundary_key_dropped)) end = std::min({c1 - 1, ur.max_hi, ur.keys});
    for (std::int64_t j0 = c0; j0 < end; j0 += g_.k_tile) {
      const std::int64_t kc = std::min(g_.k_tile, end - j0);
      const std::int64_t kpack = classify(ur, j0, kc);
      if (kpack == 0) continue;
      locate(ur, j0, kpack, ws_.krows.data(), ws_.vsrc.data());
      // The next block may lie in the next chunk: the same unit reads it next
      // unless split-KV hands that chunk to another thread.
      const std::int64_t next =
          std::clamp<std::int64_t>(std::min(ur.max_hi, ur.keys) - j0 - g_.k_tile, 0, g_.k_tile);
      if (next > 0) locate(ur, j0 + g_.k_tile, next, ws_.knext.data(), ws_.vnext.data());
      const dtype vt = pack_v(ur, kpack);
      if (ur.rows <= direct_rows && p_.kv.ks[3] == 1) {
        direct_scores(ur, kpack, next);
      } else {
        pack_k(kpack);
        prefetch_rows(ws_.knext.data(), next, p_.dims.d * p_.kv.ks[3] * convert::size_of(p_.kv.type));
        prefetch_rows(ws_.vnext.data(), next, p_.dims.dv * p_.kv.vs[3] * convert::size_of(p_.kv.type));
        scores(ur);
      }
      softmax(ur, st);
      switch (vt) {
        case dtype::f32: weighted_values<dtype::f32>(ur, kpack, st); break;
        case dtype::f16: weighted_values<dtype::f16>(ur, kpack, st); break;
        case dtype::bf16: weighted_values<dtype::bf16>(ur, kpack, st); break;
      }
      if (ATTNIMPL_MUTANT(low_precision_acc))  // the accumulator kept in bf16
        for (std::int64_t x = 0; x < ur.rows * g_.dv8; ++x) st.acc[x] = convert::from_bf16(convert::to_bf16(st.acc[x]));
    }
  }

  /// Writes O and LSE of the unit's rows from a final state.
  void finish(const unit_rows& ur, const row_state& st) {
    const std::int64_t dv = p_.dims.dv;
    const std::int64_t osize = convert::size_of(p_.o.type);
    float* out = ws_.tmp.data();
    for (std::int64_t r = 0; r < ur.rows; ++r) {
      const std::int64_t h = ws_.head[r], i = ws_.pos[r];
      const float m = st.m[r];
      float lse = neg_inf;
      if (m == neg_inf && !ATTNIMPL_MUTANT(masked_row_nan)) {
        std::fill(out, out + dv, 0.0f);  // no visible key: O = 0, LSE = -inf
        if (ATTNIMPL_MUTANT(masked_row_mean)) mean_values(ur, out);  // what a finite -1e9 fill gives
        if (ATTNIMPL_MUTANT(empty_row_lse_zero)) lse = 0.0f;
      } else {
        const float* acc = st.acc + r * g_.dv8;
        float l_row = st.l[r];
        if (ATTNIMPL_MUTANT(softmax_wrong_axis)) l_row = query_axis_sum(ur, st, r);
        const __m256 l = _mm256_set1_ps(l_row);
        for (std::int64_t e = 0; e < g_.dv8; e += 8)
          _mm256_storeu_ps(out + e, _mm256_div_ps(_mm256_loadu_ps(acc + e), l));
        lse = m + std::log(st.l[r]);
        if (ATTNIMPL_MUTANT(lse_missing_max)) lse = std::log(st.l[r]);
      }
      char* dst = static_cast<char*>(p_.o.data) +
                  (ur.b * p_.o.stride[0] + i * p_.o.stride[1] + h * p_.o.stride[2]) * osize;
      convert::store_row(dst, p_.o.type, p_.o.stride[3], out, dv);
      if (p_.lse.data)
        p_.lse.data[ur.b * p_.lse.stride[0] + h * p_.lse.stride[1] + i * p_.lse.stride[2]] = lse;
    }
  }

  /// total <- merge(total, part) for every row, by LSE; fixed operation order.
  void fold(const unit_rows& ur, const row_state& total, const row_state& part, bool first) {
    for (std::int64_t r = 0; r < ur.rows; ++r) {
      float* ta = total.acc + r * g_.dv8;
      const float* pa = part.acc + r * g_.dv8;
      const float mp = part.m[r];
      if (first || total.m[r] == neg_inf) {
        total.m[r] = mp;
        total.l[r] = part.l[r];
        std::copy(pa, pa + g_.dv8, ta);
        continue;
      }
      if (mp == neg_inf) continue;
      const float mt = total.m[r];
      float mn = mp > mt ? mp : mt;
      if (ATTNIMPL_MUTANT(merge_min_not_max)) mn = mp < mt ? mp : mt;
      float a = simd::exp1(mt - mn), c = simd::exp1(mp - mn);
      if (ATTNIMPL_MUTANT(merge_unscaled)) a = c = 1.0f;
      const __m256 av = _mm256_set1_ps(a), cv = _mm256_set1_ps(c);
      for (std::int64_t e = 0; e < g_.dv8; e += 8)
        _mm256_storeu_ps(ta + e, _mm256_fmadd_ps(_mm256_loadu_ps(pa + e), cv,
                                                 _mm256_mul_ps(_mm256_loadu_ps(ta + e), av)));
      total.l[r] = std::fma(part.l[r], c, total.l[r] * a);
      total.m[r] = mn;
    }
  }

 private:
#ifdef ATTNIMPL_MUTATION
  /// mean(V) over the keys of the batch element (mutant masked_row_mean).
  void mean_values(const unit_rows& ur, float* out) {
    float* row = ws_.tmp.data() + g_.dv8;
    for (std::int64_t j = 0; j < ur.keys; ++j) {
      convert::load_row(row, static_cast<const char*>(p_.kv.v) + p_.kv.v_offset(ur.b, ur.kv_head, j) * convert::size_of(p_.kv.type),
                        p_.kv.type, p_.kv.vs[3], p_.dims.dv);
      for (std::int64_t e = 0; e < p_.dims.dv; ++e) out[e] += row[e] / static_cast<float>(ur.keys);
    }
  }
  /// Row r's sum taken over the unit's query positions of its head (mutant softmax_wrong_axis).
  float query_axis_sum(const unit_rows& ur, const row_state& st, std::int64_t r) {
    float sum = 0.0f;
    for (std::int64_t x = r % g_.group; x < ur.rows; x += g_.group)
      if (st.m[x] != neg_inf) sum += st.l[x] * simd::exp1(st.m[x] - st.m[r]);
    return sum;
  }
  /// kv head = h / Hkv, for the group's last query head (clamped: the real
  /// bug reads past the last KV head) (mutant gqa_wrong_divisor).
  std::int64_t load_head(const unit_rows& ur) const {
    if (ATTNIMPL_MUTANT(gqa_wrong_divisor))
      return std::min(p_.dims.hkv - 1, (ur.kv_head * g_.group + g_.group - 1) / p_.dims.hkv);
    return ur.kv_head;
  }
#else
  std::int64_t load_head(const unit_rows& ur) const { return ur.kv_head; }
  void mean_values(const unit_rows&, float*) {}
  float query_axis_sum(const unit_rows&, const row_state& st, std::int64_t r) { return st.l[r]; }
#endif

  /// Sets kind/vis of every row for block [j0, j0 + kc); returns how many
  /// leading keys of the block any row sees (0: skip the block).
  std::int64_t classify(const unit_rows& ur, std::int64_t j0, std::int64_t kc) {
    std::int64_t kpack = 0;
    for (std::int64_t r = 0; r < ur.rows; ++r) {
      std::uint8_t* vis = ws_.vis.data() + r * g_.k_tile8;
      std::fill(vis, vis + g_.k_tile8, std::uint8_t{0});
      const std::int64_t cnt = std::clamp<std::int64_t>(ws_.hi[r] - j0, 0, kc);
      std::int64_t allowed = 0, last = 0;
      if (!p_.mask.data) {
        std::fill(vis, vis + cnt, std::uint8_t{1});
        allowed = last = cnt;
      } else {
        const std::uint8_t* mrow = p_.mask.data + ur.b * p_.mask.stride[0] +
                                   (ATTNIMPL_MUTANT(mask_head_uses_kv_head) ? ur.kv_head : ws_.head[r]) * p_.mask.stride[1] +
                                   ws_.pos[r] * p_.mask.stride[2];
        for (std::int64_t jj = 0; jj < cnt; ++jj) {
          if ((mrow[(j0 + jj) * p_.mask.stride[3]] != 0) != ATTNIMPL_MUTANT(mask_polarity)) {
            vis[jj] = 1;
            ++allowed;
            last = jj + 1;
          }
        }
      }
      // Lanes past the sequence's last key (zero K, never packed V) taken as keys.
      if (ATTNIMPL_MUTANT(tail_tile_unmasked) && cnt == kc && j0 + kc == ur.keys)
        std::fill(vis + kc, vis + g_.k_tile, std::uint8_t{1});
      ws_.kind[r] = allowed == 0 ? row_kind::none : allowed == kc ? row_kind::all : row_kind::partial;
      std::int64_t prefix = allowed == cnt ? cnt : 0;  // without holes the visible keys are [0, cnt)
      if (prefix == 0)
        while (prefix < cnt && vis[prefix]) ++prefix;
      if (ATTNIMPL_MUTANT(prefix_ignores_holes)) prefix = allowed;
      ws_.prefix[r] = prefix;
      kpack = std::max(kpack, ATTNIMPL_MUTANT(kpack_counts_visible) ? allowed : last);
    }
    return kpack;
  }

  /// Rows of at most this many (decode: the G heads of one position) take
  /// their scores straight from the caller's K rows (direct_scores); more
  /// rows share one transposed copy of the block (pack_k, scores).
  static constexpr std::int64_t direct_rows = 8;

  /// Addresses of K and V rows j0 .. j0 + count - 1 of the unit's KV head.
  void locate(const unit_rows& ur, std::int64_t j0, std::int64_t count, const char** k, const char** v) const {
    const std::int64_t esize = convert::size_of(p_.kv.type);
    const row_walk kw{static_cast<const char*>(p_.kv.k), &p_.kv.ks, p_.kv.k_page_stride, esize};
    row_walk vw{static_cast<const char*>(p_.kv.v), &p_.kv.vs, p_.kv.v_page_stride, esize};
    if (ATTNIMPL_MUTANT(v_uses_k_strides)) vw = {vw.base, &p_.kv.ks, p_.kv.k_page_stride, esize};
    row_addresses(p_.kv, kw, ur.b, load_head(ur), j0, count, k);
    row_addresses(p_.kv, vw, ur.b, load_head(ur), j0, count, v);
  }

  /// K block [0, kpack) (rows at ws_.krows) transposed to f32 kt[d][j], zero
  /// past kpack: nothing past what some row sees is read.
  void pack_k(std::int64_t kpack) {
    const std::int64_t d = p_.dims.d;
    const std::int64_t esize = convert::size_of(p_.kv.type);
    const char* const* krows = ws_.krows.data();
    float* kt = ws_.kt.data();
    float* tmp = ws_.tmp.data();
    std::int64_t jj = 0;
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
    for (std::int64_t dd = 0; dd < d; ++dd)
      std::fill(kt + dd * g_.k_tile8 + kpack, kt + (dd + 1) * g_.k_tile8, 0.0f);
  }

  /// Points vrows at V rows [0, kpack); returns the storage type they hold.
  /// Few rows (decode): the caller's rows are used in place, read and widened
  /// to f32 in registers once (bf16/f16 too). Many rows: V is copied to a
  /// contiguous f32 block, since the P.V kernel walks it once per row group
  /// and the caller's rows may sit pages apart (TLB).
  dtype pack_v(const unit_rows& ur, std::int64_t kpack) {
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
  void direct_scores(const unit_rows& ur, std::int64_t kpack, std::int64_t next) {
    switch (p_.kv.type) {
      case dtype::f32: direct_scores_as<dtype::f32>(ur, kpack, next); break;
      case dtype::f16: direct_scores_as<dtype::f16>(ur, kpack, next); break;
      case dtype::bf16: direct_scores_as<dtype::bf16>(ur, kpack, next); break;
    }
  }

  template <dtype T>
  void direct_scores_as(const unit_rows& ur, std::int64_t kpack, std::int64_t next) {
    const std::int64_t esize = convert::size_of(T);
    const std::int64_t kbytes = p_.dims.d * esize, vbytes = p_.dims.dv * p_.kv.vs[3] * esize;
    const char* zero = reinterpret_cast<const char*>(ws_.zero.data());
    for (std::int64_t jj = 0; jj < kpack; jj += 8) {
      const char* rows[8];
      for (std::int64_t t = 0; t < 8; ++t) rows[t] = jj + t < kpack ? ws_.krows[jj + t] : zero;  // lanes past kpack: K = 0
      // The first pass spreads the requests over its loads: a burst of a
      // hundred prefetches fills the load queue and stalls the arithmetic
      // that could run meanwhile.
      prefetch_set pf{ws_.knext.data() + jj, ws_.vnext.data() + jj, std::clamp<std::int64_t>(next - jj, 0, 8), kbytes,
                      vbytes};
      for (std::int64_t r0 = 0; r0 < ur.rows; r0 += 4) {
        const std::int64_t nr = std::min<std::int64_t>(4, ur.rows - r0);
        bool any = false;
        for (std::int64_t r = r0; r < r0 + nr; ++r) any = any || ws_.kind[r] != row_kind::none;
        if (!any) continue;
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

  /// Rows of the next block to request while a group of keys computes.
  struct prefetch_set {
    const char* const* k;
    const char* const* v;
    std::int64_t count, kbytes, vbytes;
  };

  template <int NR, dtype T>
  void score_group(const char* const rows_in[8], std::int64_t r0, std::int64_t jj, const prefetch_set& pf) {
    constexpr std::int64_t es = T == dtype::f32 ? 4 : 2;
    const std::int64_t d = p_.dims.d, ld = g_.k_tile8;  // locals: vector stores may alias members
    const float* q = ws_.qp.data() + r0 * d;
    float* s = ws_.s.data() + r0 * ld + jj;
    const char* r0p = rows_in[0];
    const char* r1p = rows_in[1];
    const char* r2p = rows_in[2];
    const char* r3p = rows_in[3];
    const char* r4p = rows_in[4];
    const char* r5p = rows_in[5];
    const char* r6p = rows_in[6];
    const char* r7p = rows_in[7];
    __m256 acc[NR];
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
    const std::int64_t pf_count = pf.count, vbytes = pf.vbytes;
    const char* const* pk = pf.k;
    const char* const* pv = pf.v;
    std::int64_t dd = 0;
    for (; dd + 8 <= d; dd += 8) {
      const std::int64_t at = dd * es;
      if (at % 64 == 0) {
        for (std::int64_t t = 0; t < pf_count; ++t) _mm_prefetch(pk[t] + at, _MM_HINT_T0);
      } else if (at % 64 == 32 && at - 32 < vbytes) {
        for (std::int64_t t = 0; t < pf_count; ++t) _mm_prefetch(pv[t] + at - 32, _MM_HINT_T0);
      }
      __m256 k[8] = {simd::load8(r0p + at, T), simd::load8(r1p + at, T), simd::load8(r2p + at, T),
                     simd::load8(r3p + at, T), simd::load8(r4p + at, T), simd::load8(r5p + at, T),
                     simd::load8(r6p + at, T), simd::load8(r7p + at, T)};
      simd::transpose8(k);
#pragma GCC unroll 8
      for (int x = 0; x < 8; ++x)
#pragma GCC unroll 4
        for (int r = 0; r < NR; ++r)
          acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(q + r * d + dd + x), k[x], acc[r]);
    }
    // Lines the dim loop did not reach: K's tail, V's rest (dv > d, or d % 16).
    for (std::int64_t at = (dd * es + 63) / 64 * 64; at < pf.kbytes; at += 64)
      for (std::int64_t t = 0; t < pf_count; ++t) _mm_prefetch(pk[t] + at, _MM_HINT_T0);
    for (std::int64_t at = (dd * es + 31) / 64 * 64; at < vbytes; at += 64)
      for (std::int64_t t = 0; t < pf_count; ++t) _mm_prefetch(pv[t] + at, _MM_HINT_T0);
    for (; dd < d; ++dd) {
      const __m256 k = _mm256_setr_ps(element<T>(r0p, dd), element<T>(r1p, dd), element<T>(r2p, dd),
                                      element<T>(r3p, dd), element<T>(r4p, dd), element<T>(r5p, dd),
                                      element<T>(r6p, dd), element<T>(r7p, dd));
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(q + r * d + dd), k, acc[r]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) _mm256_storeu_ps(s + r * ld, acc[r]);
  }

  template <int NR>
  void score_rows(std::int64_t r0) {
    const std::int64_t d = p_.dims.d, ld = g_.k_tile8;
    const float* q = ws_.qp.data() + r0 * d;
    float* s = ws_.s.data() + r0 * ld;
    std::int64_t c = 0;
    for (; c + 16 <= ld; c += 16) micro::scores<NR, 2>(q, d, ws_.kt.data() + c, ld, d, s + c, ld);
    if (c < ld) micro::scores<NR, 1>(q, d, ws_.kt.data() + c, ld, d, s + c, ld);
  }

  void scores(const unit_rows& ur) {
    constexpr std::int64_t block = 6;
    for (std::int64_t r0 = 0; r0 < ur.rows; r0 += block) {
      const std::int64_t nr = std::min(block, ur.rows - r0);
      bool any = false;
      for (std::int64_t r = r0; r < r0 + nr; ++r) any = any || ws_.kind[r] != row_kind::none;
      if (!any) continue;
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

  /// Masks scores by selection (never arithmetic), updates max and sum,
  /// rescales on a rising max, leaves P in the score buffer.
  void softmax(const unit_rows& ur, const row_state& st) {
    const std::int64_t ld = g_.k_tile8;
    const __m256 ninf = _mm256_set1_ps(neg_inf);
    for (std::int64_t r = 0; r < ur.rows; ++r) {
      if (ws_.kind[r] == row_kind::none) continue;
      float* s = ws_.s.data() + r * ld;
      const std::uint8_t* vis = ws_.vis.data() + r * ld;
      __m256 mx = ninf;
      // Rows that see keys [0, prefix) need no per-lane mask there; lanes past
      // it (holes, keys beyond the block, padding lanes) are selected to -inf.
      const std::int64_t whole = ws_.prefix[r] / 8 * 8;
      for (std::int64_t c = 0; c < whole; c += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + c));
      for (std::int64_t c = whole; c < ld; c += 8) {
        const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(vis + c));
        const __m256 keep = _mm256_castsi256_ps(
            _mm256_cmpgt_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_setzero_si256()));
        const __m256 x = _mm256_blendv_ps(ninf, _mm256_loadu_ps(s + c), keep);
        _mm256_storeu_ps(s + c, x);
        mx = _mm256_max_ps(mx, x);
      }
      const float mb = simd::hmax(mx);
      const float m_old = st.m[r];
      float m_new = mb > m_old ? mb : m_old;
      if (m_new == neg_inf) {
        // No finite maximum: every visible score is -inf (all weights 0), or
        // NaN (a NaN in a visible Q or K), which max_ps can drop. A NaN score
        // makes the row NaN (docs/spec.md: a non-finite visible input gives a
        // non-finite row, never finite garbage); the NaN maximum carries it
        // through later blocks, the merge and the final division.
        bool nan_score = false;
        for (std::int64_t c = 0; c < ld; ++c) nan_score = nan_score || std::isnan(s[c]);
        if (nan_score) st.m[r] = std::numeric_limits<float>::quiet_NaN();
        ws_.kind[r] = row_kind::none;
        ws_.prefix[r] = 0;  // its scores must not reach the P.V kernel
        continue;
      }
      if (ATTNIMPL_MUTANT(no_max_shift)) m_new = 0.0f;  // p = exp(s)
      float* acc = st.acc + r * g_.dv8;
      if (m_new > m_old) {
        if (m_old != neg_inf) {
          float alpha = simd::exp1(m_old - m_new);
          if (ATTNIMPL_MUTANT(rescale_inverted)) alpha = simd::exp1(m_new - m_old);
          const __m256 av = _mm256_set1_ps(alpha);
          for (std::int64_t e = 0; e < g_.dv8 && !ATTNIMPL_MUTANT(rescale_skipped); e += 8)
            _mm256_storeu_ps(acc + e, _mm256_mul_ps(_mm256_loadu_ps(acc + e), av));
          if (!ATTNIMPL_MUTANT(rescale_sum_skipped)) st.l[r] *= alpha;
        }
        st.m[r] = m_new;
      }
      const __m256 mv = _mm256_set1_ps(m_new);
      __m256 sum = _mm256_setzero_ps();
      for (std::int64_t c = 0; c < ld; c += 8) {
        const __m256 x = _mm256_loadu_ps(s + c);
        const __m256 live = _mm256_cmp_ps(x, ninf, _CMP_NEQ_UQ);
        const __m256 pv = _mm256_and_ps(simd::exp8(_mm256_sub_ps(x, mv)), live);
        _mm256_storeu_ps(s + c, pv);
        sum = _mm256_add_ps(sum, pv);
      }
      st.l[r] += simd::hsum(sum);
    }
  }

  template <dtype T, int NR, int NE>
  void values_block(std::int64_t r0, std::int64_t e0, std::int64_t kc, const row_state& st) {
    micro::weighted_values<NR, NE, T>(ws_.s.data() + r0 * g_.k_tile8, g_.k_tile8, ws_.vrows.data(), e0, kc,
                                   st.acc + r0 * g_.dv8 + e0, g_.dv8);
  }

  /// acc += P V. Each group of 4 rows runs the register kernel over the keys
  /// all its rows see from the block start (column slice outermost, so the V
  /// slice stays in L1 across groups); each row then adds its remaining
  /// visible keys in order. Either way a row's chain is one FMA per visible
  /// key in increasing j: the same bits whatever rows share its group.
  template <dtype T>
  void weighted_values(const unit_rows& ur, std::int64_t kpack, const row_state& st) {
    constexpr std::int64_t block = 4;
    std::int64_t* keys = ws_.group_keys.data();
    bool any_fast = false;
    for (std::int64_t r0 = 0; r0 < ur.rows; r0 += block) {
      std::int64_t common = kpack;
      for (std::int64_t r = r0; r < std::min(r0 + block, ur.rows); ++r) common = std::min(common, ws_.prefix[r]);
      keys[r0 / block] = common;
      any_fast = any_fast || common > 0;
    }
    if (any_fast) {
      for (std::int64_t e0 = 0; e0 < g_.dv8; e0 += 24) {
        const std::int64_t ne = std::min<std::int64_t>(3, (g_.dv8 - e0) / 8);
        for (std::int64_t r0 = 0; r0 < ur.rows; r0 += block)
          if (keys[r0 / block] > 0)
            values_dispatch<T>(std::min(block, ur.rows - r0), ne, r0, e0, keys[r0 / block], st);
      }
    }
    for (std::int64_t r = 0; r < ur.rows; ++r) {
      const std::int64_t from = keys[r / block];
      if (ws_.kind[r] == row_kind::none || from >= kpack) continue;
      const float* pr = ws_.s.data() + r * g_.k_tile8;
      const std::uint8_t* vis = ws_.vis.data() + r * g_.k_tile8;
      const char* const* vrows = ws_.vrows.data();
      constexpr std::int64_t es = T == dtype::f32 ? 4 : 2;
      const std::int64_t dv8 = g_.dv8;  // a local: vector stores may alias members
      float* acc = st.acc + r * dv8;
      for (std::int64_t jj = from; jj < kpack; ++jj) {
        if (!vis[jj] && !ATTNIMPL_MUTANT(masked_value_leak)) continue;  // skipped, never multiplied: V there may be NaN
        const __m256 pb = _mm256_broadcast_ss(pr + jj);
        const char* v = vrows[jj];
        for (std::int64_t e = 0; e < dv8; e += 8)
          _mm256_storeu_ps(acc + e, _mm256_fmadd_ps(pb, simd::load8(v + e * es, T), _mm256_loadu_ps(acc + e)));
      }
    }
  }

  template <dtype T>
  void values_dispatch(std::int64_t nr, std::int64_t ne, std::int64_t r0, std::int64_t e0, std::int64_t kc,
                       const row_state& st) {
    switch (nr * 4 + ne) {
      case 1 * 4 + 1: values_block<T, 1, 1>(r0, e0, kc, st); break;
      case 1 * 4 + 2: values_block<T, 1, 2>(r0, e0, kc, st); break;
      case 1 * 4 + 3: values_block<T, 1, 3>(r0, e0, kc, st); break;
      case 2 * 4 + 1: values_block<T, 2, 1>(r0, e0, kc, st); break;
      case 2 * 4 + 2: values_block<T, 2, 2>(r0, e0, kc, st); break;
      case 2 * 4 + 3: values_block<T, 2, 3>(r0, e0, kc, st); break;
      case 3 * 4 + 1: values_block<T, 3, 1>(r0, e0, kc, st); break;
      case 3 * 4 + 2: values_block<T, 3, 2>(r0, e0, kc, st); break;
      case 3 * 4 + 3: values_block<T, 3, 3>(r0, e0, kc, st); break;
      case 4 * 4 + 1: values_block<T, 4, 1>(r0, e0, kc, st); break;
      case 4 * 4 + 2: values_block<T, 4, 2>(r0, e0, kc, st); break;
      default: values_block<T, 4, 3>(r0, e0, kc, st); break;
    }
  }

  const problem& p_;
  const geometry& g_;
  workspace& ws_;
};

geometry plan(const problem& p, const config& cfg) {
  geometry g;
  g.group = p.dims.hq / p.dims.hkv;
  // Auto q_tile: about 128 rows per unit, enough to amortize packing K and V.
  const std::int64_t q_tile = cfg.q_tile > 0 ? cfg.q_tile : std::max<std::int64_t>(1, 128 / g.group);
  g.q_tile = std::min(q_tile, p.dims.lq);
  g.rows = g.group * g.q_tile;
  g.q_tiles = (p.dims.lq + g.q_tile - 1) / g.q_tile;
  if (ATTNIMPL_MUTANT(query_tail_tile_dropped)) g.q_tiles = std::max<std::int64_t>(1, p.dims.lq / g.q_tile);
  g.units = p.dims.b * p.dims.hkv * g.q_tiles;
  g.k_tile = cfg.k_tile;
  g.k_tile8 = round8(cfg.k_tile);
  g.split = cfg.split_keys;
  g.chunks = std::max<std::int64_t>(1, (p.dims.lk + g.split - 1) / g.split);
  g.dv8 = round8(p.dims.dv);
  return g;
}

workspace& thread_workspace() {
  thread_local workspace ws;
  return ws;
}

}  // namespace

void run(const problem& p, const config& cfg) {
  const geometry g = plan(p, cfg);
  auto& pool = thread_pool::instance();
  // Split chunks across threads only when units alone cannot fill them; the
  // bits are the same either way (same chunks, same fold order).
  const std::int64_t split_tasks = g.units * g.chunks;
  const bool split = g.chunks > 1 && g.units < 2 * cfg.threads && split_tasks * state_floats(g) <= (16ll << 20);
  // Every lambda captures one reference: std::function keeps it inline
  // (libstdc++ stores at most two pointers without allocating), so a decode
  // step allocates nothing once the workspaces have grown.
  struct job {
    const problem& p;
    const geometry& g;
    float* parts;
  };
  if (!split) {
    const job jb{p, g, nullptr};
    const std::function<void(int)> prepare = [&jb](int) { thread_workspace().ensure(jb.p, jb.g); };
    pool.run(cfg.threads, g.units, [&jb](std::int64_t u, int) {
      workspace& ws = thread_workspace();
      unit_runner runner(jb.p, jb.g, ws);
      const unit_rows ur = runner.setup(u);
      const row_state part = view_state(ws.chunk.data(), jb.g), total = view_state(ws.total.data(), jb.g);
      for (std::int64_t c = 0; c < jb.g.chunks; ++c) {
        runner.chunk(ur, c * jb.g.split, (c + 1) * jb.g.split, part);
        runner.fold(ur, total, part, c == 0);
      }
      runner.finish(ur, total);
    }, &prepare);
    return;
  }
  // The chunks' partial states, kept by the calling thread across calls
  // (grows only, at most the 64 MiB cap above).
  thread_local std::vector<float> parts;
  if (static_cast<std::int64_t>(parts.size()) < split_tasks * state_floats(g))
    parts.resize(static_cast<std::size_t>(split_tasks * state_floats(g)));
  const job jb{p, g, parts.data()};
  const std::function<void(int)> prepare = [&jb](int) { thread_workspace().ensure(jb.p, jb.g); };
  pool.run(cfg.threads, split_tasks, [&jb](std::int64_t t, int) {
    workspace& ws = thread_workspace();
    unit_runner runner(jb.p, jb.g, ws);
    const std::int64_t u = t / jb.g.chunks, c = t % jb.g.chunks;
    const unit_rows ur = runner.setup(u);
    runner.chunk(ur, c * jb.g.split, (c + 1) * jb.g.split, view_state(jb.parts + t * state_floats(jb.g), jb.g));
  }, &prepare);
  pool.run(cfg.threads, g.units, [&jb](std::int64_t u, int) {
    workspace& ws = thread_workspace();
    unit_runner runner(jb.p, jb.g, ws);
    const unit_rows ur = runner.setup(u);
    const row_state total = view_state(ws.total.data(), jb.g);
    for (std::int64_t c = 0; c < jb.g.chunks; ++c) {
      std::int64_t at = c;
      if (ATTNIMPL_MUTANT(thread_order)) at = jb.g.chunks - 1 - c;  // this path folds last chunk first
      runner.fold(ur, total, view_state(jb.parts + (u * jb.g.chunks + at) * state_floats(jb.g), jb.g), c == 0);
    }
    runner.finish(ur, total);
  }, &prepare);
}

}  // namespace attnimpl::engine
