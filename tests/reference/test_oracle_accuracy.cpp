// The accuracy each tier and precision of `attncheck oracle` states
// (oracle_result::o_accuracy / lse_accuracy, the numbers behind
// oracle_accuracy_statement) holds against a higher precision: MPFR at 200
// decimal digits (667 bits), compared before its own rounding, on 200 cases:
// small random ones of every kind and adversarial ones at larger sizes (scores
// far below and above zero, gaps across exp's underflow, large logits, tiny
// and subnormal V, V at the accumulator's limit, V that cancels in O).
#include <gtest/gtest.h>

#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "attncheck/oracle.hpp"
#include "oracle_backends.hpp"
#include "oracle_test_support.hpp"

namespace attncheck {
namespace {

using mpfr200 = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<200>>;

constexpr int random_cases = 120;
constexpr int adversarial_cases = 80;

// Adversarial cases at sizes where a row holds tens of keys.
attn_case adversarial_case(int k, std::uint64_t seed) {
  static constexpr const char* kinds[] = {"far_below", "far_above", "underflow_gaps", "large_logits",
                                          "tiny_v",    "max_v",     "huge_v",         "masked_lead"};
  static constexpr const char* types[] = {"f32", "f16", "bf16"};
  std::mt19937_64 rng(seed);
  const auto below = [&](std::uint64_t n) { return static_cast<std::int64_t>(rng() % n); };
  const int kind = k % 10;  // 0-7: a value kind; 8: V cancelling in O; 9: equal keys with cancelling V
  const std::int64_t lk = 16 + below(80), d = 8 + below(25), dv = 1 + below(8);
  std::string line = "ATTN(b=1,hq=2,hkv=1,lq=" + std::to_string(1 + below(3)) + ",lk=" + std::to_string(lk) +
                     ",d=" + std::to_string(d) + ",dv=" + std::to_string(dv) + (k % 2 ? ",causal," : ",") + types[below(3)] +
                     ",values=" +
                     (kind < 8    ? kinds[kind]
                      : kind == 8 ? "normal"
                                  : "equal_keys") +
                     ",seed=" + std::to_string(seed % 100000) + ")";
  attn_case c = parse_line(line);
  materialize(c);
  if (kind >= 8) {
    // V of both signs nearly cancelling: O far below sum_j P_j |V_je|.
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t e = 0; e < c.dv; ++e)
        c.v.set(0, j, 0, e, (j % 2 ? -1.0 : 1.0) * (1 + std::ldexp(static_cast<double>(below(8)), -9)));
  }
  return c;
}

struct tally {
  long long elements = 0, claimed = 0;
  double worst_share = 0;  // max |returned - exact| / stated accuracy
};

// |x - truth| <= accuracy + slack, compared in mpfr200 (no rounding of the test's own).
bool within(double x, const mpfr200& truth, double accuracy, const mpfr200& slack, tally& t) {
  ++t.elements;
  if (std::isnan(accuracy)) return true;  // not claimed: a non-finite visible input
  ++t.claimed;
  if (!std::isfinite(x)) return x == static_cast<double>(truth) && accuracy == 0;  // -inf LSE of an empty row
  const mpfr200 err = abs(mpfr200(x) - truth);
  if (accuracy > 0) t.worst_share = std::max(t.worst_share, static_cast<double>(err / accuracy));
  return err <= mpfr200(accuracy) + slack;
}

// The reference's own error: eps at 2^-660 (docs/oracle.md, "Accuracy") times the
// largest scale an element of the row can have, T + ln Lk + 1 + max |V| + 1.
mpfr200 reference_slack(const attn_case& c) {
  double t = 0, v = 0;
  for (std::int64_t j = 0; j < c.lk; ++j)
    for (std::int64_t g = 0; g < c.hkv; ++g) {
      for (std::int64_t e = 0; e < c.dv; ++e)
        for (std::int64_t bi = 0; bi < c.b; ++bi) v = std::max(v, std::fabs(c.v.at(bi, j, g, e)));
    }
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t j = 0; j < c.lk; ++j) {
          double tj = 0;
          for (std::int64_t d = 0; d < c.d; ++d) tj += std::fabs(c.q.at(bi, i, h, d) * c.k.at(bi, j, c.kv_head(h), d));
          t = std::max(t, tj * std::fabs(static_cast<double>(c.effective_scale())));
        }
  if (!std::isfinite(t) || !std::isfinite(v)) return mpfr200(0);  // such rows claim nothing
  const double dd = static_cast<double>(c.d), lk = static_cast<double>(c.lk);
  return ldexp(mpfr200(1), -600) * (4 * (dd + 2) * (t + 1) + 2 * lk + 8) * (t + std::log(lk) + 2 + v);
}

TEST(oracle_accuracy, stated_accuracy_holds_for_every_tier_and_precision_against_mpfr200) {
  const std::uint64_t seed = oracle_testing::base_seed();
  std::printf("seed %llu (ATTNCHECK_SEED=<n> replays)\n", static_cast<unsigned long long>(seed));
  const oracle_precision precisions[] = {oracle_precision::mpfr50, oracle_precision::mpfr100, oracle_precision::cpp_bin100,
                                         oracle_precision::auto_tier};
  std::map<std::string, tally> tallies;  // "precision/tier"
  int fast_cases = 0;
  for (int k = 0; k < random_cases + adversarial_cases && !::testing::Test::HasFailure(); ++k) {
    const std::uint64_t s = seed * 1000003u + static_cast<std::uint64_t>(k);
    attn_case c = k < random_cases ? oracle_testing::any_small_case(s) : adversarial_case(k, s);
    if (k == random_cases + adversarial_cases - 1) {
      // The production-size case on which the fast tier once printed MPFR's claim, 3.6e6 ulps off it.
      c = parse_line("ATTN(b=1,hq=4,hkv=1,lq=4,lk=1024,d=64,dv=64,causal,f16,values=far_below,seed=20)");
      materialize(c);
    }
    const auto truth = oracle_detail::naive_attention<mpfr200>(c);
    const mpfr200 slack = reference_slack(c);
    for (oracle_precision p : precisions) {
      oracle_options opt;
      opt.precision = p;
      opt.want_accuracy = true;
      opt.out_type = c.type;
      const oracle_result r = reference(c, opt);
      const std::string key = std::string(name(p)) + "/" + std::string(name(r.tier));
      fast_cases += r.tier == oracle_tier::fast_binary64;
      tally& t = tallies[key];
      ASSERT_EQ(r.o_accuracy.size(), r.o.size()) << key;
      ASSERT_EQ(r.lse_accuracy.size(), r.lse.size()) << key;
      for (std::size_t x = 0; x < r.o.size(); ++x)
        ASSERT_TRUE(within(r.o[x], truth.o[x], r.o_accuracy[x], slack, t))
            << key << " " << to_line(c) << " O element " << x << ": returned " << r.o[x] << ", mpfr200 "
            << static_cast<double>(truth.o[x]) << ", stated accuracy " << r.o_accuracy[x];
      for (std::size_t x = 0; x < r.lse.size(); ++x)
        ASSERT_TRUE(within(r.lse[x], truth.lse[x], r.lse_accuracy[x], slack, t))
            << key << " " << to_line(c) << " LSE row " << x << ": returned " << r.lse[x] << ", mpfr200 "
            << static_cast<double>(truth.lse[x]) << ", stated accuracy " << r.lse_accuracy[x];
    }
  }
  for (const auto& [key, t] : tallies)
    std::printf("%-28s %8lld elements, %8lld claimed, worst error / stated accuracy %.3g\n", key.c_str(), t.elements, t.claimed,
                t.worst_share);
  // Every tier is exercised: auto must have taken its fast tier on some cases.
  EXPECT_GT(fast_cases, 0);
  for (const char* key : {"mpfr50/multiprecision", "mpfr100/multiprecision", "cpp_bin100/multiprecision", "auto/fast_binary64"})
    EXPECT_GT(tallies[key].claimed, 0) << key;
}

// The statement names the tier that computed the result, with its numbers.
TEST(oracle_accuracy, statement_is_the_tiers_own) {
  const std::string mp50 = oracle_accuracy_statement(oracle_precision::mpfr50, oracle_tier::multiprecision);
  const std::string mp100 = oracle_accuracy_statement(oracle_precision::mpfr100, oracle_tier::multiprecision);
  const std::string bin100 = oracle_accuracy_statement(oracle_precision::cpp_bin100, oracle_tier::multiprecision);
  const std::string fast = oracle_accuracy_statement(oracle_precision::auto_tier, oracle_tier::fast_binary64);
  EXPECT_NE(mp50.find("2^-167"), std::string::npos) << mp50;
  EXPECT_NE(mp100.find("mpfr_float_100"), std::string::npos) << mp100;
  EXPECT_EQ(mp100.find("static_mpfr_float_50"), std::string::npos) << mp100;
  EXPECT_NE(bin100.find("cpp_bin_float_100"), std::string::npos) << bin100;
  EXPECT_NE(fast.find("E_own"), std::string::npos) << fast;
  EXPECT_EQ(fast.find("MPFR static"), std::string::npos) << fast;
  for (const auto& s : {mp50, mp100, bin100, fast}) EXPECT_EQ(s.find("SPEC.md"), std::string::npos) << s;
}

}  // namespace
}  // namespace attncheck
