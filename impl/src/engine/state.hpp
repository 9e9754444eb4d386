// The engine's state: the geometry of a call, the online-softmax state of a
// unit's rows, the per-thread workspace and a unit's fixed facts.
// Part of engine/kernel.hpp, included there only: everything stays in its anonymous
// namespace (one translation unit, the same inlining as one file).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "../engine.hpp"
#include "../mutation.hpp"

namespace attnimpl::engine {
namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

std::int64_t round8(std::int64_t n) { return (n + 7) / 8 * 8; }

/// f(std::integral_constant<dtype, t>{}): code written once per storage
/// type (a template on it) run for the type t of this call. Inlined with
/// its callers' lambdas: the switch the caller would write itself.
template <class F>
__attribute__((always_inline)) inline void with_dtype(dtype t, F&& f) {
  switch (t) {
    case dtype::f32: f(std::integral_constant<dtype, dtype::f32>{}); break;
    case dtype::f16: f(std::integral_constant<dtype, dtype::f16>{}); break;
    case dtype::bf16: f(std::integral_constant<dtype, dtype::bf16>{}); break;
  }
}

enum class row_kind : std::uint8_t { none, all, partial };

/// Rows of a unit that go through a block's scores, softmax and P.V
/// together; the slices of a unit share one packed K and V block.
constexpr std::int64_t slice_rows = 128;

/// Sizes shared by every unit of one call.
struct geometry {
  std::int64_t group = 1;    // G
  std::int64_t q_tile = 1;   // query positions per unit
  std::int64_t rows = 1;     // G * q_tile
  std::int64_t q_tiles = 1;  // per (batch, KV head)
  std::int64_t units = 1;
  std::int64_t k_tile = 1, k_tile8 = 8;
  std::int64_t split = 1, chunks = 1;
  // Split chunks [first_chunk, chunks) may hold a key some row sees: those
  // below lie wholly left of every row's window or chunk (keys [0, split *
  // first_chunk) are never visible), so they are neither planned as tasks nor
  // folded (an empty chunk's fold changes no bit anyway).
  std::int64_t first_chunk = 0;
  std::int64_t dv8 = 8;
};

/// Online-softmax state of every row of a unit over some key range.
struct row_state {
  float* m;    // running max (-inf: nothing seen)
  float* l;    // running sum of exp(s - m)
  float* acc;  // rows x dv8, unnormalized output
};

std::int64_t state_floats(const geometry& g) { return g.rows * (g.dv8 + 2); }

row_state view_state(float* base, const geometry& g) { return {base, base + g.rows, base + 2 * g.rows}; }

void reset_state(const row_state& st, const geometry& g, std::int64_t rows) {
  std::fill(st.m, st.m + rows, neg_inf);
  std::fill(st.l, st.l + rows, 0.0f);
  std::fill(st.acc, st.acc + rows * g.dv8, 0.0f);
}

/// Per-thread scratch, reused across calls (grows only).
struct workspace {
  std::vector<float> qp, kt, vp, s, tmp, chunk, total;
  std::vector<float> zero;     // d zeros: the K row of a padding lane, never written
  std::vector<float> kgather;  // 2 x 8 keys' K, dims across (keys-across K not in one run)
  // Row addresses of the block's keys (K, and V where the caller stores it),
  // of the next block's (prefetch), and V row jj as the P.V kernel reads it
  // (the caller's row or its f32 copy in vp).
  std::vector<const char*> krows, vsrc, knext, vnext, vrows;
  std::vector<std::uint8_t> vis;
  std::vector<row_kind> kind;
  std::vector<std::int64_t> hi, head, pos, prefix, reach, group_keys;
  // Variants: a row's first visible key (window, chunk), its aligned
  // position p (ALiBi), and the bias of the block's lanes (rows x k_tile8).
  // first/run: a row's first visible lane of the block and the end of the
  // visible run from it (P.V's register kernel over a window's first block).
  std::vector<std::int64_t> lo, apos, first, run, group_first;
  std::vector<float> bias;
  std::vector<const float*> brow;  // row r's bias of the block, by lane (unit_runner::bias_of)
  std::vector<std::int64_t> blanes;

  void ensure(const problem& p, const geometry& g) {
    const auto grow = [](auto& v, std::int64_t n) {
      if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
    };
    grow(qp, g.rows * p.dims.d);
    grow(kt, p.dims.d * g.k_tile8);
    grow(vp, g.k_tile * g.dv8);
    grow(zero, p.dims.d);
    grow(kgather, 16 * p.dims.d);
    grow(krows, g.k_tile);
    grow(vsrc, g.k_tile);
    grow(knext, g.k_tile);
    grow(vnext, g.k_tile);
    grow(vrows, g.k_tile);
    grow(s, std::min(g.rows, slice_rows) * g.k_tile8);
    grow(tmp, std::max(p.dims.d, g.dv8) + (ATTNIMPL_MUTANT(masked_row_mean) ? g.dv8 : 0));
    grow(chunk, state_floats(g));
    grow(total, state_floats(g));
    grow(vis, g.rows * g.k_tile8);
    grow(kind, g.rows);
    grow(hi, g.rows);
    grow(head, g.rows);
    grow(pos, g.rows);
    grow(prefix, g.rows);
    grow(reach, g.rows);
    grow(group_keys, g.rows / 4 + 1);
    grow(lo, g.rows);
    grow(apos, g.rows);
    grow(first, g.rows);
    grow(run, g.rows);
    grow(group_first, g.rows / 4 + 1);
    if (p.var.bias.data) grow(bias, g.rows * g.k_tile8);
    if (p.var.bias.data) grow(brow, g.rows);
    if (p.var.bias.data) grow(blanes, g.rows);
  }
};

/// One work unit's fixed facts: where its rows are and what they may see.
struct unit_rows {
  std::int64_t b = 0, kv_head = 0, i0 = 0, rows = 0;
  std::int64_t keys = 0;    // keys that exist for this batch element (n[b])
  std::int64_t max_hi = 0;  // no row sees a key at or beyond this
  std::int64_t min_lo = 0;  // nor a key below this (windows, chunks)
};

}  // namespace
}  // namespace attnimpl::engine
