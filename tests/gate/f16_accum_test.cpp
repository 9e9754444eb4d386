// The probabilistic verdict on an f16 accumulator at Lk = 4096
// (docs/bound.md, "The probabilistic bound"): the plugin
// tests/plugins/f16_accum.c (u = 2^-11) is judged there on a
// documented share of its elements, its mutant skip_rescale=1 is caught by the
// probabilistic verdict, and the correct one passes it over 20 seeds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "attncheck/check.hpp"
#include "attncheck/laws.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {
namespace {

struct judged {
  comparison correct, mutant;
  std::int64_t max_key = -1;  ///< the key with the largest score of row (b 0, h 0, i 0)
};

// One Lk = 4096 f16 case: the oracle once (auto_tier, as every law), both instances against it.
judged judge(const std::string& values, std::uint64_t seed, bool causal = false) {
  static const auto good = subject::load(ATTNCHECK_F16_PLUGIN);
  static const auto bad = subject::load(std::string(ATTNCHECK_F16_PLUGIN) + ":skip_rescale=1");
  attn_case c = parse_line("ATTN(b=1,hq=1,hkv=1,lq=4,lk=4096,d=32,dv=8," + std::string(causal ? "causal," : "") +
                           "f16,values=" + values + ",seed=" + std::to_string(seed) + ")");
  materialize(c);
  const oracle_result ref = reference(c, oracle_options_for(*good, c, oracle_precision::auto_tier));
  judged j;
  j.correct = compare_with_reference(c, good->attend(c), ref);
  j.mutant = compare_with_reference(c, bad->attend(c), ref);
  double best = -1e300;
  for (std::int64_t k = 0; k < c.lk; ++k) {
    double dot = 0;
    for (std::int64_t x = 0; x < c.d; ++x) dot += c.q.at(0, 0, 0, x) * c.k.at(0, k, 0, x);
    if (dot > best) best = dot, j.max_key = k;
  }
  return j;
}

law_outcome as_outcome(const comparison& c) {
  law_outcome o;
  o.add("O and LSE against the oracle", c);
  return o;
}

// The documented share (docs/bound.md, "Measured"): at Lk = 4096 the sound
// bound of this subject is +inf on every element (gamma_(n+nb+1) with
// n u >= 1), and the probabilistic bound judges all of them.
TEST(F16Accum, JudgedShareAtLk4096) {
  for (const char* values : {"normal", "dominant"}) {
    const judged j = judge(values, 1);
    const judged_shares sh = as_outcome(j.correct).shares();
    std::printf(
        "f16_accum Lk=4096 values=%s: %lld elements, sound %lld, probabilistic %lld, unjudged %lld; "
        "correct: prob max obs/bd %.3g; mutant: prob max obs/bd %.3g\n",
        values, static_cast<long long>(sh.total()), static_cast<long long>(sh.sound), static_cast<long long>(sh.prob),
        static_cast<long long>(sh.unjudged), j.correct.prob_max_ratio, j.mutant.prob_max_ratio);
    EXPECT_EQ(sh.total(), 4 * (8 + 1));  // lq * (dv + LSE)
    EXPECT_EQ(sh.sound, 0);
    EXPECT_EQ(sh.prob, sh.total());
    EXPECT_TRUE(j.correct.pass) << j.correct.failure;
    EXPECT_TRUE(j.correct.prob_pass) << j.correct.prob_failure;
  }
}

// The mutant's O(1) error on rows whose maximum (the dominant key) arrives
// after the first block: invisible to the sound bound at this length (it
// judges nothing there, so it cannot fail), caught by the probabilistic one.
TEST(F16Accum, MutantCaughtByProbabilisticVerdict) {
  const judged j = judge("dominant", 1);
  EXPECT_TRUE(j.mutant.pass) << "the sound verdict judges nothing here: " << j.mutant.failure;
  EXPECT_FALSE(j.mutant.prob_pass);
  EXPECT_EQ(as_outcome(j.mutant).prob(), prob_verdict::fail);
  EXPECT_GT(j.mutant.prob_max_ratio, 1.0);
  std::printf("mutant: %s\n", j.mutant.prob_failure.c_str());
}

// 20 seeds: the correct subject passes the probabilistic verdict on every
// case (normal and dominant values, causal too); the mutant fails it on every
// dominant case whose maximum arrives late (after the first quarter of the
// keys: the old blocks then carry weights exp(S_j - m_old) >> the truth).
TEST(F16Accum, TwentySeeds) {
  int caught = 0, cases = 0, late = 0;
  double worst = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    for (const char* values : {"normal", "dominant"}) {
      const judged j = judge(values, seed, seed % 2 == 0);
      ++cases;
      EXPECT_TRUE(j.correct.pass) << values << " seed " << seed << ": " << j.correct.failure;
      EXPECT_TRUE(j.correct.prob_pass) << values << " seed " << seed << ": " << j.correct.prob_failure;
      EXPECT_GT(j.correct.prob_compared, 0) << values << " seed " << seed;
      worst = std::max(worst, j.correct.prob_max_ratio);
      if (std::string(values) == "dominant") {
        std::printf("seed %llu: maximum at key %lld, mutant prob max obs/bd %.3g\n", static_cast<unsigned long long>(seed),
                    static_cast<long long>(j.max_key), j.mutant.prob_max_ratio);
        if (j.max_key >= 1024) {
          ++late;
          EXPECT_FALSE(j.mutant.prob_pass) << "seed " << seed << ": maximum at key " << j.max_key
                                           << ", the mutant passed (max obs/bd " << j.mutant.prob_max_ratio << ")";
        }
        caught += !j.mutant.prob_pass;
      }
    }
  }
  std::printf("20 seeds: %d cases; correct worst prob obs/bd %.3g; mutant caught on %d of 20 dominant cases (%d late)\n", cases,
              worst, caught, late);
  EXPECT_GE(late, 10);  // the test checks what it claims on enough cases
}

}  // namespace
}  // namespace attncheck

namespace attncheck {
namespace {

// The comparison's rules for the probabilistic verdict: it judges only where
// the sound bound is useless, never changes the sound verdict, and NaN or an
// excess fails it alone.
TEST(ProbComparison, OwnVerdictBesideTheSoundOne) {
  comparison c;
  c.overflow_threshold = overflow_threshold(dtype::f16);
  c.element("useful", 1.0, 1.5, 1.0, 0.1, false);  // sound bound useful: prob not consulted
  EXPECT_TRUE(c.pass);
  EXPECT_TRUE(c.prob_pass);
  EXPECT_EQ(c.prob_compared, 0);
  c.element("useless", 1.0, 1.5, 10.0, 0.1, true);  // finite, useless: sound passes, prob fails
  EXPECT_TRUE(c.pass);
  EXPECT_FALSE(c.prob_pass);
  EXPECT_EQ(c.prob_compared, 1);
  EXPECT_EQ(c.useless, 1);
  EXPECT_NE(c.prob_failure.find("probabilistic bound exceeded at useless"), std::string::npos) << c.prob_failure;
  comparison d;
  d.element("inf", 1.0, 1.05, INFINITY, 0.1, true);  // +inf sound: unjudged by it, judged by prob
  d.element("nan", 1.0, NAN, INFINITY, 0.1, true);
  d.element("no pbound", 1.0, 7.0, INFINITY, INFINITY, true);
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.compared, 0);
  EXPECT_EQ(d.unbounded, 3);
  EXPECT_EQ(d.prob_compared, 2);
  EXPECT_FALSE(d.prob_pass);
  EXPECT_NE(d.prob_failure.find("NaN at nan"), std::string::npos) << d.prob_failure;
  law_outcome o;
  o.add("x", d);
  EXPECT_EQ(o.v, verdict::pass);
  EXPECT_EQ(o.prob(), prob_verdict::fail);
  const judged_shares sh = o.shares();
  EXPECT_EQ(sh.sound, 0);
  EXPECT_EQ(sh.prob, 2);
  EXPECT_EQ(sh.unjudged, 1);
  EXPECT_EQ(sh.sound_finite, 0);
}

}  // namespace
}  // namespace attncheck
