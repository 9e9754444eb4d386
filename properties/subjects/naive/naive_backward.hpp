// The naive subject's backward (docs/spec.md "Backward"): straight loops from
// the formulas.
// Part of naive_subject.cpp, included there only (one translation unit: its
// anonymous namespace, and the hooks the broken test plugins define before they include it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "attncheck/subject.h"
#include "naive_rows.hpp"

namespace {

// Per query row r = (b, h, i) that sees a key, in f32: the scores as the
// forward computes them (variants included), P_j = exp(S_j - LSE_in) from the
// LSE handed in, dP_j = dO . V_j, D = dO . O_in (the O handed in),
// dS_j = P_j (dP_j - D), times 1 - tanh^2(x_j / c) under a softcap c; with
// sinks d_sinks[h] -= exp(sigma - LSE_in) D;
// then dQ = scale sum_j dS_j K_j, and into one running f32 sum per key over
// every row of its KV head (the G query heads, rows in order):
// dK_j += dS_j Q_r (times scale at the end) and dV_j += P_j dO_r. One block
// each way: backward_blocks is NULL (nb 1 and 1).
// Hooks for the broken test plugins (tests/plugins/broken_backward_*.cpp
// define one and include naive_subject.cpp), each at its correct default.
#ifndef NAIVE_BACKWARD_DQ_SCALE
#define NAIVE_BACKWARD_DQ_SCALE(scale) (scale) /* dQ = scale dS K */
#endif
#ifndef NAIVE_BACKWARD_D_TERM
#define NAIVE_BACKWARD_D_TERM(d_o, o) ((d_o) * (o)) /* D = rowsum(dO O) */
#endif
#ifndef NAIVE_BACKWARD_SOFTCAP_GRAD
#define NAIVE_BACKWARD_SOFTCAP_GRAD(th) (1.0f - (th) * (th)) /* d softcap(x) / dx at tanh(x / c) = th */
#endif
#ifndef NAIVE_BACKWARD_SINK_TERM
#define NAIVE_BACKWARD_SINK_TERM(p_sink, d) (-(p_sink) * (d)) /* d(sink) += -P_sink D */
#endif
#ifndef NAIVE_BACKWARD_ADDS_TO_KV
#define NAIVE_BACKWARD_ADDS_TO_KV(h, first) true /* every query head of the group adds into dK, dV */
#endif
int v3_attend_backward(void*, const attncheck_backward_problem* bp, char* err, std::size_t err_len) {
  const attncheck_problem* p = bp->forward;
  if (p->hkv < 1 || p->hq % p->hkv != 0) {
    write_err(err, err_len, "hq must be a positive multiple of hkv");
    return 1;
  }
  const attncheck_variants* vs =
      p->struct_size >= offsetof(attncheck_problem, variants) + sizeof p->variants ? p->variants : nullptr;
  if (vs && vs->sinks && !bp->d_sinks) {
    write_err(err, err_len, "d_sinks: must be set (hq entries) when the problem has sinks");
    return 1;
  }
  if (vs && vs->sinks)
    for (std::int64_t h = 0; h < p->hq; ++h) bp->d_sinks[h] = 0.0f;
  const std::int64_t group = p->hq / p->hkv;
  const attncheck_dtype t = p->dtype;
  const auto at4 = [](const std::int64_t* st, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
    return a * st[0] + b * st[1] + c * st[2] + d * st[3];
  };
  std::vector<float> q(static_cast<std::size_t>(p->d)), pr(static_cast<std::size_t>(p->lk)), ds(static_cast<std::size_t>(p->lk));
  std::vector<char> on(static_cast<std::size_t>(p->lk));
  std::vector<float> dk_acc(static_cast<std::size_t>(p->lk * p->d)), dv_acc(static_cast<std::size_t>(p->lk * p->dv));
  for (std::int64_t b = 0; b < p->b; ++b) {
    const std::int64_t n = p->key_len ? p->key_len[b] : p->lk;
    for (std::int64_t g = 0; g < p->hkv; ++g) {
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0f);
      const auto key = [&](std::int64_t j, std::int64_t x) { return load(t, p->k.data, at4(p->k.stride, b, j, g, x)); };
      const auto val = [&](std::int64_t j, std::int64_t e) { return load(t, p->v.data, at4(p->v.stride, b, j, g, e)); };
      for (std::int64_t h = g * group; h < (g + 1) * group; ++h)
        for (std::int64_t i = 0; i < p->lq; ++i) {
          load_query(p, b, i, h, q);
          const std::int64_t pos = n - p->lq + i;
          const row_variants rv = variants_of(vs, b, h, i, pos);
          bool any = false;
          for (std::int64_t j = 0; j < p->lk; ++j) {
            bool vis = j < n && !(p->causal && j > pos);
            if (vis && p->mask) vis = p->mask[at4(p->mask_stride, b, h, i, j)] != 0;
            vis = vis && rv.visible(j);
            on[static_cast<std::size_t>(j)] = vis;
            any = any || vis;
          }
          for (std::int64_t x = 0; x < p->d; ++x)
            if (!any) store(t, bp->dq, at4(bp->dq_stride, b, i, h, x), 0.0f);
          if (!any) continue;  // a row that sees nothing adds nothing
          const float lse = bp->lse[b * bp->lse_stride[0] + h * bp->lse_stride[1] + i * bp->lse_stride[2]];
          const auto d_o = [&](std::int64_t e) { return load(t, bp->d_o.data, at4(bp->d_o.stride, b, i, h, e)); };
          float big_d = 0.0f;
          for (std::int64_t e = 0; e < p->dv; ++e)
            big_d += NAIVE_BACKWARD_D_TERM(d_o(e), load(t, bp->o.data, at4(bp->o.stride, b, i, h, e)));
          // d(sink): this row's -exp(sigma - LSE) D, rows in order.
          if (rv.sigma != -std::numeric_limits<float>::infinity())
            bp->d_sinks[h] += NAIVE_BACKWARD_SINK_TERM(std::exp(rv.sigma - lse), big_d);
          for (std::int64_t j = 0; j < p->lk; ++j) {
            if (!on[static_cast<std::size_t>(j)]) continue;
            float dot = 0.0f;
            for (std::int64_t x = p->d - 1; x >= 0; --x) dot += q[static_cast<std::size_t>(x)] * key(j, x);
            const float x_j = dot * p->scale;
            const float pj = std::exp(rv.score(x_j, j) - lse);
            float dp = 0.0f;
            for (std::int64_t e = 0; e < p->dv; ++e) dp += d_o(e) * val(j, e);
            pr[static_cast<std::size_t>(j)] = pj;
            ds[static_cast<std::size_t>(j)] = pj * (dp - big_d);
            if (vs && vs->softcap != 0) {  // d softcap(x) / dx = 1 - tanh^2(x / c)
              const float th = std::tanh(x_j / vs->softcap);
              ds[static_cast<std::size_t>(j)] *= NAIVE_BACKWARD_SOFTCAP_GRAD(th);
            }
          }
          for (std::int64_t x = 0; x < p->d; ++x) {
            float acc = 0.0f;
            for (std::int64_t j = 0; j < p->lk; ++j)
              if (on[static_cast<std::size_t>(j)]) acc += ds[static_cast<std::size_t>(j)] * key(j, x);
            store(t, bp->dq, at4(bp->dq_stride, b, i, h, x), NAIVE_BACKWARD_DQ_SCALE(p->scale) * acc);
          }
          for (std::int64_t j = 0; j < p->lk; ++j) {
            if (!on[static_cast<std::size_t>(j)] || !(NAIVE_BACKWARD_ADDS_TO_KV(h, g * group))) continue;
            for (std::int64_t x = 0; x < p->d; ++x)
              dk_acc[static_cast<std::size_t>(j * p->d + x)] += ds[static_cast<std::size_t>(j)] * q[static_cast<std::size_t>(x)];
            for (std::int64_t e = 0; e < p->dv; ++e)
              dv_acc[static_cast<std::size_t>(j * p->dv + e)] += pr[static_cast<std::size_t>(j)] * d_o(e);
          }
        }
      for (std::int64_t j = 0; j < p->lk; ++j) {
        for (std::int64_t x = 0; x < p->d; ++x)
          store(t, bp->dk, at4(bp->dk_stride, b, j, g, x), p->scale * dk_acc[static_cast<std::size_t>(j * p->d + x)]);
        for (std::int64_t e = 0; e < p->dv; ++e)
          store(t, bp->dv, at4(bp->dv_stride, b, j, g, e), dv_acc[static_cast<std::size_t>(j * p->dv + e)]);
      }
    }
  }
  return 0;
}

}  // namespace
