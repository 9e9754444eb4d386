// Seeded random problems over every knob at once (shapes from 0 keys up,
// tiles 1..8, split sizes, masks, padding, dtypes, layouts): each must be
// within the bound of docs/bound.md of the double-precision loop, give the same bits on
// 1 and 3 threads, and ignore NaN in masked slots. The seed of a failure is
// printed with the case line.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "naive.hpp"

namespace {

using namespace attnimpl_test;

struct drawn {
  problem_spec spec;
  attnimpl::config cfg;
};

drawn draw(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  drawn d;
  const std::int64_t hkv = pick(1, 3), g = pick(1, 5);
  d.spec.dims = {
      .b = pick(1, 3), .hq = hkv * g, .hkv = hkv, .lq = pick(1, 9), .lk = pick(0, 13), .d = pick(1, 20), .dv = pick(1, 20)};
  d.spec.causal = pick(0, 1) == 1;
  d.spec.padding = pick(0, 2) == 0;
  d.spec.mask = static_cast<int>(pick(0, 3));
  d.spec.type = static_cast<dtype>(pick(0, 2));
  d.spec.lay = static_cast<layout>(pick(0, 2));
  d.spec.seed = seed;
  const std::int64_t tiles[] = {1, 2, 3, 5, 8};
  d.cfg.k_tile = tiles[pick(0, 4)];
  d.cfg.q_tile = tiles[pick(0, 4)];
  d.cfg.split_keys = d.cfg.k_tile * pick(1, 3);
  return d;
}

TEST(random_cases, within_bound_thread_invariant_and_blind_to_masked_nan) {
  constexpr std::uint64_t first_seed = 20000, cases = 2000;
  for (std::uint64_t seed = first_seed; seed < first_seed + cases; ++seed) {
    const drawn dr = draw(seed);
    attnimpl::config one = dr.cfg, three = dr.cfg;
    one.threads = 1;
    three.threads = 3;
    problem p = make_problem(dr.spec);
    run(p, one);
    const naive_result ref = naive_attention(p, one);
    ASSERT_TRUE(o_within_bound(p, ref)) << "k_tile " << dr.cfg.k_tile;
    const auto bits = output_bits(p);
    problem threaded = make_problem(dr.spec);
    run(threaded, three);
    ASSERT_EQ(output_bits(threaded), bits) << p.line() << " threads 1 vs 3";
    problem poisoned = make_problem(dr.spec);
    poison_masked(poisoned);
    run(poisoned, three);
    ASSERT_EQ(output_bits(poisoned), bits) << p.line() << " NaN in masked slots";
  }
}

}  // namespace
