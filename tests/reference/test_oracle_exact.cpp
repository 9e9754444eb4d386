// Hand-derived exact cases of the oracle (docs/spec.md semantics, one law each).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "attncheck/case_file.hpp"
#include "attncheck/oracle.hpp"
#include "oracle_test_support.hpp"

namespace attncheck {
namespace {

using oracle_testing::with_zero_tensors;

constexpr double minus_inf = -std::numeric_limits<double>::infinity();

oracle_options with_p() {
  oracle_options o;
  o.want_p = true;
  return o;
}

// |got - want| in units of the double ulp at want (for faithfulness checks).
double ulps(double got, double want) {
  const double ulp = std::nextafter(std::fabs(want), std::numeric_limits<double>::infinity()) - std::fabs(want);
  return std::fabs(got - want) / ulp;
}

TEST(oracle_exact, single_visible_key_returns_its_value_exactly) {
  attn_case c = oracle_testing::shaped_case({.b = 1, .hq = 1, .hkv = 1, .lq = 1, .lk = 3, .d = 2, .dv = 3});
  c.key_len = {2};
  c.mask_shape = {1, 1, 1, 3};
  c.mask = {0, 1, 1};  // with key_len 2 only key 1 is visible
  c = with_zero_tensors(c);
  c.q.set(0, 0, 0, 0, 1.5);
  c.q.set(0, 0, 0, 1, -0.25);
  for (int j = 0; j < 3; ++j) {
    c.k.set(0, j, 0, 0, 0.5 * j);
    c.k.set(0, j, 0, 1, 3.0 - j);
    for (int e = 0; e < 3; ++e) c.v.set(0, j, 0, e, 0.1 * (j + 1) + e * 1e-3);
  }
  const oracle_result r = reference(c, with_p());
  for (int e = 0; e < 3; ++e) EXPECT_EQ(r.o[r.o_index(0, 0, 0, e)], c.v.at(0, 1, 0, e)) << "e=" << e;
  EXPECT_EQ(r.p[r.p_index(0, 0, 0, 0)], 0.0);
  EXPECT_EQ(r.p[r.p_index(0, 0, 0, 1)], 1.0);
  EXPECT_EQ(r.p[r.p_index(0, 0, 0, 2)], 0.0);
  // LSE = S_1 + log 1; S_1 = scale * (1.5*0.5 - 0.25*2) is rounded once.
  const double s1 = static_cast<double>(c.effective_scale()) * 0.25;  // exact: scale is an f32
  EXPECT_EQ(r.lse[0], s1);
}

TEST(oracle_exact, identical_keys_return_the_mean_of_v) {
  attn_case c = oracle_testing::shaped_case({.b = 1, .hq = 1, .hkv = 1, .lq = 1, .lk = 4, .d = 3, .dv = 2});
  c.scale = 1.0f;
  c = with_zero_tensors(c);
  for (int d = 0; d < 3; ++d) c.q.set(0, 0, 0, d, 0.5 * (d + 1));
  const double v0[4] = {1, 2, 3, 6}, v1[4] = {-8, 0.5, 0.25, 3.25};
  for (int j = 0; j < 4; ++j) {
    for (int d = 0; d < 3; ++d) c.k.set(0, j, 0, d, 2.0 - d);
    c.v.set(0, j, 0, 0, v0[j]);
    c.v.set(0, j, 0, 1, v1[j]);
  }
  const oracle_result r = reference(c, with_p());
  EXPECT_EQ(r.o[r.o_index(0, 0, 0, 0)], 3.0);
  EXPECT_EQ(r.o[r.o_index(0, 0, 0, 1)], -1.0);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(r.p[r.p_index(0, 0, 0, j)], 0.25);
  // S = 0.5*2 + 1*1 + 1.5*0 = 2; LSE = 2 + ln 4. The oracle is faithful (<= 1 ulp)
  // and 2 + std::log(4.0) carries two roundings of <= 1/2 ulp each.
  EXPECT_LE(ulps(r.lse[0], 2.0 + std::log(4.0)), 2.0);
}

TEST(oracle_exact, logits_differing_by_ln3_weigh_three_to_one) {
  attn_case c;
  c.lk = 2;
  c.scale = 1.0f;
  c = with_zero_tensors(c);
  c.q.set(0, 0, 0, 0, 1.0);
  c.k.set(0, 0, 0, 0, std::log(3.0));  // stored as the f32 x nearest ln 3
  c.k.set(0, 1, 0, 0, 0.0);
  c.v.set(0, 0, 0, 0, 1.0);
  const double x = c.k.at(0, 0, 0, 0);
  const oracle_result r = reference(c, with_p());
  const double p0 = r.p[r.p_index(0, 0, 0, 0)], p1 = r.p[r.p_index(0, 0, 0, 1)];
  // P0 = sigmoid(x) with x = ln 3 + delta, |delta| <= 2^-24 (half an f32 ulp in
  // [1, 2)): |P0 - 3/4| <= sigmoid'(ln 3) |delta| + max|sigmoid''|/2 delta^2 + 1 ulp
  // = 3/16 * 2^-24 + 0.05 * 2^-48 + 2^-53.
  const double allowed = 3.0 / 16 * 0x1p-24 + 0x1p-48 + 0x1p-53;
  EXPECT_NEAR(p0, 0.75, allowed);
  EXPECT_NEAR(p1, 0.25, allowed);
  // Sharper: P0 / P1 = e^x exactly; two faithful P (<= 2^-52 relative each), the
  // division (2^-53) and std::exp (<= 1 ulp, 2^-52) give <= 7 * 2^-53.
  EXPECT_LE(std::fabs(p0 / p1 / std::exp(x) - 1), 7 * 0x1p-53);
  EXPECT_EQ(r.o[0], p0);  // V = (1, 0): O is P0 itself
}

TEST(oracle_exact, causal_five_by_five_row_i_sees_i_plus_one_keys) {
  attn_case c;
  c.lq = c.lk = 5;
  c.causal = true;
  c = with_zero_tensors(c);  // Q = 0: every visible score is 0, weights uniform
  for (int j = 0; j < 5; ++j) c.v.set(0, j, 0, 0, j + 1.0);
  const oracle_result r = reference(c, with_p());
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 5; ++j) {
      const double p = r.p[r.p_index(0, 0, i, j)];
      if (j > i) {
        EXPECT_EQ(p, 0.0) << "i=" << i << " j=" << j;
      } else {
        EXPECT_LE(ulps(p, 1.0 / (i + 1)), 1.0) << "i=" << i << " j=" << j;
      }
    }
    EXPECT_LE(ulps(r.o[r.o_index(0, i, 0, 0)], (i + 2) / 2.0), 1.0) << "mean of 1..i+1, i=" << i;
  }
  EXPECT_EQ(r.p[r.p_index(0, 0, 0, 0)], 1.0);  // row 0 is exactly [1, 0, 0, 0, 0]
}

TEST(oracle_exact, more_queries_than_keys_causal_leaves_first_rows_empty) {
  attn_case c;
  c.lq = 5;
  c.lk = 3;
  c.causal = true;
  c.dv = 2;
  c = with_zero_tensors(c);
  for (int j = 0; j < 3; ++j)
    for (int e = 0; e < 2; ++e) c.v.set(0, j, 0, e, 1.0 + j + 10 * e);
  const oracle_result r = reference(c, with_p());
  for (int i = 0; i < 5; ++i) {
    const int seen = i - 2 + 1;  // pos(i) = (3 - 5) + i
    if (seen <= 0) {
      EXPECT_EQ(r.lse[r.lse_index(0, 0, i)], minus_inf) << "i=" << i;
      for (int e = 0; e < 2; ++e) {
        EXPECT_EQ(std::bit_cast<std::uint64_t>(r.o[r.o_index(0, i, 0, e)]), 0u) << "O must be +0, i=" << i;
        EXPECT_EQ(r.o_bound[r.o_index(0, i, 0, e)], 0.0);
      }
    } else {
      EXPECT_LE(ulps(r.lse[r.lse_index(0, 0, i)], std::log(static_cast<double>(seen))), 2.0) << "i=" << i;
      EXPECT_LE(ulps(r.o[r.o_index(0, i, 0, 0)], (seen + 1) / 2.0), 1.0) << "i=" << i;
    }
  }
}

TEST(oracle_exact, fully_masked_row_gives_zero_output_and_minus_inf_lse) {
  attn_case c;
  c.lq = 3;
  c.lk = 2;
  c.mask_shape = {1, 1, 3, 2};
  c.mask = {1, 1, 0, 0, 0, 1};  // row 1 sees nothing
  c = with_zero_tensors(c);
  for (int j = 0; j < 2; ++j) c.v.set(0, j, 0, 0, 4.0 + j);
  const oracle_result r = reference(c, with_p());
  EXPECT_EQ(r.lse[1], minus_inf);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(r.o[1]), 0u);
  EXPECT_EQ(r.p[r.p_index(0, 0, 1, 0)], 0.0);
  EXPECT_EQ(r.p[r.p_index(0, 0, 1, 1)], 0.0);
  EXPECT_EQ(r.lse_bound[1], 0.0);  // exact: -inf must come back
  EXPECT_EQ(r.o[0], 4.5);
  EXPECT_EQ(r.o[2], 5.0);
}

TEST(oracle_exact, gqa_query_head_h_reads_kv_head_h_over_group) {
  attn_case c;
  c.hq = 6;
  c.hkv = 2;  // G = 3: h / G = 0,0,0,1,1,1 while h % Hkv = 0,1,0,1,0,1
  c.lk = 2;
  c = with_zero_tensors(c);
  for (int g = 0; g < 2; ++g)
    for (int j = 0; j < 2; ++j) c.v.set(0, j, g, 0, 10.0 * (g + 1));
  const oracle_result r = reference(c);
  for (int h = 0; h < 6; ++h) EXPECT_EQ(r.o[r.o_index(0, 0, h, 0)], h < 3 ? 10.0 : 20.0) << "h=" << h;
}

TEST(oracle_exact, nan_in_masked_slots_changes_nothing_bitwise) {
  attn_case c = oracle_testing::shaped_case({.b = 2, .hq = 2, .hkv = 1, .lq = 3, .lk = 4, .d = 2, .dv = 2});
  c.causal = true;
  c.key_len = {3, 1};  // batch 1: rows 0, 1 see nothing (pos = -2, -1)
  c.values = value_kind::normal;
  c.seed = 7;
  materialize(c);
  const oracle_options opt = with_p();
  const oracle_result clean = reference(c, opt);
  const std::uint32_t nan_bits = 0x7fc00001u;  // f32 quiet NaN with a payload
  for (int b = 0; b < 2; ++b)
    for (std::int64_t j = c.valid_keys(b); j < c.lk; ++j)
      for (int d = 0; d < 2; ++d) {
        c.k.set_bits(b, j, 0, d, nan_bits);
        c.v.set_bits(b, j, 0, d, nan_bits);
      }
  for (int i = 0; i < 2; ++i)
    for (int h = 0; h < 2; ++h)
      for (int d = 0; d < 2; ++d) c.q.set_bits(1, i, h, d, nan_bits);  // rows with no visible key
  const oracle_result poisoned = reference(c, opt);
  const auto same_bits = [](const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
  };
  EXPECT_TRUE(same_bits(clean.o, poisoned.o));
  EXPECT_TRUE(same_bits(clean.lse, poisoned.lse));
  EXPECT_TRUE(same_bits(clean.p, poisoned.p));
  EXPECT_TRUE(same_bits(clean.o_bound, poisoned.o_bound));
  EXPECT_TRUE(same_bits(clean.lse_bound, poisoned.lse_bound));
}

TEST(oracle_exact, nan_in_a_visible_value_reaches_only_its_row_and_column) {
  attn_case c = oracle_testing::shaped_case({.b = 1, .hq = 1, .hkv = 1, .lq = 2, .lk = 2, .d = 1, .dv = 2});
  c.causal = true;  // row 0 sees key 0, row 1 sees both
  c = with_zero_tensors(c);
  c.v.set_bits(0, 1, 0, 0, 0x7fc00000u);
  c.v.set(0, 0, 0, 1, 2.0);
  const oracle_result r = reference(c);
  EXPECT_TRUE(std::isnan(r.o[r.o_index(0, 1, 0, 0)]));
  EXPECT_TRUE(std::isnan(r.o_bound[r.o_index(0, 1, 0, 0)])) << "no bound exists: never a pass";
  EXPECT_EQ(r.o[r.o_index(0, 1, 0, 1)], 1.0);
  EXPECT_EQ(r.o[r.o_index(0, 0, 0, 0)], 0.0);
  EXPECT_TRUE(std::isfinite(r.o_bound[r.o_index(0, 0, 0, 0)]));
}

TEST(oracle_exact, value_head_size_may_differ_from_key_head_size) {
  attn_case c = oracle_testing::shaped_case({.b = 1, .hq = 1, .hkv = 1, .lq = 1, .lk = 2, .d = 2, .dv = 5});
  c.scale = 1.0f;
  c = with_zero_tensors(c);
  c.q.set(0, 0, 0, 0, 1.0);
  c.q.set(0, 0, 0, 1, 1.0);
  for (int d = 0; d < 2; ++d) {
    c.k.set(0, 0, 0, d, 0.75);
    c.k.set(0, 1, 0, d, 0.75);  // equal scores: O = mean over the two keys
  }
  for (int e = 0; e < 5; ++e) {
    c.v.set(0, 0, 0, e, e);
    c.v.set(0, 1, 0, e, 3.0 * e);
  }
  const oracle_result r = reference(c);
  ASSERT_EQ(r.o.size(), 5u);
  for (int e = 0; e < 5; ++e) EXPECT_EQ(r.o[r.o_index(0, 0, 0, e)], 2.0 * e) << "e=" << e;
  EXPECT_LE(ulps(r.lse[0], 1.5 + std::log(2.0)), 2.0);
}

// Bit patterns chosen so that any detour through a narrower or rounded value
// shows: f16 1 + 2^-10 and the smallest subnormal 2^-24; bf16 1 + 2^-7 and 2^-133.
TEST(oracle_exact, half_precision_inputs_are_decoded_exactly) {
  struct pattern {
    dtype type;
    std::uint32_t v0, v1;
    double want0, want1;
    std::uint32_t q, k;  // one visible key: LSE = scale * q * k exactly
    double qk;
  };
  const pattern cases[] = {
      {dtype::f16, 0x3c01, 0x0001, 1 + 0x1p-10, 0x1p-24, 0x3e01 /*1.5+2^-10*/, 0xbc03 /*-(1+3*2^-10)*/,
       -(1.5 + 0x1p-10) * (1 + 3 * 0x1p-10)},
      {dtype::bf16, 0x3f81, 0x0001, 1 + 0x1p-7, 0x1p-133, 0x3fc1 /*1.5+2^-7*/, 0xbf83 /*-(1+3*2^-7)*/,
       -(1.5 + 0x1p-7) * (1 + 3 * 0x1p-7)},
  };
  for (const pattern& t : cases) {
    attn_case c;
    c.type = t.type;
    c.dv = 2;
    c.scale = 1.0f;
    c = with_zero_tensors(c);
    c.v.set_bits(0, 0, 0, 0, t.v0);
    c.v.set_bits(0, 0, 0, 1, t.v1);
    c.q.set_bits(0, 0, 0, 0, t.q);
    c.k.set_bits(0, 0, 0, 0, t.k);
    oracle_options opt;
    opt.out_type = t.type;
    const oracle_result r = reference(c, opt);
    EXPECT_EQ(r.o[0], t.want0) << name(t.type);
    EXPECT_EQ(r.o[1], t.want1) << name(t.type);
    EXPECT_EQ(r.lse[0], t.qk) << name(t.type);
  }
}

// docs/oracle.md computes this shipped case by hand: x = f32(ln 3) =
// 9215828 * 2^-23, delta = x - ln 3 = 1.98340875742e-8, P1 = 3/4 + 3 delta/16
// (+ O(delta^2) < 2e-17), O = 4 P1 = 3 + 3 delta/4, LSE = ln 4 + 3 delta/4 + 3 delta^2/32.
TEST(oracle_exact, shipped_ln3_example_matches_the_hand_computation_in_docs) {
  const case_record rec = read_case_file(std::string(ATTNCHECK_CASES_DIR) + "/two_keys_ln3.json");
  const oracle_result r = reference(rec.c, with_p());
  EXPECT_LE(ulps(r.o[0], 3.0000000148755657), 1.0);
  EXPECT_LE(ulps(r.lse[0], 1.3862943759954562), 1.0);
  EXPECT_LE(ulps(r.p[1], 0.7500000037188914), 1.0);
  EXPECT_LE(ulps(r.p[0], 0.2499999962811086), 1.0);
}

}  // namespace
}  // namespace attncheck
