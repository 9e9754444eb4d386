// Contract 1.1 variants (sliding window, chunked local, softcap, ALiBi, bias,
// sinks) and their combinations: the kernel against a double-precision
// reference written here (independent of the engine), at tiny and production
// tiles, on prefill, decode, split-KV and the paged cache; the same bits on
// every thread count and on both instruction sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attnimpl/attention.hpp"
#include "attnimpl/kv_cache.hpp"
#include "support.hpp"

namespace {

using namespace attnimpl_test;
using attnimpl::isa;

constexpr float inf = std::numeric_limits<float>::infinity();

/// The variants of one case and the storage behind their pointers.
struct variant_case {
  std::string name;
  std::int64_t window_left = -1, window_right = -1, chunk = 0;
  float softcap = 0.0f;
  bool alibi = false, sinks = false;
  int bias = 0;              // 0 none; 1 f32 full (b,h,i,j); 2 bf16 over (i,j) only; 3 f16 per key, with -inf entries
  double bias_masked = 0.0;  // share of -inf bias entries
};

struct variant_data {
  std::vector<float> alibi, sinks;
  buffer bias;  // over (b, h, i, j); zero strides on broadcast axes
  attnimpl::variants var;
};

variant_data make_variants(const variant_case& vc, const attnimpl::shape& s, std::uint64_t seed) {
  variant_data vd;
  std::mt19937_64 rng(seed * 7919 + 17);
  vd.var.window_left = vc.window_left;
  vd.var.window_right = vc.window_right;
  vd.var.chunk = vc.chunk;
  vd.var.softcap = vc.softcap;
  if (vc.alibi) {
    // The standard slopes, and a negative one (any sign is legal).
    for (std::int64_t h = 0; h < s.hq; ++h)
      vd.alibi.push_back(static_cast<float>(std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(s.hq))));
    vd.alibi.back() = -0.25f;
    vd.var.alibi = vd.alibi.data();
  }
  if (vc.sinks) {
    std::uniform_real_distribution<float> u(-1.0f, 3.0f);
    for (std::int64_t h = 0; h < s.hq; ++h) vd.sinks.push_back(u(rng));
    vd.sinks[0] = -inf;  // equal to no sink
    vd.var.sinks = vd.sinks.data();
  }
  if (vc.bias) {
    std::array<std::int64_t, 4> dims{s.b, s.hq, s.lq, s.lk};
    buffer& bias = vd.bias;
    bias.type = vc.bias == 1 ? dtype::f32 : vc.bias == 2 ? dtype::bf16 : dtype::f16;
    if (vc.bias == 2) dims = {1, 1, s.lq, s.lk};
    if (vc.bias == 3) dims = {1, 1, 1, s.lk};
    // Strided: a gap of 3 elements after each key row, zero strides on broadcast axes.
    const std::int64_t sj = 1, si = dims[3] + 3, sh = si * dims[2], sb = sh * dims[1];
    bias.dims = dims;
    bias.stride = {dims[0] == 1 ? 0 : sb, dims[1] == 1 ? 0 : sh, dims[2] == 1 ? 0 : si, sj};
    bias.bytes.assign(static_cast<std::size_t>(sb * dims[0] * bias.elem()), 0);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::bernoulli_distribution masked(vc.bias_masked);
    for (std::int64_t b = 0; b < dims[0]; ++b)
      for (std::int64_t h = 0; h < dims[1]; ++h)
        for (std::int64_t i = 0; i < dims[2]; ++i)
          for (std::int64_t j = 0; j < dims[3]; ++j) bias.set(b, h, i, j, masked(rng) ? -inf : round_to(bias.type, normal(rng)));
    vd.var.bias = {bias.data(), bias.type, bias.stride};
  }
  return vd;
}

/// floor(a / c) for c > 0, toward minus infinity.
std::int64_t floor_div(std::int64_t a, std::int64_t c) { return a >= 0 ? a / c : -((-a + c - 1) / c); }

/// The contract's formulas in double: O (b, i, h, e) and LSE (b, h, i).
struct reference {
  std::vector<double> o, lse;
};

reference reference_of(const problem& p, const variant_data& vd) {
  const auto& d = p.dims;
  const auto& v = vd.var;
  reference ref;
  ref.o.assign(static_cast<std::size_t>(d.b * d.lq * d.hq * d.dv), 0.0);
  ref.lse.assign(static_cast<std::size_t>(d.b * d.hq * d.lq), 0.0);
  const double scale = p.scale != 0.0f ? p.scale : static_cast<double>(attnimpl::default_scale(d.d));
  const std::int64_t group = d.hq / d.hkv;
  for (std::int64_t b = 0; b < d.b; ++b)
    for (std::int64_t h = 0; h < d.hq; ++h)
      for (std::int64_t i = 0; i < d.lq; ++i) {
        const std::int64_t n = p.key_len.empty() ? d.lk : p.key_len[static_cast<std::size_t>(b)];
        const std::int64_t pos = n - d.lq + i;
        std::vector<std::pair<std::int64_t, double>> seen;
        for (std::int64_t j = 0; j < d.lk; ++j) {
          if (!p.visible(b, h, i, j)) continue;
          if (v.window_left >= 0 && j < pos - v.window_left) continue;
          if (v.window_right >= 0 && j > pos + v.window_right) continue;
          if (v.chunk > 0 && floor_div(j, v.chunk) != floor_div(pos, v.chunk)) continue;
          const double bias = v.bias.data ? static_cast<double>(vd.bias.get(b, h, i, j)) : 0.0;
          if (bias == -static_cast<double>(inf)) continue;
          double x = 0;
          for (std::int64_t e = 0; e < d.d; ++e)
            x += static_cast<double>(p.q.get(b, i, h, e)) * static_cast<double>(p.k.get(b, j, h / group, e));
          x *= scale;
          if (v.softcap > 0) x = v.softcap * std::tanh(x / v.softcap);
          if (v.alibi) x += static_cast<double>(v.alibi[h]) * static_cast<double>(j - pos);
          seen.emplace_back(j, x + bias);
        }
        const double sink = v.sinks ? static_cast<double>(v.sinks[h]) : -static_cast<double>(inf);
        double m = sink;
        for (const auto& [j, s] : seen) m = std::max(m, s);
        const std::size_t li = static_cast<std::size_t>((b * d.hq + h) * d.lq + i);
        if (seen.empty()) {
          ref.lse[li] = sink;  // O = 0
          continue;
        }
        double den = std::exp(sink - m);
        std::vector<double> num(static_cast<std::size_t>(d.dv), 0.0);
        for (const auto& [j, s] : seen) {
          const double w = std::exp(s - m);
          den += w;
          for (std::int64_t e = 0; e < d.dv; ++e) num[static_cast<std::size_t>(e)] += w * p.v.get(b, j, h / group, e);
        }
        for (std::int64_t e = 0; e < d.dv; ++e)
          ref.o[static_cast<std::size_t>(((b * d.lq + i) * d.hq + h) * d.dv + e)] = num[static_cast<std::size_t>(e)] / den;
        ref.lse[li] = m + std::log(den);
      }
  return ref;
}

std::string describe(const problem& p, const variant_case& vc, const attnimpl::config& cfg) {
  std::ostringstream s;
  s << p.line() << " variant " << vc.name << " window=[" << vc.window_left << "," << vc.window_right << "] chunk=" << vc.chunk
    << " softcap=" << vc.softcap << " alibi=" << vc.alibi << " sinks=" << vc.sinks << " bias=" << vc.bias
    << " q_tile=" << cfg.q_tile << " k_tile=" << cfg.k_tile << " split_keys=" << cfg.split_keys << " threads=" << cfg.threads
    << " isa=" << attnimpl::isa_name(cfg.simd);
  return s.str();
}

/// Runs the kernel with the variants; fails the test on a non-ok status.
std::vector<std::uint32_t> run_variants(problem& p, const variant_data& vd, const attnimpl::config& cfg) {
  attnimpl::attention_args a = p.args();
  a.var = vd.var;
  const attnimpl::status st = attnimpl::attention(a, cfg);
  EXPECT_TRUE(st.ok()) << st.message;
  return output_bits(p);
}

/// |kernel - reference| within a budget of f32 arithmetic over short rows
/// (1e-4 relative to the row's scale), plus the output type's rounding.
void expect_close(const problem& p, const reference& ref, const std::string& what) {
  const auto& d = p.dims;
  const double store = p.type == dtype::f32 ? 0.0 : p.type == dtype::f16 ? 0x1p-11 : 0x1p-8;
  std::int64_t bad = 0;
  for (std::int64_t b = 0; b < d.b; ++b)
    for (std::int64_t i = 0; i < d.lq; ++i)
      for (std::int64_t h = 0; h < d.hq; ++h) {
        for (std::int64_t e = 0; e < d.dv; ++e) {
          const double want = ref.o[static_cast<std::size_t>(((b * d.lq + i) * d.hq + h) * d.dv + e)];
          const double got = p.o.get(b, i, h, e);
          if (!(std::fabs(got - want) <= 1e-4 + store * std::fabs(want)) && bad++ < 5)
            ADD_FAILURE() << what << ": O[" << b << "," << i << "," << h << "," << e << "] = " << got << ", want " << want;
        }
        const std::size_t li = static_cast<std::size_t>((b * d.hq + h) * d.lq + i);
        const double want = ref.lse[li], got = p.lse[li];
        const bool ok = std::isinf(want) ? got == want : std::fabs(got - want) <= 1e-4 * (1 + std::fabs(want));
        if (!ok && bad++ < 5)
          ADD_FAILURE() << what << ": LSE[" << b << "," << h << "," << i << "] = " << got << ", want " << want;
      }
  EXPECT_EQ(bad, 0) << what;
}

const std::vector<variant_case>& cases() {
  static const std::vector<variant_case> all = {
      {.name = "window_causal", .window_left = 3, .window_right = 0},
      {.name = "window_both_sides", .window_left = 5, .window_right = 2},
      {.name = "window_diagonal", .window_left = 0, .window_right = 0},
      {.name = "window_right_only", .window_right = 1},
      {.name = "chunk", .chunk = 4},
      {.name = "chunk_odd", .chunk = 7},
      {.name = "softcap", .softcap = 1.0f},
      {.name = "softcap_wide", .softcap = 30.0f},
      {.name = "alibi", .alibi = true},
      {.name = "bias_f32_full", .bias = 1},
      {.name = "bias_bf16_broadcast", .bias = 2},
      {.name = "bias_f16_masking", .bias = 3, .bias_masked = 0.3},
      {.name = "sinks", .sinks = true},
      {.name = "window_sinks", .window_left = 2, .window_right = 0, .sinks = true},
      {.name = "softcap_alibi_bias", .softcap = 2.0f, .alibi = true, .bias = 1, .bias_masked = 0.1},
      {.name = "everything",
       .window_left = 6,
       .window_right = 1,
       .chunk = 5,
       .softcap = 1.5f,
       .alibi = true,
       .sinks = true,
       .bias = 2,
       .bias_masked = 0.15},
  };
  return all;
}

struct shape_case {
  attnimpl::shape dims;
  bool causal;
  int mask;  // grid_spec: mask kind, padding on odd, layout mask % 3
  dtype type;
};

// Prefill (GQA, a head dim off the vector width), decode (the direct path:
// G rows <= 8; keys-across K on mask 2), Lq > Lk (rows at p < 0), and
// lengths that cross production tiles.
const std::vector<shape_case>& shapes() {
  static const std::vector<shape_case> all = {
      {{.b = 2, .hq = 4, .hkv = 2, .lq = 13, .lk = 29, .d = 12, .dv = 8}, true, 0, dtype::f32},
      {{.b = 2, .hq = 4, .hkv = 2, .lq = 13, .lk = 29, .d = 12, .dv = 8}, false, 1, dtype::f32},
      {{.b = 2, .hq = 4, .hkv = 1, .lq = 1, .lk = 40, .d = 16, .dv = 16}, true, 0, dtype::f32},
      {{.b = 2, .hq = 4, .hkv = 1, .lq = 1, .lk = 40, .d = 16, .dv = 16}, true, 2, dtype::bf16},
      {{.b = 1, .hq = 2, .hkv = 2, .lq = 9, .lk = 5, .d = 8, .dv = 8}, true, 3, dtype::f16},
      {{.b = 1, .hq = 2, .hkv = 1, .lq = 70, .lk = 300, .d = 32, .dv = 24}, true, 0, dtype::f32},
  };
  return all;
}

const attnimpl::config tiny{.threads = 1, .q_tile = 2, .k_tile = 3, .split_keys = 6};
const attnimpl::config production{.threads = 1};

TEST(variants, match_the_double_reference_at_tiny_and_production_tiles) {
  std::uint64_t seed = 100;
  for (const shape_case& sh : shapes())
    for (const variant_case& vc : cases()) {
      // Wide windows relative to the shape where it is long.
      variant_case v = vc;
      if (sh.dims.lk >= 300) {
        if (v.window_left > 0) v.window_left *= 20;
        if (v.chunk > 0) v.chunk *= 16;
      }
      problem p = make_problem(grid_spec(sh.dims, sh.causal, sh.mask, sh.type, ++seed));
      const variant_data vd = make_variants(v, sh.dims, seed);
      const reference ref = reference_of(p, vd);
      for (const attnimpl::config& cfg : {tiny, production}) {
        run_variants(p, vd, cfg);
        expect_close(p, ref, describe(p, v, cfg));
        if (HasFailure()) return;
      }
    }
}

TEST(variants, same_bits_on_every_thread_count_split_and_instruction_set) {
  std::uint64_t seed = 500;
  const bool avx2 = attnimpl::isa_supported(isa::avx2);
  for (const shape_case& sh : shapes())
    for (const variant_case& vc : cases()) {
      problem p = make_problem(grid_spec(sh.dims, sh.causal, sh.mask, sh.type, ++seed));
      const variant_data vd = make_variants(vc, sh.dims, seed);
      for (attnimpl::config base : {tiny, production}) {
        base.simd = isa::portable;
        const std::vector<std::uint32_t> want = run_variants(p, vd, base);
        for (int threads : {1, 2, 3, 4}) {
          for (isa which : {isa::portable, isa::avx2, isa::avx512}) {
            if (!attnimpl::isa_supported(which)) continue;
            attnimpl::config cfg = base;
            cfg.threads = threads;
            cfg.simd = which;
            ASSERT_EQ(run_variants(p, vd, cfg), want) << describe(p, vc, cfg);
          }
        }
      }
    }
  if (!avx2) GTEST_SKIP() << "this CPU has no AVX2: thread counts compared on the portable path only";
  if (!attnimpl::isa_supported(isa::avx512))
    GTEST_SKIP() << "this CPU has no AVX-512: compared on the portable and AVX2 paths only";
}

TEST(variants, off_by_default_and_minus_inf_sinks_change_no_bit) {
  problem p = make_problem(grid_spec({.b = 2, .hq = 4, .hkv = 2, .lq = 13, .lk = 29, .d = 12, .dv = 8}, true, 1, dtype::f32, 3));
  run(p, tiny);
  const std::vector<std::uint32_t> plain = output_bits(p);
  variant_data vd;
  vd.sinks.assign(4, -inf);
  vd.var.sinks = vd.sinks.data();
  vd.var.window_left = 1000;  // wider than every row: no change
  vd.var.chunk = 1 << 20;
  EXPECT_EQ(run_variants(p, vd, tiny), plain);
}

TEST(variants, a_row_with_no_visible_key_gives_zero_and_the_sink) {
  // Lq > Lk with chunks: rows at p < 0 see nothing (floor toward -inf).
  problem p = make_problem(grid_spec({.b = 1, .hq = 2, .hkv = 1, .lq = 6, .lk = 3, .d = 8, .dv = 8}, true, 0, dtype::f32, 4));
  variant_data vd;
  vd.sinks = {0.5f, -inf};
  vd.var.sinks = vd.sinks.data();
  vd.var.chunk = 2;
  for (const attnimpl::config& cfg : {tiny, production}) {
    run_variants(p, vd, cfg);
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t h = 0; h < 2; ++h) {
        for (std::int64_t e = 0; e < 8; ++e) EXPECT_EQ(p.o.get(0, i, h, e), 0.0f);
        EXPECT_EQ(p.lse[static_cast<std::size_t>(h * 6 + i)], vd.sinks[static_cast<std::size_t>(h)]);
      }
  }
}

TEST(variants, a_window_prefill_never_visits_blocks_outside_the_window) {
  // NaN in every K and V row outside every window: a block wholly outside
  // that were loaded and multiplied would poison the output.
  const attnimpl::shape dims{.b = 1, .hq = 2, .hkv = 1, .lq = 8, .lk = 200, .d = 8, .dv = 8};
  problem p = make_problem(grid_spec(dims, true, 0, dtype::f32, 5));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t j = 0; j < 200 - 8 - 4; ++j)
    for (std::int64_t e = 0; e < 8; ++e) p.k.set(0, j, 0, e, nan), p.v.set(0, j, 0, e, nan);
  variant_data vd;
  vd.var.window_left = 4;
  const reference ref = reference_of(p, vd);
  for (const attnimpl::config& cfg : {tiny, production, attnimpl::config{.threads = 2, .k_tile = 16, .split_keys = 32}}) {
    run_variants(p, vd, cfg);
    expect_close(p, ref, "window over NaN keys outside it");
  }
}

TEST(variants, the_paged_cache_gives_the_bits_of_attention) {
  // One cache per page size; the newest lq tokens attend with the variants,
  // against attention() over the same keys in one contiguous tensor.
  for (std::int64_t page_size : {3, 16}) {
    for (const variant_case& vc : cases()) {
      for (std::int64_t lq : {1, 5}) {
        const attnimpl::shape dims{.b = 2, .hq = 4, .hkv = 2, .lq = lq, .lk = 37, .d = 16, .dv = 8};
        problem p = make_problem(grid_spec(dims, true, 0, dtype::bf16, 900 + static_cast<std::uint64_t>(lq)));
        const variant_data vd = make_variants(vc, dims, 7);
        const attnimpl::config cfg{.threads = 2, .q_tile = 2, .k_tile = 8, .split_keys = 16};
        const std::vector<std::uint32_t> want = run_variants(p, vd, cfg);
        std::optional<attnimpl::paged_kv_cache> cache;
        const std::int64_t pages = 2 * (37 / page_size + 1);
        std::vector<std::int32_t> order(static_cast<std::size_t>(pages));
        std::iota(order.rbegin(), order.rend(), 0);  // pages out of order
        ASSERT_TRUE(attnimpl::paged_kv_cache::create(
                        {.batch = 2, .hkv = 2, .d = 16, .dv = 8, .type = dtype::bf16, .page_size = page_size, .pages = pages},
                        order, cache)
                        .ok());
        for (std::int64_t b = 0; b < 2; ++b) {
          attnimpl::kv_tokens t;
          t.k = p.k.bytes.data() + p.k.index(b, 0, 0, 0) * 2;
          t.k_stride = {p.k.stride[1], p.k.stride[2], p.k.stride[3]};
          t.v = p.v.bytes.data() + p.v.index(b, 0, 0, 0) * 2;
          t.v_stride = {p.v.stride[1], p.v.stride[2], p.v.stride[3]};
          ASSERT_TRUE(cache->append(b, 37, t).ok());
        }
        std::fill(p.o.bytes.begin(), p.o.bytes.end(), 0);
        std::fill(p.lse.begin(), p.lse.end(), 0.0f);
        attnimpl::cache_attention_args a;
        a.hq = 4;
        a.lq = lq;
        a.q = p.q.in();
        a.o = p.o.out();
        a.lse = {p.lse.data(), {4 * lq, lq, 1}};
        a.var = vd.var;
        ASSERT_TRUE(cache->attend(a, cfg).ok());
        ASSERT_EQ(output_bits(p), want) << describe(p, vc, cfg) << " page_size " << page_size;
      }
    }
  }
}

TEST(variants, bad_fields_are_named) {
  problem p = make_problem(grid_spec({.b = 1, .hq = 2, .hkv = 1, .lq = 2, .lk = 3, .d = 8, .dv = 8}, false, 0, dtype::f32, 6));
  const std::vector<float> nan_slopes = {0.5f, std::numeric_limits<float>::quiet_NaN()};
  const std::vector<float> plus_inf_sinks = {0.0f, inf};
  const auto expect_invalid = [&](const attnimpl::variants& v, const std::string& field) {
    attnimpl::attention_args a = p.args();
    a.var = v;
    const attnimpl::status st = attnimpl::attention(a, tiny);
    EXPECT_FALSE(st.ok()) << field;
    EXPECT_NE(st.message.find(field), std::string::npos) << st.message;
  };
  const auto with = [](auto set) {
    attnimpl::variants v;
    set(v);
    return v;
  };
  expect_invalid(with([](auto& v) { v.window_left = -2; }), "variants.window_left");
  expect_invalid(with([](auto& v) { v.window_right = -5; }), "variants.window_right");
  expect_invalid(with([](auto& v) { v.chunk = -1; }), "variants.chunk");
  expect_invalid(with([](auto& v) { v.softcap = -1.0f; }), "variants.softcap");
  expect_invalid(with([](auto& v) { v.softcap = inf; }), "variants.softcap");
  expect_invalid(with([](auto& v) { v.softcap = std::numeric_limits<float>::quiet_NaN(); }), "variants.softcap");
  expect_invalid(with([&](auto& v) { v.alibi = nan_slopes.data(); }), "variants.alibi[1]");
  expect_invalid(with([&](auto& v) { v.sinks = plus_inf_sinks.data(); }), "variants.sinks[1]");
  attnimpl::variants bad_bias;
  bad_bias.bias = {nan_slopes.data(), static_cast<dtype>(7), {}};
  expect_invalid(bad_bias, "variants.bias.type");
  EXPECT_EQ(attnimpl::key_blocks(40, tiny, {}), attnimpl::key_blocks(40, tiny));
  EXPECT_EQ(attnimpl::key_blocks(40, tiny, with([&](auto& v) { v.sinks = plus_inf_sinks.data(); })),
            attnimpl::key_blocks(40, tiny) + 1);
}

}  // namespace
