// Every O and LSE element within the suite's error bound of its oracle (the
// auto tier, naive.hpp), over shapes around the tile sizes, GQA groups, masks
// and types. NaN/inf are checked before the bound. (oracle_grid_test.cpp runs
// the MPFR tier alone; this one reaches the large D and head counts cheaply.)
#include <gtest/gtest.h>

#include <cmath>

#include "naive.hpp"

namespace {

using namespace attnimpl_test;

void expect_within_bound(problem& p, const attnimpl::config& cfg) {
  run(p, cfg);
  const naive_result ref = naive_attention(p, cfg);
  ASSERT_TRUE(o_within_bound(p, ref));
  for (std::size_t at = 0; at < p.lse.size(); ++at) {
    if (std::isinf(ref.lse[at])) {
      ASSERT_EQ(p.lse[at], -INFINITY) << p.line() << " LSE[" << at << "]";
    } else {
      ASSERT_TRUE(std::isfinite(p.lse[at])) << p.line() << " LSE[" << at << "]";
      ASSERT_TRUE(std::isfinite(ref.lse_bound[at])) << p.line();
      ASSERT_LE(std::fabs(p.lse[at] - ref.lse[at]), ref.lse_bound[at])
          << p.line() << " LSE[" << at << "] expected " << ref.lse[at] << " got " << p.lse[at] << " bound " << ref.lse_bound[at];
    }
  }
}

struct grid_point {
  std::int64_t tile, g, hkv, lq, lk, d, dv;
};

TEST(naive_accuracy, lengths_around_tiles_groups_and_head_dims) {
  const std::int64_t ds[] = {1, 3, 8, 63, 64, 128};
  const std::int64_t groups[] = {1, 2, 3, 4, 8};
  std::uint64_t seed = 100;
  for (std::int64_t tile : {2, 3}) {
    const std::int64_t lengths[] = {1, tile - 1 > 0 ? tile - 1 : 1, tile, tile + 1, 2 * tile + 1, 7};
    for (std::size_t li = 0; li < 6; ++li)
      for (std::size_t gi = 0; gi < 5; ++gi) {
        ++seed;
        problem_spec s;
        const std::int64_t d = ds[(li + gi) % 6];
        s.dims = {.b = 2,
                  .hq = groups[gi] * (gi % 2 ? 2 : 1),
                  .hkv = gi % 2 ? 2 : 1,
                  .lq = lengths[(li + 2) % 6],
                  .lk = lengths[li],
                  .d = d,
                  .dv = d == 64 ? 24 : d + 1};
        s.causal = (li + gi) % 2 == 0;
        s.padding = (li + gi) % 3 == 0;
        s.mask = static_cast<int>((li * 5 + gi) % 4);
        s.type = static_cast<dtype>((li + 2 * gi) % 3);
        s.lay = static_cast<layout>((li + gi) % 3);
        s.seed = seed;
        problem p = make_problem(s);
        expect_within_bound(p, {.threads = 2, .q_tile = tile, .k_tile = tile, .split_keys = 2 * tile});
      }
  }
}

TEST(naive_accuracy, many_heads_long_rows_and_splits) {
  problem_spec s;
  s.dims = {.b = 1, .hq = 32, .hkv = 4, .lq = 5, .lk = 300, .d = 128, .dv = 40};
  s.causal = true;
  s.seed = 7;
  problem p = make_problem(s);
  expect_within_bound(p, {.threads = 2, .q_tile = 3, .k_tile = 16, .split_keys = 64});
}

TEST(naive_accuracy, default_config_prefill) {
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
    problem_spec s;
    s.dims = {.b = 2, .hq = 4, .hkv = 2, .lq = 77, .lk = 77, .d = 64, .dv = 64};
    s.causal = true;
    s.padding = true;
    s.type = t;
    s.seed = 8;
    problem p = make_problem(s);
    expect_within_bound(p, {});
  }
}

TEST(naive_accuracy, fully_masked_rows_are_zero_with_minus_infinity_lse) {
  problem_spec s;
  s.dims = {.b = 2, .hq = 2, .hkv = 1, .lq = 4, .lk = 3, .d = 3, .dv = 2};
  s.causal = true;  // lq > lk: the first row sees nothing
  s.seed = 9;
  problem p = make_problem(s);
  p.key_len = {3, 0};  // the second batch element has an empty cache
  run(p, {.k_tile = 2});
  for (std::int64_t h = 0; h < 2; ++h) {
    for (std::int64_t e = 0; e < 2; ++e) {
      EXPECT_EQ(p.o.get(0, 0, h, e), 0.0f);
      for (std::int64_t i = 0; i < 4; ++i) EXPECT_EQ(p.o.get(1, i, h, e), 0.0f);
    }
    EXPECT_EQ(p.lse[static_cast<std::size_t>(h * 4)], -INFINITY);
  }
}

TEST(naive_accuracy, visible_keys_scoring_minus_infinity_give_nan_rows_unless_a_finite_score_follows) {
  // Key 0's K is -inf in every dim and Q is positive, so its score is -inf.
  // Alone, the row is exp(-inf - -inf): NaN in O and LSE (docs/spec.md: a
  // non-finite visible input gives a non-finite row, never finite garbage).
  // With finite keys after it, key 0 weighs 0 and the row is finite. Blocks
  // and split chunks of 1 or 2 keys put key 0 alone in its block and chunk,
  // in the sequential fold and the parallel split path.
  for (std::int64_t lk : {1, 5})
    for (int threads : {1, 8})
      for (std::int64_t tile : {1, 2, 64}) {
        problem_spec s;
        s.dims = {.b = 1, .hq = 2, .hkv = 1, .lq = 1, .lk = lk, .d = 3, .dv = 2};
        s.seed = 10;
        problem p = make_problem(s);
        for (std::int64_t x = 0; x < 3; ++x) {
          for (std::int64_t h = 0; h < 2; ++h) p.q.set(0, 0, h, x, 0.5f);
          p.k.set(0, 0, 0, x, -INFINITY);
        }
        run(p, {.threads = threads, .k_tile = tile, .split_keys = tile});
        for (std::int64_t h = 0; h < 2; ++h) {
          for (std::int64_t e = 0; e < 2; ++e) {
            const float o = p.o.get(0, 0, h, e);
            if (lk == 1)
              EXPECT_TRUE(std::isnan(o)) << p.line() << " threads " << threads << " tile " << tile;
            else
              EXPECT_TRUE(std::isfinite(o)) << p.line() << " threads " << threads << " tile " << tile;
          }
          const float lse = p.lse[static_cast<std::size_t>(h)];
          EXPECT_EQ(std::isnan(lse), lk == 1) << p.line() << " threads " << threads << " tile " << tile << " lse " << lse;
        }
      }
}

}  // namespace
