// FlashAttention 2's backward pass (attnimpl/backward.hpp), plain C++ in f32.
#include "attnimpl/backward.hpp"

#include <algorithm>
#include <cmath>
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

// The f32 inputs and accumulators of one (batch element, KV head): its G query
// heads' Q and dO rows, its keys' K and V (row-major and transposed per key
// block), and the block sums. Each worker thread owns one.
struct scratch {
  std::vector<float> q, d_o;        // (h - g G, i, x): the group's rows, converted once
  std::vector<float> k, v, kt, vt;  // one key block: (jj, x) and (x, jj)
  std::vector<float> dk_blk, dv_blk, dk_part, dv_part, dq_part;
  std::vector<float> s, dp, p, ds;  // one row's scores, dP, P and dS over the key block
  std::vector<char> seen, vis;
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
  const std::int64_t group = s.hq / s.hkv, d = s.d, dv = s.dv;
  w.q.assign(z(group * s.lq * d), 0.0f);
  w.d_o.assign(z(group * s.lq * dv), 0.0f);
  for (std::int64_t h = g * group; h < (g + 1) * group; ++h)
    for (std::int64_t i = 0; i < s.lq; ++i) {
      const std::size_t r = z((b * s.hq + h) * s.lq + i), at = z((h - g * group) * s.lq + i);
      if (!sees[r]) continue;  // its Q and dO are not read
      const auto row = [&](const tensor_in& t, float* dst, std::int64_t n) {
        const std::int64_t off = b * t.stride[0] + i * t.stride[1] + h * t.stride[2];
        convert::load_row(dst, static_cast<const char*>(t.data) + off * convert::size_of(t.type), t.type, t.stride[3], n);
      };
      row(a.q, &w.q[at * z(d)], d);
      row(a.d_o, &w.d_o[at * z(dv)], dv);
    }
  for (std::int64_t j0 = 0; j0 < s.lk; j0 += bk) {
    const std::int64_t nk = std::min(bk, s.lk - j0);
    // The last, partial key block never computed (key blocks counted as lk / bk): its dK, dV stay 0.
    const bool dropped = ATTNIMPL_MUTANT(backward_key_tail_tile_dropped) && nk < bk;
    // The key block's K and V (f32; keys no row sees stay 0, never read), and its dK, dV sums.
    w.k.assign(z(nk * d), 0.0f);
    w.v.assign(z(nk * dv), 0.0f);
    w.kt.assign(z(nk * d), 0.0f);
    w.vt.assign(z(nk * dv), 0.0f);
    w.dk_blk.assign(z(nk * d), 0.0f);
    w.dv_blk.assign(z(nk * dv), 0.0f);
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
      row(a.k, &w.k[z(jj * d)], d);
      row(a.v, &w.v[z(jj * dv)], dv);
      for (std::int64_t x = 0; x < d; ++x) w.kt[z(x * nk + jj)] = w.k[z(jj * d + x)];
      for (std::int64_t e = 0; e < dv; ++e) w.vt[z(e * nk + jj)] = w.v[z(jj * dv + e)];
    }
    w.s.resize(z(nk)), w.dp.resize(z(nk)), w.p.resize(z(nk)), w.ds.resize(z(nk)), w.vis.resize(z(nk));
    for (std::int64_t h = g * group; h < (g + 1) * group && !dropped; ++h)
      for (std::int64_t i0 = 0; i0 < s.lq; i0 += bq) {
        if (ATTNIMPL_MUTANT(backward_gqa_last_head_only) && i0 == 0) {  // each query head starts the sums afresh
          std::fill(w.dk_blk.begin(), w.dk_blk.end(), 0.0f);
          std::fill(w.dv_blk.begin(), w.dv_blk.end(), 0.0f);
        }
        // One query block: its partial dK, dV sums are added to the key block's once.
        w.dk_part.assign(z(nk * d), 0.0f);
        w.dv_part.assign(z(nk * dv), 0.0f);
        for (std::int64_t i = i0; i < std::min(s.lq, i0 + bq); ++i) {
          const std::size_t r = z((b * s.hq + h) * s.lq + i);
          if (!sees[r]) continue;  // adds nothing; its dO is not read
          const std::int64_t lse_row = ATTNIMPL_MUTANT(backward_lse_previous_row) && i > 0 ? i - 1 : i;
          const float lse = a.lse[b * a.lse_stride[0] + h * a.lse_stride[1] + lse_row * a.lse_stride[2]];
          const float* qrow = &w.q[z(((h - g * group) * s.lq + i) * d)];
          const float* dorow = &w.d_o[z(((h - g * group) * s.lq + i) * dv)];
          float* dq_row = &dq[z(((b * s.lq + i) * s.hq + h) * d)];
          // A row that sees no key of the block adds nothing to it (dQ's
          // partial would be +0 everywhere, and a sum from +0 is never -0).
          bool any = false;
          for (std::int64_t jj = 0; jj < nk; ++jj) any = (w.vis[z(jj)] = visible(b, h, i, j0 + jj)) || any;
          if (!any) continue;
          // Scores and dP of every key of the block: each a sum from 0 in x (e) order, vectorized across keys.
          float* sc = w.s.data();
          float* dp = w.dp.data();
          std::fill(sc, sc + nk, 0.0f);
          std::fill(dp, dp + nk, 0.0f);
          for (std::int64_t x = 0; x < d; ++x) {
            const float qx = qrow[x];
            const float* kx = &w.kt[z(x * nk)];
            for (std::int64_t jj = 0; jj < nk; ++jj) sc[jj] += qx * kx[jj];
          }
          for (std::int64_t e = 0; e < dv; ++e) {
            const float de = dorow[e];
            const float* ve = &w.vt[z(e * nk)];
            for (std::int64_t jj = 0; jj < nk; ++jj) dp[jj] += de * ve[jj];
          }
          for (std::int64_t jj = 0; jj < nk; ++jj) {
            if (!w.vis[z(jj)]) continue;
            w.p[z(jj)] = std::exp((ATTNIMPL_MUTANT(backward_p_unscaled) ? sc[jj] : sc[jj] * scale) - lse);
            w.ds[z(jj)] = w.p[z(jj)] * (dp[jj] - big_d[r]);
          }
          // dQ's partial over the block's visible keys, in key order; dK and dV's over the block's rows.
          w.dq_part.assign(z(d), 0.0f);
          float* dqp = w.dq_part.data();
          for (std::int64_t jj = 0; jj < nk; ++jj) {
            if (!w.vis[z(jj)]) continue;
            const float dsj = w.ds[z(jj)], pj = w.p[z(jj)];
            const float* kj = &w.k[z(jj * d)];
            for (std::int64_t x = 0; x < d; ++x) dqp[x] += dsj * kj[x];
            float* dkj = &w.dk_part[z(jj * d)];
            float* dvj = &w.dv_part[z(jj * dv)];
            for (std::int64_t x = 0; x < d; ++x) dkj[x] += dsj * qrow[x];
            for (std::int64_t e = 0; e < dv; ++e) dvj[e] += pj * dorow[e];
          }
          for (std::int64_t x = 0; x < d; ++x) dq_row[x] += dqp[x];
        }
        for (std::size_t x = 0; x < w.dk_part.size(); ++x) w.dk_blk[x] += w.dk_part[x];
        for (std::size_t x = 0; x < w.dv_part.size(); ++x) w.dv_blk[x] += w.dv_part[x];
      }
    for (std::int64_t jj = 0; jj < nk; ++jj) {
      for (std::int64_t x = 0; x < d; ++x) store(a.dk, b, j0 + jj, g, x, scale * w.dk_blk[z(jj * d + x)]);
      for (std::int64_t e = 0; e < dv; ++e) store(a.dv, b, j0 + jj, g, e, w.dv_blk[z(jj * dv + e)]);
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
  const auto run = [&](int t) {
    scratch w;
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
