// The docs/spec.md error bound as the oracle computes it: defined where it must be,
// NaN where no bound exists, and it holds for f32 subjects of the docs/bound.md class
// while catching one that is less accurate than it declares.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "attncheck/oracle.hpp"
#include "oracle_test_support.hpp"

namespace attncheck {
namespace {

using oracle_testing::any_small_case;
using oracle_testing::base_seed;
using oracle_testing::f32_dot;
using oracle_testing::subject_result;
using oracle_testing::zero_result;

// Fewer cases than the self-check: each runs the oracle once and three subjects.
constexpr int bound_cases = 400;

// A subject of the docs/bound.md class in f32: dot products in order, scale applied to
// the sum, online softmax over key blocks of `block` keys (one block when
// block >= Lk: the plain shifted softmax), expf/logf, one final division, O
// rounded once to the case's type. bf16_weights rounds each weight to bf16
// before it multiplies V only (FlashAttention 2's P, the row sum before the
// cast): a subject less accurate than it declares, unless it declares that
// stage. p_type rounds P to another format, and sum_after sums the rounded P.
subject_result f32_attention(const attn_case& c, std::int64_t block, bool bf16_weights, dtype p_type = dtype::bf16,
                             bool sum_after = false) {
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  subject_result r = zero_result(c);
  const float scale = c.effective_scale();
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> acc(n(c.dv));
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::int64_t g = c.kv_head(h);
        float m = minus_inf, l = 0;
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::vector<std::pair<std::int64_t, float>> s;
        for (std::int64_t j0 = 0; j0 < c.lk; j0 += block) {
          s.clear();
          float bm = m;
          for (std::int64_t j = j0; j < std::min(c.lk, j0 + block); ++j) {
            if (!c.visible(bi, h, i, j)) continue;
            s.emplace_back(j, scale * f32_dot(c, bi, h, i, j));
            bm = std::max(bm, s.back().second);
          }
          if (s.empty()) continue;
          const float rescale = std::exp(m - bm);  // 0 for the first block (m = -inf)
          l *= rescale;
          for (float& a : acc) a *= rescale;
          for (const auto& [j, sj] : s) {
            const float w = std::exp(sj - bm);
            const float wv = bf16_weights ? static_cast<float>(decode(p_type, encode(p_type, w))) : w;
            l += sum_after ? wv : w;
            for (std::int64_t e = 0; e < c.dv; ++e) acc[n(e)] += wv * static_cast<float>(c.v.at(bi, j, g, e));
          }
          m = bm;
        }
        const std::size_t row = n((bi * c.hq + h) * c.lq + i);
        if (m == minus_inf) {
          r.lse[row] = -std::numeric_limits<double>::infinity();
          continue;
        }
        r.lse[row] = m + std::log(l);
        for (std::int64_t e = 0; e < c.dv; ++e)
          r.o[n(((bi * c.lq + i) * c.hq + h) * c.dv + e)] = decode(c.type, encode(c.type, acc[n(e)] / l));
      }
  return r;
}

oracle_options options_for(const attn_case& c, std::int64_t blocks) {
  oracle_options opt;
  opt.out_type = c.type;
  opt.bound.u_compute = 0x1p-24;
  opt.bound.exp_ulps = 1;  // glibc expf and logf: < 1 ulp (its libm-test-ulps)
  opt.bound.key_blocks = blocks;
  return opt;
}

TEST(oracle_bound, finite_and_positive_wherever_inputs_are_finite) {
  const std::uint64_t seed = base_seed();
  std::printf("ATTNCHECK_SEED=%llu\n", static_cast<unsigned long long>(seed));
  for (int t = 0; t < bound_cases; ++t) {
    const attn_case c = any_small_case(seed + static_cast<std::uint64_t>(t));
    const oracle_result r = reference(c, options_for(c, 1));
    for (std::size_t x = 0; x < r.lse.size(); ++x) {
      if (r.lse[x] == -std::numeric_limits<double>::infinity()) {
        EXPECT_EQ(r.lse_bound[x], 0.0) << to_line(c);
        continue;
      }
      EXPECT_TRUE(std::isfinite(r.lse_bound[x]) && r.lse_bound[x] > 0) << to_line(c) << " lse " << x;
    }
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t i = 0; i < c.lq; ++i)
        for (std::int64_t h = 0; h < c.hq; ++h) {
          const bool empty_row = r.lse[r.lse_index(bi, h, i)] == -std::numeric_limits<double>::infinity();
          for (std::int64_t e = 0; e < c.dv; ++e) {
            const double bound = r.o_bound[r.o_index(bi, i, h, e)];
            if (empty_row) {
              EXPECT_EQ(bound, 0.0) << to_line(c);
            } else {
              EXPECT_TRUE(std::isfinite(bound) && bound > 0)
                  << to_line(c) << " b=" << bi << " i=" << i << " h=" << h << " e=" << e << " bound=" << bound;
            }
          }
        }
  }
}

TEST(oracle_bound, nan_where_a_visible_input_is_not_finite) {
  attn_case c;
  c.lq = 2;
  c.lk = 3;
  c.dv = 2;
  c.causal = true;  // row 0 sees keys 0, 1; row 1 sees all three
  c = oracle_testing::with_zero_tensors(c);
  c.k.set(0, 2, 0, 0, std::numeric_limits<double>::infinity());   // only row 1 sees key 2
  c.v.set(0, 1, 0, 1, std::numeric_limits<double>::quiet_NaN());  // column 1 of both rows
  const oracle_result r = reference(c);
  EXPECT_TRUE(std::isnan(r.lse_bound[1]));
  EXPECT_TRUE(std::isnan(r.o_bound[r.o_index(0, 1, 0, 0)]));
  EXPECT_TRUE(std::isnan(r.o_bound[r.o_index(0, 1, 0, 1)]));
  EXPECT_TRUE(std::isnan(r.o_bound[r.o_index(0, 0, 0, 1)]));
  EXPECT_TRUE(std::isfinite(r.o_bound[r.o_index(0, 0, 0, 0)]));
  EXPECT_TRUE(std::isfinite(r.lse_bound[0]));
}

TEST(oracle_bound, rejects_invalid_declarations_naming_the_field) {
  attn_case c = oracle_testing::with_zero_tensors(attn_case{});
  const auto field_of = [&](oracle_options opt) -> std::string {
    try {
      reference(c, opt);
    } catch (const input_error& e) {
      return e.field();
    }
    return "accepted";
  };
  oracle_options opt;
  opt.bound.key_blocks = 0;
  EXPECT_EQ(field_of(opt), "bound.key_blocks");
  opt = {};
  opt.bound.u_compute = 0;
  EXPECT_EQ(field_of(opt), "bound.u_compute");
  opt = {};
  opt.bound.exp_ulps = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(field_of(opt), "bound.exp_ulps");
  EXPECT_EQ(field_of(oracle_options{}), "accepted");
}

struct campaign {
  double worst_ratio = 0;  // max observed error / bound over elements
  long elements = 0;       // compared (finite bound)
  long outside = 0;        // |got - want| > bound, NaN got included
  std::string worst;       // where worst_ratio was seen
};

// Compares a subject with the oracle under the bound: NaN first, then the bound.
void compare(const attn_case& c, const oracle_result& r, const subject_result& s, campaign& out, bool report) {
  const auto check = [&](double got, double want, double bound, const char* what, std::size_t x) {
    if (!std::isfinite(bound)) return;  // empty rows have 0; no inf or NaN in these cases
    ++out.elements;
    const double err = std::fabs(got - want);
    if (!(err <= bound)) {
      ++out.outside;
      if (report)
        ADD_FAILURE() << what << "[" << x << "] of " << to_line(c) << ": want " << want << " got " << got << " error " << err
                      << " bound " << bound;
    }
    if (bound > 0 && err / bound > out.worst_ratio) {
      out.worst_ratio = err / bound;
      out.worst = std::string(what) + "[" + std::to_string(x) + "] of " + to_line(c) + ": want " + std::to_string(want) +
                  " got " + std::to_string(got) + " bound " + std::to_string(bound);
    }
  };
  for (std::size_t x = 0; x < r.o.size(); ++x) check(s.o[x], r.o[x], r.o_bound[x], "O", x);
  for (std::size_t x = 0; x < r.lse.size(); ++x) {
    if (r.lse[x] == -std::numeric_limits<double>::infinity()) {
      if (s.lse[x] != r.lse[x]) ADD_FAILURE() << "LSE[" << x << "] of empty row: " << s.lse[x] << " " << to_line(c);
      continue;
    }
    check(s.lse[x], r.lse[x], r.lse_bound[x], "LSE", x);
  }
}

TEST(oracle_bound, holds_for_f32_subjects_plain_and_online) {
  const std::uint64_t seed = base_seed();
  std::printf("ATTNCHECK_SEED=%llu\n", static_cast<unsigned long long>(seed));
  campaign plain, online;
  for (int t = 0; t < bound_cases; ++t) {
    const attn_case c = any_small_case(seed + static_cast<std::uint64_t>(t));
    compare(c, reference(c, options_for(c, 1)), f32_attention(c, c.lk, false), plain, true);
    const std::int64_t block = 2, blocks = (c.lk + block - 1) / block;
    compare(c, reference(c, options_for(c, blocks)), f32_attention(c, block, false), online, true);
  }
  std::printf("plain: %ld elements, worst error/bound %.3g at %s\nonline (blocks of 2): %ld, worst %.3g at %s\n", plain.elements,
              plain.worst_ratio, plain.worst.c_str(), online.elements, online.worst_ratio, online.worst.c_str());
  EXPECT_GT(plain.elements, 1000);
}

// The binary64 precision is a subject of the class itself (u = 2^-53, glibc
// exp and log < 1 ulp, one block); its O is a double, so out_type f32 is the
// narrowest declaration available and only loosens the bound by 2^-24 |O|.
TEST(oracle_bound, binary64_precision_lies_within_its_own_bound) {
  const std::uint64_t seed = base_seed();
  std::printf("ATTNCHECK_SEED=%llu\n", static_cast<unsigned long long>(seed));
  oracle_options fast, exact;
  fast.precision = oracle_precision::binary64;
  exact.bound.u_compute = 0x1p-53;
  exact.bound.exp_ulps = 1;
  campaign c64;
  for (int t = 0; t < bound_cases; ++t) {
    const attn_case c = any_small_case(seed + static_cast<std::uint64_t>(t));
    const oracle_result r = reference(c, exact);
    const oracle_result d = reference(c, fast);
    compare(c, r, subject_result{d.o, d.lse}, c64, true);
  }
  std::printf("binary64: %ld elements, worst error/bound %.3g\n", c64.elements, c64.worst_ratio);
}

TEST(oracle_bound, catches_outputs_beyond_it) {
  const std::uint64_t seed = base_seed();
  std::printf("ATTNCHECK_SEED=%llu\n", static_cast<unsigned long long>(seed));
  campaign shifted, sloppy;
  long moved = 0;
  for (int t = 0; t < bound_cases; ++t) {
    const attn_case c = any_small_case(seed + static_cast<std::uint64_t>(t));
    const oracle_result r = reference(c, options_for(c, 1));
    // The exact values moved by 4x their bound (when the bound is not 0).
    subject_result s{r.o, r.lse};
    for (std::size_t x = 0; x < s.o.size(); ++x) s.o[x] += 4 * r.o_bound[x];
    for (std::size_t x = 0; x < s.lse.size(); ++x)
      if (std::isfinite(s.lse[x])) s.lse[x] -= 4 * r.lse_bound[x];
    for (double b : r.o_bound) moved += b > 0;
    compare(c, r, s, shifted, false);
    // A subject whose weights carry bf16 error (2^-9) while it declares f32.
    compare(c, r, f32_attention(c, c.lk, true), sloppy, false);
  }
  std::printf("moved by 4x bound: %ld of %ld outside; bf16 weights: %ld of %ld outside\n", shifted.outside, shifted.elements,
              sloppy.outside, sloppy.elements);
  EXPECT_GE(shifted.outside, moved);
  EXPECT_GT(sloppy.outside, sloppy.elements / 20) << "a bound this loose would let a bf16-weight kernel pass";
}

// ---- Stage-wise profiles (docs/bound.md "Stage-wise profiles") ----

// Every stage declared at the compute unit, and the default profile: the same
// bounds, bit for bit, as the one-u declaration (they are the same declaration).
TEST(oracle_bound, a_profile_of_one_unit_gives_the_one_u_bounds_bit_for_bit) {
  const std::uint64_t seed = base_seed();
  for (int t = 0; t < 100; ++t) {
    const attn_case c = any_small_case(seed + static_cast<std::uint64_t>(t));
    oracle_options one_u = options_for(c, 2), staged = one_u;
    const double u = one_u.bound.u_compute;
    staged.bound.profile = {.qk_product_u = u, .qk_accum_u = u, .rescale_u = u, .pv_accum_u = u, .lse_u = u};
    const oracle_result a = reference(c, one_u), b = reference(c, staged);
    ASSERT_EQ(a.o_bound.size(), b.o_bound.size());
    for (std::size_t x = 0; x < a.o_bound.size(); ++x)
      ASSERT_EQ(std::bit_cast<std::uint64_t>(a.o_bound[x]), std::bit_cast<std::uint64_t>(b.o_bound[x])) << to_line(c);
    for (std::size_t x = 0; x < a.lse_bound.size(); ++x)
      ASSERT_EQ(std::bit_cast<std::uint64_t>(a.lse_bound[x]), std::bit_cast<std::uint64_t>(b.lse_bound[x])) << to_line(c);
  }
}

oracle_options p_profile(const attn_case& c, std::int64_t blocks, dtype p_type, bool sum_after) {
  oracle_options opt = options_for(c, blocks);
  opt.bound.profile.scale = scale_mode::after_dot;
  opt.bound.profile.p_u = unit_roundoff(p_type);
  opt.bound.profile.p_eta = smallest_subnormal(p_type);
  opt.bound.profile.row_sum_after_cast = sum_after;
  return opt;
}

// P rounded to bf16 (row sum before the cast) and to f16 (after), declared so:
// within the bound on every element, plain and online. Declared as f32 the
// same subjects fall outside (catches_outputs_beyond_it).
TEST(oracle_bound, holds_for_p_rounded_to_bf16_and_f16_as_declared) {
  const std::uint64_t seed = base_seed();
  std::printf("ATTNCHECK_SEED=%llu\n", static_cast<unsigned long long>(seed));
  campaign bf16_before, f16_after;
  for (int t = 0; t < bound_cases; ++t) {
    const attn_case c = any_small_case(seed + static_cast<std::uint64_t>(t));
    const std::int64_t block = 2, blocks = (c.lk + block - 1) / block;
    compare(c, reference(c, p_profile(c, blocks, dtype::bf16, false)), f32_attention(c, block, true), bf16_before, true);
    compare(c, reference(c, p_profile(c, 1, dtype::f16, true)), f32_attention(c, c.lk, true, dtype::f16, true), f16_after, true);
  }
  std::printf("P bf16, sum before: %ld elements, worst %.3g at %s\nP f16, sum after: %ld elements, worst %.3g at %s\n",
              bf16_before.elements, bf16_before.worst_ratio, bf16_before.worst.c_str(), f16_after.elements, f16_after.worst_ratio,
              f16_after.worst.c_str());
  EXPECT_GT(bf16_before.elements, 1000);
}

// The LSE of a kernel that sums the rounded P carries P's rounding: declared as
// summing before the cast, it falls outside the LSE bound.
TEST(oracle_bound, a_row_sum_after_the_cast_declared_before_is_caught) {
  const std::uint64_t seed = base_seed();
  campaign lied;
  for (int t = 0; t < bound_cases; ++t) {
    const attn_case c = any_small_case(seed + static_cast<std::uint64_t>(t));
    compare(c, reference(c, p_profile(c, 1, dtype::f16, false)), f32_attention(c, c.lk, true, dtype::f16, true), lied, false);
  }
  std::printf("f16 P summed after the cast, declared before: %ld of %ld outside, worst %.3g\n", lied.outside, lied.elements,
              lied.worst_ratio);
  EXPECT_GT(lied.outside, 0);
}

// docs/abi.md's acceptance figure: a decode over Lk = 32768 keys by a kernel
// that rounds P to bf16 once. Declared stage by stage, P's term does not grow
// with the keys, and at least 90% of O is judged by the sound bound; its one-u
// declaration (u of bf16 for everything) gives gamma_(n) = +inf: none judged.
TEST(oracle_bound, a_bf16_p_long_decode_is_judged_under_its_profile) {
  attn_case c = parse_line("ATTN(b=1,hq=2,hkv=1,lq=1,lk=32768,d=64,dv=64,bf16,seed=11)");
  materialize(c);
  const std::int64_t block = 64, blocks = (c.lk + block - 1) / block;
  const subject_result s = f32_attention(c, block, true);
  oracle_options staged = p_profile(c, blocks, dtype::bf16, false), one_u = options_for(c, blocks);
  one_u.bound.u_compute = 0x1p-8;
  const auto judged = [&](const oracle_options& opt, double& worst) {
    const oracle_result r = reference(c, opt);
    long n = 0;
    worst = 0;
    for (std::size_t x = 0; x < r.o.size(); ++x) {
      if (!std::isfinite(r.o_bound[x]) || r.o_sound_useless[x]) continue;
      ++n;
      worst = std::max(worst, std::fabs(s.o[x] - r.o[x]) / r.o_bound[x]);
    }
    return static_cast<double>(n) / static_cast<double>(r.o.size());
  };
  double worst_staged = 0, worst_one_u = 0;
  const double share_staged = judged(staged, worst_staged), share_one_u = judged(one_u, worst_one_u);
  std::printf("Lk = 32768, P bf16: judged %.1f%% of O under the profile (worst observed/bound %.3g), %.1f%% under one u = 2^-8\n",
              100 * share_staged, worst_staged, 100 * share_one_u);
  EXPECT_GE(share_staged, 0.9);
  EXPECT_LE(worst_staged, 1.0);
  EXPECT_EQ(share_one_u, 0.0);
}

}  // namespace
}  // namespace attncheck
