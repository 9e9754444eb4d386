// FlashAttention 2's backward pass (attnimpl/backward.hpp), plain C++ in f32.
#include "attnimpl/backward.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "../convert.hpp"
#include "../mutation.hpp"

namespace attnimpl {

namespace {

std::int64_t tile_of(std::int64_t t) { return t > 0 ? t : 64; }
std::size_t z(std::int64_t x) { return static_cast<std::size_t>(x); }

// Element (a, b, c, d) of a strided tensor, converted exactly to f32.
float load(const tensor_in& t, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  float x;
  const std::int64_t at = a * t.stride[0] + b * t.stride[1] + c * t.stride[2] + d * t.stride[3];
  convert::load_row(&x, static_cast<const char*>(t.data) + at * convert::size_of(t.type), t.type, 1, 1);
  return x;
}

void store(const tensor_out& t, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d, float x) {
  const std::int64_t at = a * t.stride[0] + b * t.stride[1] + c * t.stride[2] + d * t.stride[3];
  convert::store_row(static_cast<char*>(t.data) + at * convert::size_of(t.type), t.type, 1, &x, 1);
}

status check(const backward_args& a, const backward_config& cfg) {
  const shape& s = a.dims;
  if (s.b < 1 || s.hq < 1 || s.hkv < 1 || s.lq < 1 || s.lk < 1 || s.d < 1 || s.dv < 1)
    return status::invalid("dims: every size must be >= 1");
  if (s.hq % s.hkv != 0) return status::invalid("dims: hq must be a multiple of hkv");
  if (!a.q.data || !a.k.data || !a.v.data || !a.o.data || !a.d_o.data || !a.lse || !a.dq.data || !a.dk.data || !a.dv.data)
    return status::invalid("backward_args: q, k, v, o, lse, d_o, dq, dk and dv must be set");
  if (cfg.q_tile < 0 || cfg.k_tile < 0) return status::invalid("backward_config: tiles must be >= 0");
  if (!isa_supported(cfg.simd)) return status::invalid("backward_config: this CPU does not run the instruction set asked for");
  if (a.key_len)
    for (std::int64_t b = 0; b < s.b; ++b)
      if (a.key_len[b] < 0 || a.key_len[b] > s.lk) return status::invalid("key_len: each entry must lie in [0, lk]");
  return status::success();
}

}  // namespace

std::pair<std::int64_t, std::int64_t> backward_blocks(const shape& dims, const backward_config& cfg) {
  const std::int64_t bq = tile_of(cfg.q_tile), bk = tile_of(cfg.k_tile);
  return {(dims.lk + bk - 1) / bk, (dims.hq / std::max<std::int64_t>(1, dims.hkv)) * ((dims.lq + bq - 1) / bq)};
}

namespace {

// 16 floats, one vector of whatever width the function is built for (GCC
// and clang lower it to 4 SSE, 2 AVX or 1 AVX-512 register): element-wise
// multiplies and adds, each the same IEEE operation as the scalar one.
typedef float v16 __attribute__((vector_size(64)));
// The same, at any float's alignment and aliasing floats (as __m512_u): loads
// and stores through it, in the functions' bodies (no function passes or
// returns a vector, whose ABI would change with the instruction set).
typedef float v16_unaligned __attribute__((vector_size(64), aligned(4), may_alias));
#define ATTNIMPL_V16(p) (*reinterpret_cast<v16_unaligned*>(p))
#define ATTNIMPL_V16_IN(p) (*reinterpret_cast<const v16_unaligned*>(p))
constexpr std::int64_t lanes = 16;
std::int64_t padded(std::int64_t n) { return (n + lanes - 1) / lanes * lanes; }

// For the lanes c of out[0, 16 N): the sum over t < count with on[t] (every
// t when on is null) of w[t] * rows[t][c], from 0 in t order; stored to out,
// or added to it once. N vectors at once: independent sums in flight.
template <int N>
__attribute__((always_inline)) inline void sum_rows(const float* w, std::int64_t w_stride, const char* on, const float* rows,
                                                    std::int64_t row_stride, std::int64_t count, float* out, bool add) {
  v16 acc[N] = {};
  for (std::int64_t t = 0; t < count; ++t) {
    if (on && !on[t * w_stride]) continue;
    const float wt = w[t * w_stride];
    const float* r = rows + t * row_stride;
    for (int u = 0; u < N; ++u) acc[u] += wt * ATTNIMPL_V16_IN(r + lanes * u);
  }
  for (int u = 0; u < N; ++u) {
    if (add)
      ATTNIMPL_V16(out + lanes * u) += acc[u];
    else
      ATTNIMPL_V16(out + lanes * u) = acc[u];
  }
}

// sum_rows over every lane of out[0, width) (width a multiple of 16), four vectors at a time.
__attribute__((always_inline)) inline void sum_rows_all(const float* w, std::int64_t w_stride, const char* on, const float* rows,
                                                        std::int64_t row_stride, std::int64_t count, float* out,
                                                        std::int64_t width, bool add) {
  std::int64_t c = 0;
  for (; c + 4 * lanes <= width; c += 4 * lanes) sum_rows<4>(w, w_stride, on, rows + c, row_stride, count, out + c, add);
  switch ((width - c) / lanes) {
    case 3: sum_rows<3>(w, w_stride, on, rows + c, row_stride, count, out + c, add); break;
    case 2: sum_rows<2>(w, w_stride, on, rows + c, row_stride, count, out + c, add); break;
    case 1: sum_rows<1>(w, w_stride, on, rows + c, row_stride, count, out + c, add); break;
    default: break;
  }
}

// The f32 inputs and accumulators of one (batch element, KV head): its G query
// heads' Q and dO rows, its keys' K and V (row-major and transposed per key
// block), the block sums and one query block's P and dS. Rows are padded
// with zeros to a multiple of 16 floats (the padding lanes are computed and
// never stored). Each worker thread owns one.
struct scratch {
  std::vector<float> q, d_o;        // (h - g G, i, x): the group's rows, converted once
  std::vector<float> k, v, kt, vt;  // one key block: (jj, x) and (x, jj)
  std::vector<float> dk_blk, dv_blk, dk_part, dv_part;
  std::vector<float> s, dp, p, ds;  // the query block's scores, dP (one row), P and dS (every row) over the key block
  std::vector<char> seen, vis;
  // The mutant backward_dq_order_nondeterministic only: how far this call
  // rotates the order of the key blocks and of the keys in each block's dQ
  // partial (0 otherwise: key order).
  std::int64_t dq_rotation = 0;
};

// The loops below keep one order for every sum (the one docs/impl.md
// "Backward" states): a score or dP element adds its products x = 0, 1, ...
// from 0; dQ, dK and dV add a query block's (or key block's) products in
// row (key) order into a partial that is then added once. The vector loops
// run across independent elements (keys, or columns), never inside one
// sum, and -ffp-contract=off keeps every multiply and add separate: the
// same bits at every vector width.
template <class Visible>
__attribute__((always_inline)) inline void one_kv_head(const backward_args& a, std::int64_t bq, std::int64_t bk, float scale,
                                                       const std::vector<float>& big_d, const std::vector<char>& sees,
                                                       std::vector<float>& dq, std::int64_t b, std::int64_t g,
                                                       const Visible& visible, scratch& w) {
  const shape& s = a.dims;
  const std::int64_t group = s.hq / s.hkv, d = s.d, dv = s.dv, d16 = padded(d), dv16 = padded(dv);
  w.q.assign(z(group * s.lq * d16), 0.0f);
  w.d_o.assign(z(group * s.lq * dv16), 0.0f);
  for (std::int64_t h = g * group; h < (g + 1) * group; ++h)
    for (std::int64_t i = 0; i < s.lq; ++i) {
      const std::size_t r = z((b * s.hq + h) * s.lq + i), at = z((h - g * group) * s.lq + i);
      if (!sees[r]) continue;  // its Q and dO are not read
      const auto row = [&](const tensor_in& t, float* dst, std::int64_t n) {
        const std::int64_t off = b * t.stride[0] + i * t.stride[1] + h * t.stride[2];
        convert::load_row(dst, static_cast<const char*>(t.data) + off * convert::size_of(t.type), t.type, t.stride[3], n);
      };
      row(a.q, &w.q[at * z(d16)], d);
      row(a.d_o, &w.d_o[at * z(dv16)], dv);
    }
  std::vector<float> dq_acc(z(d16));
  const std::int64_t key_blocks = (s.lk + bk - 1) / bk;
  for (std::int64_t kb = 0; kb < key_blocks; ++kb) {
    const std::int64_t j0 = (kb + w.dq_rotation) % key_blocks * bk;
    const std::int64_t nk = std::min(bk, s.lk - j0), nk16 = padded(nk);
    // The last, partial key block never computed (key blocks counted as lk / bk): its dK, dV stay 0.
    const bool dropped = ATTNIMPL_MUTANT(backward_key_tail_tile_dropped) && nk < bk;
    // The key block's K and V (f32; keys no row sees stay 0, never read), and its dK, dV sums.
    w.k.assign(z(nk * d16), 0.0f);
    w.v.assign(z(nk * dv16), 0.0f);
    w.kt.assign(z(d * nk16), 0.0f);
    w.vt.assign(z(dv * nk16), 0.0f);
    w.dk_blk.assign(z(nk * d16), 0.0f);
    w.dv_blk.assign(z(nk * dv16), 0.0f);
    w.seen.assign(z(nk), 0);
    std::int64_t seen_count = 0;
    for (std::int64_t h = g * group; h < (g + 1) * group && seen_count < nk; ++h)
      for (std::int64_t i = s.lq - 1; i >= 0 && seen_count < nk; --i)  // last rows first: causal rows see the most
        for (std::int64_t jj = 0; jj < nk; ++jj)
          if (!w.seen[z(jj)] && visible(b, h, i, j0 + jj)) w.seen[z(jj)] = 1, ++seen_count;
    for (std::int64_t jj = 0; jj < nk; ++jj) {
      if (!w.seen[z(jj)]) continue;  // a key no row sees is never read
      const auto row = [&](const tensor_in& t, float* dst, std::int64_t n) {
        const std::int64_t off = b * t.stride[0] + (j0 + jj) * t.stride[1] + g * t.stride[2];
        convert::load_row(dst, static_cast<const char*>(t.data) + off * convert::size_of(t.type), t.type, t.stride[3], n);
      };
      row(a.k, &w.k[z(jj * d16)], d);
      row(a.v, &w.v[z(jj * dv16)], dv);
      for (std::int64_t x = 0; x < d; ++x) w.kt[z(x * nk16 + jj)] = w.k[z(jj * d16 + x)];
      for (std::int64_t e = 0; e < dv; ++e) w.vt[z(e * nk16 + jj)] = w.v[z(jj * dv16 + e)];
    }
    w.s.assign(z(nk16), 0.0f), w.dp.assign(z(nk16), 0.0f);
    w.p.assign(z(bq * nk), 0.0f), w.ds.assign(z(bq * nk), 0.0f), w.vis.assign(z(bq * nk), 0);
    for (std::int64_t h = g * group; h < (g + 1) * group && !dropped; ++h)
      for (std::int64_t i0 = 0; i0 < s.lq; i0 += bq) {
        if (ATTNIMPL_MUTANT(backward_gqa_last_head_only) && i0 == 0) {  // each query head starts the sums afresh
          std::fill(w.dk_blk.begin(), w.dk_blk.end(), 0.0f);
          std::fill(w.dv_blk.begin(), w.dv_blk.end(), 0.0f);
        }
        const std::int64_t rows = std::min(s.lq, i0 + bq) - i0;
        const float* qblk = &w.q[z(((h - g * group) * s.lq + i0) * d16)];
        const float* doblk = &w.d_o[z(((h - g * group) * s.lq + i0) * dv16)];
        bool block_on = false;
        // Per row: P and dS over the block's visible keys, and the row's dQ partial (key order).
        for (std::int64_t ri = 0; ri < rows; ++ri) {
          const std::int64_t i = i0 + ri;
          const std::size_t r = z((b * s.hq + h) * s.lq + i);
          char* vis = &w.vis[z(ri * nk)];
          // A row that sees no key of the block adds nothing to it (its dQ
          // partial would be +0 everywhere, and a sum from +0 is never -0);
          // a row that sees no key at all is not read.
          bool any = false;
          for (std::int64_t jj = 0; jj < nk; ++jj) any = (vis[jj] = sees[r] && visible(b, h, i, j0 + jj)) || any;
          if (!any) continue;
          block_on = true;
          const std::int64_t lse_row = ATTNIMPL_MUTANT(backward_lse_previous_row) && i > 0 ? i - 1 : i;
          const float lse = a.lse[b * a.lse_stride[0] + h * a.lse_stride[1] + lse_row * a.lse_stride[2]];
          const float* qrow = qblk + ri * d16;
          const float* dorow = doblk + ri * dv16;
          // Scores and dP of every key of the block: each a sum from 0 in x (e) order, vectorized across keys.
          sum_rows_all(qrow, 1, nullptr, w.kt.data(), nk16, d, w.s.data(), nk16, false);
          sum_rows_all(dorow, 1, nullptr, w.vt.data(), nk16, dv, w.dp.data(), nk16, false);
          float* p = &w.p[z(ri * nk)];
          float* ds = &w.ds[z(ri * nk)];
          for (std::int64_t jj = 0; jj < nk; ++jj) {
            if (!vis[jj]) continue;
            p[jj] = std::exp((ATTNIMPL_MUTANT(backward_p_unscaled) ? w.s[z(jj)] : w.s[z(jj)] * scale) - lse);
            ds[jj] = ATTNIMPL_MUTANT(backward_ds_without_p) ? w.dp[z(jj)] - big_d[r] : p[jj] * (w.dp[z(jj)] - big_d[r]);
          }
          // dQ's partial over the block's visible keys, in key order, then added to the row's dQ.
          float* dq_row = &dq[z(((b * s.lq + i) * s.hq + h) * d)];
          if (ATTNIMPL_MUTANT(backward_dq_order_nondeterministic)) {  // the keys from a per-call start, as atomics land
            std::fill(dq_acc.begin(), dq_acc.end(), 0.0f);
            for (std::int64_t t = 0; t < nk; ++t) {
              const std::int64_t jj = (t + w.dq_rotation) % nk;
              if (vis[jj])
                for (std::int64_t x = 0; x < d; ++x) dq_acc[z(x)] += ds[jj] * w.k[z(jj * d16 + x)];
            }
          } else {
            sum_rows_all(ds, 1, vis, w.k.data(), d16, nk, dq_acc.data(), d16, false);
          }
          for (std::int64_t x = 0; x < d; ++x) dq_row[x] += dq_acc[z(x)];
        }
        if (!block_on) continue;  // every partial would be +0: adding it changes nothing
        // dK's and dV's partials over the block's rows, in row order, each added to the key block's once.
        for (std::int64_t jj = 0; jj < nk; ++jj) {
          sum_rows_all(&w.ds[z(jj)], nk, &w.vis[z(jj)], qblk, d16, rows, &w.dk_blk[z(jj * d16)], d16, true);
          sum_rows_all(&w.p[z(jj)], nk, &w.vis[z(jj)], doblk, dv16, rows, &w.dv_blk[z(jj * dv16)], dv16, true);
        }
      }
    for (std::int64_t jj = 0; jj < nk; ++jj) {
      for (std::int64_t x = 0; x < d; ++x) store(a.dk, b, j0 + jj, g, x, scale * w.dk_blk[z(jj * d16 + x)]);
      for (std::int64_t e = 0; e < dv; ++e) store(a.dv, b, j0 + jj, g, e, w.dv_blk[z(jj * dv16 + e)]);
    }
  }
}

// Key j visible to row (b, h, i): padding, causal (bottom-right aligned, as the forward), the mask.
bool visible_key(const backward_args& a, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  const shape& s = a.dims;
  const std::int64_t n = a.key_len ? a.key_len[b] : s.lk;
  const std::int64_t pos = ATTNIMPL_MUTANT(backward_causal_top_left) ? i : n - s.lq + i;
  if (j >= n || (a.causal && !ATTNIMPL_MUTANT(backward_causal_ignored) && j > pos)) return false;
  if (a.mask.data)
    return a.mask.data[b * a.mask.stride[0] + h * a.mask.stride[1] + i * a.mask.stride[2] + j * a.mask.stride[3]] != 0;
  return true;
}

// The same loops built for each instruction set (the vector width changes,
// not the order of any sum: the same bits on each).
#define ATTNIMPL_BACKWARD_HEAD_ARGS                                                                      \
  const backward_args &a, std::int64_t bq, std::int64_t bk, float scale, const std::vector<float>&big_d, \
      const std::vector<char>&sees, std::vector<float>&dq, std::int64_t b, std::int64_t g, scratch &w
#define ATTNIMPL_BACKWARD_HEAD_CALL            \
  one_kv_head(                                 \
      a, bq, bk, scale, big_d, sees, dq, b, g, \
      [&](std::int64_t bb, std::int64_t h, std::int64_t i, std::int64_t j) { return visible_key(a, bb, h, i, j); }, w)
void head_portable(ATTNIMPL_BACKWARD_HEAD_ARGS) { ATTNIMPL_BACKWARD_HEAD_CALL; }
#if defined(__x86_64__) || defined(_M_X64)
__attribute__((target("avx2,f16c"))) void head_avx2(ATTNIMPL_BACKWARD_HEAD_ARGS) { ATTNIMPL_BACKWARD_HEAD_CALL; }
__attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c"))) void head_avx512(ATTNIMPL_BACKWARD_HEAD_ARGS) {
  ATTNIMPL_BACKWARD_HEAD_CALL;
}
#endif
#undef ATTNIMPL_BACKWARD_HEAD_ARGS
#undef ATTNIMPL_BACKWARD_HEAD_CALL

}  // namespace

status attention_backward(const backward_args& a, const backward_config& cfg) {
  if (status st = check(a, cfg); !st.ok()) return st;
  const shape& s = a.dims;
  const std::int64_t bq = tile_of(cfg.q_tile), bk = tile_of(cfg.k_tile);
  const float scale = a.scale ? *a.scale : default_scale(s.d);
  const auto visible = [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) { return visible_key(a, b, h, i, j); };
  auto* head = head_portable;
#if defined(__x86_64__) || defined(_M_X64)
  const isa which = resolve_isa(cfg.simd);
  if (which == isa::avx512) head = head_avx512;
  if (which == isa::avx2) head = head_avx2;
#endif
  // Preprocessing: D = rowsum(dO O) per row (b, h, i), f32 in e order, and whether the row sees a key.
  std::vector<float> big_d(z(s.b * s.hq * s.lq), 0.0f);
  std::vector<char> sees(big_d.size(), 0);
  for (std::int64_t b = 0; b < s.b; ++b)
    for (std::int64_t h = 0; h < s.hq; ++h)
      for (std::int64_t i = 0; i < s.lq; ++i) {
        const std::size_t r = z((b * s.hq + h) * s.lq + i);
        for (std::int64_t j = 0; j < s.lk && !sees[r]; ++j) sees[r] = visible(b, h, i, j);
        if (!sees[r]) continue;
        float acc = 0.0f;
        for (std::int64_t e = 0; e < s.dv; ++e)
          acc += load(a.d_o, b, i, h, e) *
                 (ATTNIMPL_MUTANT(backward_d_from_do_squared) ? load(a.d_o, b, i, h, e) : load(a.o, b, i, h, e));
        big_d[r] = acc;
      }
  std::vector<float> dq(z(s.b * s.lq * s.hq * s.d), 0.0f);  // (b, i, h, x), f32 across key blocks
  // Each (batch element, KV head) is independent: its dK, dV and its query
  // heads' dQ rows are its own, so the threads split them and the bits do
  // not depend on how many there are. Small problems run on the caller.
  const std::int64_t heads = s.b * s.hkv;
  const double work =
      static_cast<double>(s.b * s.hq) * static_cast<double>(s.lq) * static_cast<double>(s.lk) * static_cast<double>(s.d + s.dv);
  int threads = cfg.threads > 0 ? cfg.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<double>({static_cast<double>(threads), static_cast<double>(heads), work / 1e6 + 1}));
  // The mutant backward_dq_order_nondeterministic: dQ's sums in an order
  // that changes with every call, as a kernel that adds them with atomics.
  std::int64_t dq_rotation = 0;
  if (ATTNIMPL_MUTANT(backward_dq_order_nondeterministic)) {
    static std::atomic<std::int64_t> calls{0};
    dq_rotation = calls.fetch_add(1);
  }
  const auto run = [&](int t) {
    scratch w;
    w.dq_rotation = dq_rotation;
    for (std::int64_t x = t; x < heads; x += threads) head(a, bq, bk, scale, big_d, sees, dq, x / s.hkv, x % s.hkv, w);
  };
  if (threads <= 1) {
    run(0);
  } else {
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(run, t);
    run(0);
    for (auto& th : pool) th.join();
  }
  for (std::int64_t b = 0; b < s.b; ++b)
    for (std::int64_t i = 0; i < s.lq; ++i)
      for (std::int64_t h = 0; h < s.hq; ++h)
        for (std::int64_t x = 0; x < s.d; ++x)
          store(a.dq, b, i, h, x,
                (ATTNIMPL_MUTANT(backward_dq_scale_dropped) ? 1.0f : scale) * dq[z(((b * s.lq + i) * s.hq + h) * s.d + x)]);
  return status::success();
}

}  // namespace attnimpl
