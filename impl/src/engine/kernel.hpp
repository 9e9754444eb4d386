// FlashAttention-2 style engine. A work unit is (batch, KV head, query tile):
// its rows are the G query heads of that KV head times q_tile positions, so
// each K/V block is packed once per group. Keys are walked in blocks at fixed
// absolute boundaries (multiples of k_tile from key 0) grouped in split
// chunks (multiples of split_keys); a row's arithmetic depends only on which
// keys it sees, never on the batch, Lq, the tile it shares or the threads.
//
// The whole kernel for one instruction set: included once by each of
// kernel_avx512.cpp, kernel_avx2.cpp and kernel_portable.cpp (after
// ATTNIMPL_ISA_AVX2 and ATTNIMPL_ISA_NS), so everything here is TU-local
// except the entry points in namespace attnimpl::engine::ATTNIMPL_ISA_NS
// (their table, entry_points, is engine.hpp's isa_build).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "../convert.hpp"
#include "../engine.hpp"
#include "../micro_kernels.hpp"
#include "../mutation.hpp"
#include "../lanes.hpp"
#include "../thread_pool.hpp"

// The engine's parts, in one translation unit (same inlining as one file).
#include "state.hpp"
#include "unit_runner.hpp"
#include "rows.hpp"
#include "blocks.hpp"
#include "scores.hpp"
#include "softmax.hpp"
#include "values.hpp"

namespace attnimpl::engine {
namespace {

/// A lower bound of every row's first visible key (unit_runner::setup's lo):
/// windows and chunks start at or after the lowest query position's. 0
/// without either. Work is planned by the chunks at or after it, so a
/// sliding-window or chunked decode gives threads only chunks it reads.
std::int64_t lowest_visible_key(const problem& p) {
  const variants& var = p.var;
  const bool window = var.window_left >= 0 && !ATTNIMPL_MUTANT(window_ignored);
  const bool chunked = var.chunk > 0 && !ATTNIMPL_MUTANT(chunk_ignored);
  if (!window && !chunked) return 0;
  std::int64_t keys = p.dims.lk;
  if (p.key_len)
    for (std::int64_t b = 0; b < p.dims.b; ++b) keys = std::min(keys, p.key_len[b]);
  std::int64_t pos = keys - p.dims.lq;  // query 0's position, the lowest
  if (ATTNIMPL_MUTANT(causal_top_left)) pos = std::min<std::int64_t>(pos, 0);
  if (ATTNIMPL_MUTANT(chunk_off_by_one) || ATTNIMPL_MUTANT(window_left_off_by_one)) pos -= 1;
  std::int64_t lo = 0;
  if (window) lo = std::max(lo, pos - var.window_left);
  if (chunked && pos > 0) lo = std::max(lo, pos / var.chunk * var.chunk);
  return lo;
}

/// Rows of a unit at most with a per-position bias (plan).
constexpr std::int64_t bias_unit_rows = 256;

geometry plan(const problem& p, const config& cfg) {
  geometry g;
  g.group = p.dims.hq / p.dims.hkv;
  g.q_tile = std::min(q_tile_for(p.dims, cfg), p.dims.lq);
  // A bias with a row per query position: each row's entries of a block sit
  // in a page of their own, and every block visits all the unit's rows. At
  // 512 rows those pages outrun the TLB and the page walks cost a third of
  // the time; at 256 the loss is the rows' bias lines alone. A row's bits do
  // not depend on the tile it shares.
  if (cfg.q_tile <= 0 && p.var.bias.data && p.var.bias.stride[2] != 0)
    g.q_tile = std::min(g.q_tile, std::max<std::int64_t>(1, bias_unit_rows / g.group));
  g.rows = g.group * g.q_tile;
  g.q_tiles = (p.dims.lq + g.q_tile - 1) / g.q_tile;
  if (ATTNIMPL_MUTANT(query_tail_tile_dropped)) g.q_tiles = std::max<std::int64_t>(1, p.dims.lq / g.q_tile);
  g.units = p.dims.b * p.dims.hkv * g.q_tiles;
  g.k_tile = cfg.k_tile;
  g.k_tile8 = round8(cfg.k_tile);
  g.split = cfg.split_keys;
  g.chunks = std::max<std::int64_t>(1, (p.dims.lk + g.split - 1) / g.split);
  g.dv8 = round8(p.dims.dv);
  g.first_chunk = std::min(g.chunks - 1, lowest_visible_key(p) / g.split);
  return g;
}

workspace& thread_workspace() {
  thread_local workspace ws;
  return ws;
}

}  // namespace

namespace ATTNIMPL_ISA_NS {

void fma_array(const float* a, const float* b, const float* c, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = simd::fma1(a[i], b[i], c[i]);
}

void exp_array(const float* x, float* y, std::size_t n) {
  std::size_t i = 0;
#if ATTNIMPL_ISA_AVX512
  for (; i + 16 <= n; i += 16) simd::store16(y + i, simd::exp16(simd::load16(x + i)));  // the softmax's exp
#endif
  for (; i + 8 <= n; i += 8) simd::store(y + i, simd::exp8(simd::load(x + i)));
  for (; i < n; ++i) y[i] = simd::exp1(x[i]);
}

void tanh_array(const float* x, float* y, std::size_t n) {
  std::size_t i = 0;
#if ATTNIMPL_ISA_AVX512
  for (; i + 16 <= n; i += 16) simd::store16(y + i, simd::tanh16(simd::load16(x + i)));  // the softcap's, 16 lanes
#endif
  float in[8] = {}, out[8];
  for (; i < n; i += 8) {
    const std::size_t m = std::min<std::size_t>(8, n - i);
    std::copy(x + i, x + i + m, in);
    simd::store(out, simd::tanh8(simd::load(in)));
    std::copy(out, out + m, y + i);
  }
}

void run(const problem& p, const config& cfg) {
  const geometry g = plan(p, cfg);
  auto& pool = thread_pool::instance();
  // Split chunks across threads only when units alone cannot fill them; the
  // bits are the same either way (same chunks, same fold order).
  const std::int64_t live = g.chunks - g.first_chunk;  // chunks a row may see
  const std::int64_t split_tasks = g.units * live;
  const bool split = live > 1 && g.units < 2 * cfg.threads && split_tasks * state_floats(g) <= (16ll << 20);
  // Every lambda captures one reference: std::function keeps it inline
  // (libstdc++ stores at most two pointers without allocating), so a decode
  // step allocates nothing once the workspaces have grown.
  struct job {
    const problem& p;
    const geometry& g;
    float* parts;  // split: the chunks' partial states, (unit, chunk) order; else null
  };
  float* parts = nullptr;
  if (split) {
    // Kept by the calling thread across calls (grows only, at most the 64 MiB cap above).
    thread_local std::vector<float> store;
    if (static_cast<std::int64_t>(store.size()) < split_tasks * state_floats(g))
      store.resize(static_cast<std::size_t>(split_tasks * state_floats(g)));
    parts = store.data();
  }
  const job jb{p, g, parts};
  const std::function<void(int)> prepare = [&jb](int) { thread_workspace().ensure(jb.p, jb.g); };
  if (split)
    pool.run(
        cfg.threads, split_tasks,
        [&jb](std::int64_t t, int) {
          workspace& ws = thread_workspace();
          unit_runner runner(jb.p, jb.g, ws);
          const std::int64_t live = jb.g.chunks - jb.g.first_chunk;
          const std::int64_t u = t / live, c = jb.g.first_chunk + t % live;
          const unit_rows ur = runner.setup(u);
          runner.chunk(ur, c * jb.g.split, (c + 1) * jb.g.split, view_state(jb.parts + t * state_floats(jb.g), jb.g));
        },
        &prepare);
  // Each unit's chunks folded into its total in chunk order: computed here
  // one at a time, or (split) the partial states the tasks above left.
  pool.run(
      cfg.threads, g.units,
      [&jb](std::int64_t u, int) {
        workspace& ws = thread_workspace();
        unit_runner runner(jb.p, jb.g, ws);
        const unit_rows ur = runner.setup(u);
        const row_state total = view_state(ws.total.data(), jb.g);
        const std::int64_t live = jb.g.chunks - jb.g.first_chunk;
        for (std::int64_t c = 0; c < live; ++c) {
          if (!jb.parts) {
            const row_state part = view_state(ws.chunk.data(), jb.g);
            const std::int64_t at = jb.g.first_chunk + c;
            runner.chunk(ur, at * jb.g.split, (at + 1) * jb.g.split, part);
            runner.fold(ur, total, part, c == 0);
            continue;
          }
          std::int64_t at = c;
          if (ATTNIMPL_MUTANT(thread_order)) at = live - 1 - c;  // the split path folds last chunk first
          runner.fold(ur, total, view_state(jb.parts + (u * live + at) * state_floats(jb.g), jb.g), c == 0);
        }
        runner.finish(ur, total);
      },
      &prepare);
}

const isa_build entry_points{&run, &exp_array, &tanh_array, &fma_array};

}  // namespace ATTNIMPL_ISA_NS
}  // namespace attnimpl::engine
