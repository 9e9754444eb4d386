// FlashAttention 2's backward pass (attnimpl/backward.hpp), plain C++ in f32.
#include "attnimpl/backward.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
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

status attention_backward(const backward_args& a, const backward_config& cfg) {
  if (status st = check(a, cfg); !st.ok()) return st;
  const shape& s = a.dims;
  const std::int64_t group = s.hq / s.hkv, bq = tile_of(cfg.q_tile), bk = tile_of(cfg.k_tile);
  const float scale = a.scale ? *a.scale : default_scale(s.d);
  const auto visible = [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
    const std::int64_t n = a.key_len ? a.key_len[b] : s.lk;
    // The causal limit is the query's position n - lq + i (bottom-right aligned, as the forward).
    const std::int64_t pos = ATTNIMPL_MUTANT(backward_causal_top_left) ? i : n - s.lq + i;
    if (j >= n || (a.causal && !ATTNIMPL_MUTANT(backward_causal_ignored) && j > pos)) return false;
    if (a.mask.data)
      return a.mask.data[b * a.mask.stride[0] + h * a.mask.stride[1] + i * a.mask.stride[2] + j * a.mask.stride[3]] != 0;
    return true;
  };
  // Preprocessing: D = rowsum(dO O) per row (b, h, i), f32, and whether the row sees a key.
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
  std::vector<float> dk_blk, dv_blk, qrow(z(s.d)), dorow(z(s.dv)), krow, vrow;
  for (std::int64_t b = 0; b < s.b; ++b)
    for (std::int64_t g = 0; g < s.hkv; ++g)
      for (std::int64_t j0 = 0; j0 < s.lk; j0 += bk) {
        const std::int64_t nk = std::min(bk, s.lk - j0);
        // The last, partial key block never computed (key blocks counted as lk / bk): its dK, dV stay 0.
        const bool dropped = ATTNIMPL_MUTANT(backward_key_tail_tile_dropped) && nk < bk;
        // The key block's K and V, and its dK, dV accumulators (f32).
        krow.assign(z(nk * s.d), 0.0f);
        vrow.assign(z(nk * s.dv), 0.0f);
        dk_blk.assign(z(nk * s.d), 0.0f);
        dv_blk.assign(z(nk * s.dv), 0.0f);
        std::vector<char> seen(z(nk), 0);
        for (std::int64_t h = g * group; h < (g + 1) * group; ++h)
          for (std::int64_t i = 0; i < s.lq; ++i)
            for (std::int64_t jj = 0; jj < nk; ++jj) seen[z(jj)] = seen[z(jj)] || visible(b, h, i, j0 + jj);
        for (std::int64_t jj = 0; jj < nk; ++jj) {
          if (!seen[z(jj)]) continue;  // a key no row sees is never read
          for (std::int64_t x = 0; x < s.d; ++x) krow[z(jj * s.d + x)] = load(a.k, b, j0 + jj, g, x);
          for (std::int64_t e = 0; e < s.dv; ++e) vrow[z(jj * s.dv + e)] = load(a.v, b, j0 + jj, g, e);
        }
        for (std::int64_t h = g * group; h < (g + 1) * group && !dropped; ++h)
          for (std::int64_t i0 = 0; i0 < s.lq; i0 += bq) {
            if (ATTNIMPL_MUTANT(backward_gqa_last_head_only) && i0 == 0) {  // each query head starts the sums afresh
              std::fill(dk_blk.begin(), dk_blk.end(), 0.0f);
              std::fill(dv_blk.begin(), dv_blk.end(), 0.0f);
            }
            // One query block: its partial dK, dV sums are added to the key block's once.
            std::vector<float> dk_part(z(nk * s.d), 0.0f), dv_part(z(nk * s.dv), 0.0f);
            for (std::int64_t i = i0; i < std::min(s.lq, i0 + bq); ++i) {
              const std::size_t r = z((b * s.hq + h) * s.lq + i);
              if (!sees[r]) continue;  // adds nothing; its dO is not read
              const std::int64_t lse_row = ATTNIMPL_MUTANT(backward_lse_previous_row) && i > 0 ? i - 1 : i;
              const float lse = a.lse[b * a.lse_stride[0] + h * a.lse_stride[1] + lse_row * a.lse_stride[2]];
              for (std::int64_t x = 0; x < s.d; ++x) qrow[z(x)] = load(a.q, b, i, h, x);
              for (std::int64_t e = 0; e < s.dv; ++e) dorow[z(e)] = load(a.d_o, b, i, h, e);
              float* dq_row = &dq[z(((b * s.lq + i) * s.hq + h) * s.d)];
              std::vector<float> dq_part(z(s.d), 0.0f);
              for (std::int64_t jj = 0; jj < nk; ++jj) {
                if (!visible(b, h, i, j0 + jj)) continue;
                float dot = 0.0f;
                for (std::int64_t x = 0; x < s.d; ++x) dot += qrow[z(x)] * krow[z(jj * s.d + x)];
                const float p = std::exp((ATTNIMPL_MUTANT(backward_p_unscaled) ? dot : dot * scale) - lse);
                float dp = 0.0f;
                for (std::int64_t e = 0; e < s.dv; ++e) dp += dorow[z(e)] * vrow[z(jj * s.dv + e)];
                const float ds = p * (dp - big_d[r]);
                for (std::int64_t x = 0; x < s.d; ++x) {
                  dq_part[z(x)] += ds * krow[z(jj * s.d + x)];
                  dk_part[z(jj * s.d + x)] += ds * qrow[z(x)];
                }
                for (std::int64_t e = 0; e < s.dv; ++e) dv_part[z(jj * s.dv + e)] += p * dorow[z(e)];
              }
              for (std::int64_t x = 0; x < s.d; ++x) dq_row[x] += dq_part[z(x)];
            }
            for (std::size_t x = 0; x < dk_part.size(); ++x) dk_blk[x] += dk_part[x];
            for (std::size_t x = 0; x < dv_part.size(); ++x) dv_blk[x] += dv_part[x];
          }
        for (std::int64_t jj = 0; jj < nk; ++jj) {
          for (std::int64_t x = 0; x < s.d; ++x) store(a.dk, b, j0 + jj, g, x, scale * dk_blk[z(jj * s.d + x)]);
          for (std::int64_t e = 0; e < s.dv; ++e) store(a.dv, b, j0 + jj, g, e, dv_blk[z(jj * s.dv + e)]);
        }
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
