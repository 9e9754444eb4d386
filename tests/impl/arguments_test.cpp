// Bad arguments come back as invalid_argument with a message; nothing crashes.
#include <gtest/gtest.h>

#include "support.hpp"

namespace {

using namespace attnimpl_test;

problem small() {
  problem_spec s;
  s.dims = {.b = 2, .hq = 6, .hkv = 2, .lq = 3, .lk = 4, .d = 3, .dv = 5};
  return make_problem(s);
}

attnimpl::status call(problem& p, const attnimpl::config& cfg = {}) { return attnimpl::attention(p.args(), cfg); }

TEST(arguments, valid_call_is_ok) {
  problem p = small();
  EXPECT_TRUE(call(p).ok());
}

TEST(arguments, heads_not_divisible_are_rejected) {
  problem p = small();
  p.dims.hkv = 4;
  const attnimpl::status st = call(p);
  EXPECT_EQ(st.code, attnimpl::status_code::invalid_argument);
  EXPECT_NE(st.message.find("hkv"), std::string::npos) << st.message;
}

TEST(arguments, sizes_below_one_are_rejected) {
  for (std::int64_t attnimpl::shape::*field :
       {&attnimpl::shape::b, &attnimpl::shape::hq, &attnimpl::shape::hkv, &attnimpl::shape::d, &attnimpl::shape::dv}) {
    problem p = small();
    p.dims.*field = 0;
    EXPECT_FALSE(call(p).ok());
  }
  problem p = small();
  p.dims.lk = -1;
  EXPECT_FALSE(call(p).ok());
}

TEST(arguments, key_len_out_of_range_is_rejected) {
  problem p = small();
  p.key_len = {4, 5};
  EXPECT_FALSE(call(p).ok());
  p.key_len = {-1, 0};
  EXPECT_FALSE(call(p).ok());
  p.key_len = {4, 0};
  EXPECT_TRUE(call(p).ok());
}

TEST(arguments, null_tensors_are_rejected) {
  problem p = small();
  attnimpl::attention_args a = p.args();
  a.k.data = nullptr;
  EXPECT_FALSE(attnimpl::attention(a).ok());
  a = p.args();
  a.o.data = nullptr;
  EXPECT_FALSE(attnimpl::attention(a).ok());
}

TEST(arguments, bad_config_is_rejected) {
  problem p = small();
  EXPECT_FALSE(call(p, {.threads = -1}).ok());
  EXPECT_FALSE(call(p, {.k_tile = -3}).ok());
  EXPECT_FALSE(call(p, {.q_tile = 1 << 20}).ok());
}

TEST(arguments, work_units_beyond_the_workspace_cap_are_rejected) {
  problem p = small();
  attnimpl::attention_args a = p.args();
  a.dims.hq = std::int64_t{1} << 20;  // G = 2^20 rows in one unit; nothing is read before the check
  a.dims.hkv = 1;
  EXPECT_FALSE(attnimpl::attention(a).ok());
  a.dims.hq = 8;
  a.dims.d = 60000;
  a.dims.dv = 60000;
  EXPECT_FALSE(attnimpl::attention(a, {.q_tile = 4096}).ok());
}

TEST(arguments, default_query_tile_follows_group_and_threads) {
  // About 512 rows per unit; halved down to 128 rows while under 8 units per thread.
  EXPECT_EQ(attnimpl::q_tile_for({.b = 1, .hq = 16, .hkv = 16, .lq = 2048, .lk = 2048, .d = 128, .dv = 128}, {.threads = 2}),
            512);
  EXPECT_EQ(attnimpl::q_tile_for({.b = 1, .hq = 32, .hkv = 8, .lq = 4096, .lk = 4096, .d = 128, .dv = 128}, {.threads = 2}), 128);
  EXPECT_EQ(attnimpl::q_tile_for({.b = 1, .hq = 1, .hkv = 1, .lq = 1024, .lk = 1024, .d = 64, .dv = 64}, {.threads = 2}), 128);
  EXPECT_EQ(attnimpl::q_tile_for({.b = 1, .hq = 64, .hkv = 1, .lq = 9, .lk = 9, .d = 8, .dv = 8}, {.threads = 4}), 2);
  EXPECT_EQ(attnimpl::q_tile_for({.b = 1, .hq = 1, .hkv = 1, .lq = 5, .lk = 5, .d = 8, .dv = 8}, {.q_tile = 3}), 3);
  // The largest sizes the checks allow: no overflow on the way (UBSan build).
  const std::int64_t big = std::int64_t{1} << 30;
  EXPECT_EQ(attnimpl::q_tile_for({.b = big, .hq = big, .hkv = big, .lq = big, .lk = big, .d = 1, .dv = 1}, {.threads = 1024}),
            512);
  EXPECT_EQ(attnimpl::q_tile_for({.b = 1, .hq = big, .hkv = 1, .lq = big, .lk = big, .d = 1, .dv = 1}, {.threads = 1024}), 1);
}

TEST(arguments, bad_dtype_is_rejected) {
  problem p = small();
  attnimpl::attention_args a = p.args();
  a.q.type = static_cast<attnimpl::dtype>(7);
  EXPECT_FALSE(attnimpl::attention(a).ok());
}

TEST(arguments, key_blocks_counts_blocks_and_split_merges) {
  EXPECT_EQ(attnimpl::key_blocks(0, {.k_tile = 2, .split_keys = 4}), 0);
  EXPECT_EQ(attnimpl::key_blocks(1, {.k_tile = 2, .split_keys = 4}), 1);
  EXPECT_EQ(attnimpl::key_blocks(4, {.k_tile = 2, .split_keys = 4}), 2);
  EXPECT_EQ(attnimpl::key_blocks(5, {.k_tile = 2, .split_keys = 4}), 3 + 1);
  // split rounds up to a multiple of the tile: 5 -> 6
  EXPECT_EQ(attnimpl::key_blocks(13, {.k_tile = 3, .split_keys = 5}), 5 + 2);
}

}  // namespace
