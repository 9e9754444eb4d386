// The case distribution of the gate (docs/distribution.md): every documented
// share holds its floor, cases fit the work caps, and a failure found among
// the production sizes still shrinks to the 1s.
#include <gtest/gtest.h>

#include <rapidcheck.h>

#include <set>

#include "attncheck/bundled_subjects.hpp"
#include "attncheck/generators.hpp"
#include "attncheck/runner.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {
namespace {

case_stats sample(const subject& s, int n, std::uint64_t seed, const gen_options& opt = {}) {
  const auto gen = any_case(s, opt);
  case_stats st;
  for (int k = 0; k < n; ++k) {
    const rc::Random r(seed * 1'000'003 + static_cast<std::uint64_t>(k));
    const attn_case c = gen(r, rc::kNominalSize / 2).value();  // any size: the raw choices ignore it
    EXPECT_LE(case_work(c), opt.max_work) << to_line(c);
    EXPECT_LE(c.hq, 64);
    EXPECT_EQ(c.hq % c.hkv, 0);
    st.add(c, s);
  }
  return st;
}

void expect_floors(const subject& s, const case_stats& st, bool takes_everything, bool variants = false) {
  for (const auto& f : distribution_floors()) {
    if ((f.needs_all && !takes_everything) || f.variant != variants) continue;
    EXPECT_GE(st.share(f.key), f.floor) << s.spec() << ": share of '" << f.key << "' (" << f.what << ") is " << st.share(f.key)
                                        << ", below its documented floor " << f.floor;
  }
}

TEST(distribution, every_share_holds_its_floor_on_the_builtin_subject) {
  const auto s = subject::load("builtin");
  for (std::uint64_t seed : {1u, 2u, 3u}) expect_floors(*s, sample(*s, 3000, seed), true);
}

TEST(distribution, every_share_holds_its_floor_on_a_v1_subject_without_hints) {
  // The naive subject declares no size hints: lengths lean to 16 .. 1024.
  const auto s = subject::load("naive");
  ASSERT_TRUE(s->default_hints());
  expect_floors(*s, sample(*s, 3000, 7), true);
}

TEST(distribution, every_variant_and_pair_holds_its_floor_where_declared) {
  // The naive subject declares every contract 1.1 score variant; a law that draws them gets each and each pair.
  const auto s = subject::load("naive");
  gen_options opt;
  opt.variants = true;
  const case_stats st = sample(*s, 3000, 11, opt);
  expect_floors(*s, st, true, true);
  expect_floors(*s, st, true, false);  // the contract 1.0 shares keep theirs
  // And a subject without them (the naive kernel's version 1 descriptor) never gets one.
  const auto b = subject::wrap(naive_subject(), "naive-v1");
  const case_stats none = sample(*b, 500, 11, opt);
  for (const auto& f : distribution_floors()) {
    if (f.variant) {
      EXPECT_EQ(none.share(f.key), 0.0) << f.key;
    }
  }
}

TEST(distribution, sizes_reach_production_values) {
  const auto s = subject::load("builtin");
  const auto gen = any_case(*s);

  std::int64_t max_lk = 0, max_decode_lk = 0, max_d = 0, max_g = 0, max_b = 0, max_hq = 0;
  std::set<std::int64_t> dims;
  for (int k = 0; k < 6000; ++k) {
    const rc::Random r(static_cast<std::uint64_t>(k) * 7919 + 17);
    const attn_case c = gen(r, 0).value();  // size 0: what rapidcheck asks for at the first case
    max_lk = std::max(max_lk, c.lk);
    if (c.lq == 1) max_decode_lk = std::max(max_decode_lk, c.lk);
    max_d = std::max({max_d, c.d, c.dv});
    max_g = std::max(max_g, c.group());
    max_b = std::max(max_b, c.b);
    max_hq = std::max(max_hq, c.hq);
    dims.insert(c.d);
  }
  EXPECT_GE(max_lk, 2048);
  EXPECT_GE(max_decode_lk, 4096);
  EXPECT_EQ(max_d, 256);
  EXPECT_EQ(max_g, 16);
  EXPECT_GE(max_b, 8);
  EXPECT_EQ(max_hq, 64);
  for (std::int64_t d : {32, 64, 128, 256}) EXPECT_TRUE(dims.count(d)) << "D = " << d << " never drawn";
}

TEST(distribution, the_split_size_and_twice_the_tile_plus_one_are_drawn) {
  const auto s = subject::load("builtin");
  const auto gen = any_case(*s);

  std::set<std::int64_t> lengths;
  for (int k = 0; k < 6000; ++k) {
    const rc::Random r(static_cast<std::uint64_t>(k) * 7919 + 17);
    const attn_case c = gen(r, 0).value();
    lengths.insert(c.lk);
  }
  const auto& h = s->hints();
  for (std::int64_t l : {h.split_keys - 1, h.split_keys, h.split_keys + 1, 2 * h.k_tile + 1, h.k_tile - 1, h.k_tile + 1})
    EXPECT_TRUE(lengths.count(l)) << "Lk = " << l << " never drawn";
}

TEST(distribution, a_spent_budget_keeps_cases_small) {
  const auto s = subject::load("builtin");
  gen_options opt;
  opt.budget = std::make_shared<work_budget>();
  opt.budget->limit = 0;  // already spent
  const auto st = sample(*s, 500, 3, [&] {
    gen_options o = opt;
    o.max_work = opt.small_work;
    return o;
  }());
  EXPECT_EQ(st.n, 500);
}

TEST(distribution, a_failure_among_production_sizes_shrinks_to_the_ones) {
  // A law that fails on every case: rapidcheck must shrink whatever it drew
  // (production sizes included) to the smallest header.
  const auto s = subject::load("builtin");
  law always_fails{"test.always_fails", "fails on every case", [](const subject&) { return std::string(); },
                   [](attn_case&, const subject&) {},
                   [](const subject&, const attn_case&) {
                     law_outcome o;
                     o.fail("always");
                     return o;
                   }};
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    run_options ro;
    ro.seed = seed;
    ro.cases = 10;
    const law_report r = run_law(always_fails, *s, ro);
    ASSERT_EQ(r.v, verdict::fail);
    ASSERT_TRUE(r.counterexample.has_value());
    const attn_case& c = *r.counterexample;
    EXPECT_EQ(std::vector<std::int64_t>({c.b, c.hq, c.hkv, c.lq, c.lk, c.d, c.dv}),
              std::vector<std::int64_t>({1, 1, 1, 1, 1, 1, 1}))
        << to_line(c);
    EXPECT_FALSE(c.causal || c.has_padding() || c.has_mask() || c.scale.has_value()) << to_line(c);
    EXPECT_EQ(c.type, dtype::f32);
  }
}

// A subject's static limits (docs/abi.md "Static limits"): the generator
// draws inside them, so no case is declined; a law whose every case leaves
// them (GQA on a subject without it) is skipped with the limit as its reason.
TEST(distribution, static_limits_cost_no_draws_and_a_law_outside_them_is_skipped) {
  static const attncheck_limits limits = [] {
    attncheck_limits l{};
    l.struct_size = sizeof l;
    l.max_head_dim = 48, l.head_dim_multiple = 8, l.dv_equals_d = 1, l.causal_lq_at_most_lk = 1, l.min_lk = 3;
    l.max_group = 1, l.scale_signs = ATTNCHECK_SCALE_SIGN_POSITIVE;
    l.alibi_max_distance = 20, l.alibi_slopes = ATTNCHECK_ALIBI_GEOMETRIC, l.alibi_max_bias = 8;
    return l;
  }();
  attncheck_instance d{};
  d.struct_size = sizeof d;
  d.abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_4;
  d.name = "limited";
  d.dtypes = (1u << ATTNCHECK_F32) | (1u << ATTNCHECK_F16) | (1u << ATTNCHECK_BF16);
  d.features = ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_MASK;
  d.features_v3 = ATTNCHECK_FEATURE3_ALIBI;
  d.compute_unit_roundoff = 0x1p-24;
  d.exp_ulps = 1;
  d.attend = [](void*, const attncheck_problem*, char*, size_t) { return 0; };
  d.limits = &limits;
  const auto s = subject::adopt(&d, "limited");
  const auto takes = [](const subject& subj, const attn_case& c) {
    subj.attend(c);  // throws case_declined outside the limits
    return law_outcome{};
  };
  law inside{"test.inside", "every case inside the limits", [](const subject&) { return std::string(); },
             [](attn_case&, const subject&) {}, takes};
  law grouped{"test.grouped", "GQA only", [](const subject&) { return std::string(); },
              [](attn_case& c, const subject&) {
                c.hq = 2 * c.hkv;
                if (c.has_mask() && c.mask_shape[1] != 1) c.mask_shape[1] = c.hq;
              },
              takes};
  inside.min_judged = grouped.min_judged = 0;  // they judge nothing: the calls are the test
  inside.variants = true;                      // ALiBi drawn too: its lengths and slopes inside the limits
  run_options ro;
  ro.cases = 300;
  const law_report r = run_law(inside, *s, ro);
  EXPECT_EQ(r.v, verdict::pass) << r.failure.message;
  EXPECT_EQ(r.cases, 300);
  EXPECT_TRUE(r.declines.empty()) << declines_text(r.declines);
  EXPECT_GT(r.stats.share("variant alibi"), 0.1);
  const law_report g = run_law(grouped, *s, ro);
  EXPECT_EQ(g.v, verdict::skip);
  EXPECT_NE(g.skip_reason.find("outside the subject's declared limits"), std::string::npos) << g.skip_reason;
  EXPECT_NE(g.skip_reason.find("limit max_group"), std::string::npos) << g.skip_reason;
}

}  // namespace
}  // namespace attncheck
