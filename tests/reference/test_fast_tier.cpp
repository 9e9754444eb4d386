// The oracle's fast tier (oracle_precision::auto_tier) against the MPFR oracle
// on thousands of seeded cases, adversarial ones included: on every element
// the fast values lie within the fast tier's own error bound of the MPFR
// values, and where the tier chooser accepts the fast tier, its bound contains
// the MPFR bound around the MPFR value and exceeds it by at most
// fast_tier_fraction. A fast tier that is wrong on purpose is caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "attncheck/enum_names.hpp"
#include "attncheck/oracle.hpp"
#include "fast_tier.hpp"
#include "oracle_backends.hpp"
#include "oracle_test_support.hpp"

namespace attncheck {
namespace {

using oracle_detail::fast_tier;
using oracle_detail::fast_tier_hooks;
using oracle_detail::fast_tier_result;
using oracle_testing::base_seed;
using oracle_testing::madds;
using oracle_testing::with_random_storage;

constexpr double inf = std::numeric_limits<double>::infinity();

// Random cases drawn by materialize(): most small (every mask, dtype, value kind,
// layout, poison), some with D and Lk up to a few hundred.
constexpr int small_cases = 4000;
constexpr int wide_cases = 600;
// Hand-built adversarial rows, each kind drawn this many times.
constexpr int adversarial_per_kind = 200;
// Caps the wide cases' multiply-adds (MPFR: ~0.5 us each) so the test stays
// well under a minute on two shared cores.
constexpr std::int64_t wide_work_cap = 200'000;

// A case with D and Lk up to a few hundred (Dv up to 64): Lk, D and Dv are
// drawn first, then Lq and the heads shrink until the work fits wide_work_cap;
// masks, padding, causal, dtype, values at random.
attn_case any_wide_case(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const oracle_testing::uniform_below below{rng};
  attn_case c;
  c.lk = 1 + below(320);
  c.d = 1 + below(256);
  c.dv = 1 + below(64);
  c.hkv = 1 + below(2);
  c.hq = c.hkv * (1 + below(2));
  c.lq = 1 + below(3);
  while (madds(c) > wide_work_cap && c.lq > 1) --c.lq;
  if (madds(c) > wide_work_cap) c.hq = c.hkv = 1;
  c.causal = below(2) == 0;
  if (below(3) == 0) c.key_len = {below(c.lk + 1)};
  if (below(4) == 0) c.mask_shape = {1, below(2) ? c.hq : 1, below(2) ? c.lq : 1, c.lk};
  return with_random_storage(c, below, rng);
}

// The adversarial rows materialize() does not draw on purpose.
enum class adversary { all_scores_far_below_zero, cancelling_v, gaps_across_exp_underflow, subnormal_scores, big_scale };
// Each adversary and the kind its cases are tallied under.
constexpr name_table<adversary, 5> adversaries{{
    {adversary::all_scores_far_below_zero, "adv:all_scores_far_below_zero"},
    {adversary::cancelling_v, "adv:cancelling_v"},
    {adversary::gaps_across_exp_underflow, "adv:gaps_across_exp_underflow"},
    {adversary::subnormal_scores, "adv:subnormal_scores"},
    {adversary::big_scale, "adv:big_scale"},
}};

attn_case adversarial_case(adversary a, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1, 1);
  attn_case c;
  c.hq = 2;
  c.hkv = 1;
  c.lq = 2;
  c.lk = 3 + static_cast<std::int64_t>(rng() % 40);
  c.d = 1 + static_cast<std::int64_t>(rng() % 8);
  c.dv = 1 + static_cast<std::int64_t>(rng() % 6);
  c.type = static_cast<dtype>(rng() % 3);
  c.causal = rng() % 2 == 0;
  c.seed = seed;
  if (a == adversary::gaps_across_exp_underflow) c.d = 1, c.scale = 1.0f;
  if (a == adversary::big_scale) c.scale = static_cast<float>(std::ldexp(1.0, 4 + static_cast<int>(rng() % 10)));
  c = oracle_testing::with_zero_tensors(c);
  for (std::int64_t i = 0; i < c.lq; ++i)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t d = 0; d < c.d; ++d) {
        double q = unit(rng);
        if (a == adversary::all_scores_far_below_zero) q = 30 + 10 * std::fabs(q);  // K < 0 below: every S << 0
        if (a == adversary::gaps_across_exp_underflow) q = 1;
        if (a == adversary::subnormal_scores) q = std::ldexp(unit(rng), -70);
        c.q.set(0, i, h, d, q);
      }
  for (std::int64_t j = 0; j < c.lk; ++j) {
    for (std::int64_t d = 0; d < c.d; ++d) {
      double k = unit(rng);
      if (a == adversary::all_scores_far_below_zero) k = -(20 + 10 * std::fabs(k));
      // Scores 0 and -(690 .. 790): weights that are normal, subnormal and 0 in binary64.
      if (a == adversary::gaps_across_exp_underflow) k = j == 0 ? 0.0 : -(690.0 + static_cast<double>(rng() % 100));
      if (a == adversary::subnormal_scores) k = std::ldexp(unit(rng), -70);
      c.k.set(0, j, 0, d, k);
    }
    for (std::int64_t e = 0; e < c.dv; ++e) {
      double v = unit(rng);
      // V of both signs that nearly cancel: O far below sum_j P_j |V_je|.
      if (a == adversary::cancelling_v) v = (j % 2 ? -1.0 : 1.0) * (1 + std::ldexp(static_cast<double>(rng() % 8), -9));
      c.v.set(0, j, 0, e, v);
    }
  }
  return c;
}

oracle_options options_for(const attn_case& c, std::uint64_t seed) {
  oracle_options opt;
  opt.out_type = c.type;
  opt.bound.key_blocks = 1 + static_cast<std::int64_t>(seed % 3) * 3;  // 1, 4 or 7 blocks
  opt.bound.exp_ulps = 1 + static_cast<double>(seed % 2);
  // One case in five declares binary64 compute: bounds as tight as the fast
  // tier's own error, where the chooser must fall back.
  if (seed % 5 == 4) opt.bound.u_compute = 0x1p-53;
  return opt;
}

struct tally {
  long cases = 0, fast = 0;
  std::map<std::string, long> reasons;  // why the others fell back
};

struct own_error_check {
  long elements = 0;  // compared: the own error is finite
  long outside = 0;   // |fast - mpfr| > own error, or NaN
  std::string first;
};

// |fast - mpfr| <= own error on every element with a finite own error.
void check_own_error(const attn_case& c, const fast_tier_result& f, const oracle_result& m, own_error_check& out) {
  const auto one = [&](const char* what, std::size_t x, double fast, double mpfr, double own) {
    if (!std::isfinite(own)) return;
    ++out.elements;
    const bool ok = fast == mpfr || std::fabs(fast - mpfr) <= own;  // == : -inf of empty rows
    if (!ok) {
      ++out.outside;
      if (out.first.empty()) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s[%zu]: fast %.17g mpfr %.17g |diff| %.3g own error %.3g", what, x, fast, mpfr,
                      std::fabs(fast - mpfr), own);
        out.first = to_line(c) + "  " + buf;
      }
    }
  };
  for (std::size_t x = 0; x < m.o.size(); ++x) one("O", x, f.r.o[x], m.o[x], f.o_error[x]);
  for (std::size_t x = 0; x < m.lse.size(); ++x) one("LSE", x, f.r.lse[x], m.lse[x], f.lse_error[x]);
}

// Largest ratios seen where the fast tier was accepted, per declared subject.
struct excess {
  double over_mpfr = 0;  // (B_fast - B_mpfr) / B_mpfr
  double own_share = 0;  // E_own / B_fast
};

// Where the fast tier is accepted: the MPFR acceptance region lies inside the
// fast one (B_fast >= B_mpfr + |fast - mpfr|), B_fast <= B_mpfr (1 + fraction),
// and the fast region inside the MPFR one widened by twice the fraction.
void check_accepted(const attn_case& c, const fast_tier_result& f, const oracle_result& t, const oracle_result& m,
                    excess& worst) {
  const auto one = [&](const char* what, std::size_t x, double fast, double mpfr, double b_fast, double b_mpfr, double own) {
    ASSERT_TRUE(std::isfinite(b_mpfr)) << what << "[" << x << "] accepted where the MPFR bound is " << b_mpfr << ": "
                                       << to_line(c);
    const double diff = fast == mpfr ? 0.0 : std::fabs(fast - mpfr);
    EXPECT_GE(b_fast, b_mpfr + diff) << what << "[" << x << "] " << to_line(c);
    EXPECT_LE(b_fast, b_mpfr * (1 + fast_tier_fraction)) << what << "[" << x << "] " << to_line(c);
    EXPECT_LE(b_fast + diff, b_mpfr * (1 + 2 * fast_tier_fraction)) << what << "[" << x << "] " << to_line(c);
    if (b_mpfr > 0) worst.over_mpfr = std::max(worst.over_mpfr, (b_fast - b_mpfr) / b_mpfr);
    if (b_fast > 0) worst.own_share = std::max(worst.own_share, own / b_fast);
  };
  for (std::size_t x = 0; x < m.o.size(); ++x) one("O", x, t.o[x], m.o[x], t.o_bound[x], m.o_bound[x], f.o_error[x]);
  for (std::size_t x = 0; x < m.lse.size(); ++x)
    one("LSE", x, t.lse[x], m.lse[x], t.lse_bound[x], m.lse_bound[x], f.lse_error[x]);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t x = 0; x < a.size(); ++x)
    if (std::memcmp(&a[x], &b[x], sizeof(double)) != 0) return false;
  return true;
}

// Runs one case through all three: the fast tier alone, auto_tier and mpfr50.
// The fast and MPFR results go to f_out and m_out when given.
void run_case(const attn_case& c, const oracle_options& opt, const std::string& kind, std::map<std::string, tally>& shares,
              own_error_check& own, std::map<std::string, excess>& worst, fast_tier_result* f_out = nullptr,
              oracle_result* m_out = nullptr) {
  fast_tier_result f = fast_tier(c, opt);
  oracle_options mo = opt, to = opt;
  mo.precision = oracle_precision::mpfr50;
  to.precision = oracle_precision::auto_tier;
  oracle_result m = reference(c, mo);
  const oracle_result t = reference(c, to);
  check_own_error(c, f, m, own);
  const bool binary64_subject = opt.bound.u_compute < 0x1p-24;
  tally& s = shares[(binary64_subject ? "u=2^-53 " : "") + kind];
  ++s.cases;
  if (!f.accepted) ++s.reasons[f.reason.substr(f.reason.find(": ") + 2)];
  if (f.accepted) {
    ++s.fast;
    ASSERT_EQ(t.tier, oracle_tier::fast_binary64) << to_line(c);
    EXPECT_TRUE(same_bits(t.o, f.r.o) && same_bits(t.lse, f.r.lse)) << to_line(c);
    check_accepted(c, f, t, m, worst[binary64_subject ? "binary64 subjects" : "f32 subjects"]);
  } else {
    // Fallback: the whole case, bit for bit the MPFR oracle.
    ASSERT_EQ(t.tier, oracle_tier::multiprecision) << to_line(c);
    EXPECT_TRUE(same_bits(t.o, m.o) && same_bits(t.lse, m.lse) && same_bits(t.o_bound, m.o_bound) &&
                same_bits(t.lse_bound, m.lse_bound))
        << to_line(c);
  }
  if (f_out) *f_out = std::move(f);
  if (m_out) *m_out = std::move(m);
}

// One line of a share table: cases judged by the fast tier of all cases.
void print_share(const std::string& label, long fast, long cases) {
  std::printf("  %-36s %5ld / %5ld  %5.1f%%\n", label.c_str(), fast, cases,
              100.0 * static_cast<double>(fast) / static_cast<double>(cases));
}

void print_shares(const std::map<std::string, tally>& shares) {
  for (const auto& [kind, s] : shares) print_share(kind, s.fast, s.cases);
}

// Why the chooser went to MPFR, counted apart for f32 and binary64 subjects.
void print_fallback_reasons(const std::map<std::string, tally>& shares) {
  std::printf("fallback reasons (cases: f32 subjects, binary64 subjects):\n");
  std::map<std::string, std::pair<long, long>> reasons;
  for (const auto& [kind, s] : shares)
    for (const auto& [why, count] : s.reasons) (kind.starts_with("u=") ? reasons[why].second : reasons[why].first) += count;
  for (const auto& [why, count] : reasons) std::printf("  %5ld %5ld  %s\n", count.first, count.second, why.c_str());
}

void print_worst(const std::map<std::string, excess>& worst) {
  for (const auto& [who, w] : worst)
    std::printf("%s, where accepted: largest (B_fast - B_mpfr) / B_mpfr 2^%.1f, largest E_own / B_fast 2^%.1f\n", who.c_str(),
                std::log2(w.over_mpfr), std::log2(w.own_share));
}

TEST(fast_tier, within_its_own_error_of_mpfr_and_never_looser_than_the_fraction) {
  const std::uint64_t seed = base_seed();
  std::printf("ATTNCHECK_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::map<std::string, tally> shares;
  own_error_check own;
  std::map<std::string, excess> worst;
  for (int t = 0; t < small_cases && !::testing::Test::HasFatalFailure(); ++t) {
    const std::uint64_t s = seed + static_cast<std::uint64_t>(t);
    const attn_case c = oracle_testing::any_small_case(s);
    run_case(c, options_for(c, s), std::string(name(c.values)), shares, own, worst);
  }
  for (int t = 0; t < wide_cases && !::testing::Test::HasFatalFailure(); ++t) {
    const std::uint64_t s = seed + 1'000'000 + static_cast<std::uint64_t>(t);
    const attn_case c = any_wide_case(s);
    run_case(c, options_for(c, s), "wide:" + std::string(name(c.values)), shares, own, worst);
  }
  for (const auto& [a, kind] : adversaries)
    for (int t = 0; t < adversarial_per_kind && !::testing::Test::HasFatalFailure(); ++t) {
      const std::uint64_t s = seed + 2'000'000 + static_cast<std::uint64_t>(t) * 8 + static_cast<std::uint64_t>(a);
      const attn_case c = adversarial_case(a, s);
      run_case(c, options_for(c, s), std::string(kind), shares, own, worst);
    }
  EXPECT_EQ(own.outside, 0) << "first: " << own.first;
  long cases = 0, fast = 0;
  std::printf("tier shares (cases judged by the fast tier / cases):\n");
  print_shares(shares);
  for (const auto& [kind, s] : shares) cases += s.cases, fast += s.fast;
  print_share("all", fast, cases);
  print_fallback_reasons(shares);
  std::printf("own error checked on %ld elements\n", own.elements);
  print_worst(worst);
  // A chooser that never picks the fast tier would pass every check above.
  EXPECT_GT(fast, cases / 2);
  EXPECT_GT(own.elements, 10'000);
}

oracle_options mpfr50_options(oracle_options opt) {
  opt.precision = oracle_precision::mpfr50;
  return opt;
}

// The chooser's fallbacks, one case each: the whole case goes to mpfr50.
TEST(fast_tier, falls_back_where_its_error_is_not_small_or_no_bound_exists) {
  const auto expect_fallback = [](const attn_case& c, const oracle_options& opt, const char* why, const char* reason) {
    const fast_tier_result f = fast_tier(c, opt);
    EXPECT_FALSE(f.accepted) << why << ": " << to_line(c);
    EXPECT_NE(f.reason.find(reason), std::string::npos) << why << ": rejected for " << f.reason;
    oracle_options to = opt;
    to.precision = oracle_precision::auto_tier;
    const oracle_result t = reference(c, to), m = reference(c, mpfr50_options(opt));
    EXPECT_EQ(t.tier, oracle_tier::multiprecision) << why;
    EXPECT_TRUE(same_bits(t.o, m.o) && same_bits(t.o_bound, m.o_bound) && same_bits(t.lse_bound, m.lse_bound)) << why;
    std::printf("%-58s -> mpfr50 (%s)\n", why, f.reason.c_str());
  };
  // V of both signs cancelling exactly (O = 0) under a binary64 subject's bound:
  // the fast tier's own error is a sizeable share of that bound.
  attn_case c;
  c.lk = 6;
  c.dv = 2;
  c = oracle_testing::with_zero_tensors(c);
  for (std::int64_t j = 0; j < c.lk; ++j)
    for (std::int64_t e = 0; e < c.dv; ++e) c.v.set(0, j, 0, e, j % 2 ? -1.5 : 1.5);
  oracle_options tight;
  tight.bound.u_compute = 0x1p-53;
  expect_fallback(c, tight, "cancelling V, subject declaring binary64", "O: fast error above its share");
  EXPECT_TRUE(fast_tier(c, oracle_options{}).accepted) << "the same case under an f32 subject's bound";
  // A NaN at a visible slot: no bound exists (NaN).
  attn_case nan_case = c;
  nan_case.v.set(0, 2, 0, 1, std::numeric_limits<double>::quiet_NaN());
  expect_fallback(nan_case, oracle_options{}, "NaN in a visible V", "O: docs/bound.md bound not finite");
  // V near the f32 limit: the bound of docs/bound.md is +inf (an accumulator may overflow f32).
  attn_case huge = c;
  for (std::int64_t j = 0; j < huge.lk; ++j) huge.v.set(0, j, 0, 0, 3e38);
  expect_fallback(huge, oracle_options{}, "V near the f32 limit (docs/bound.md bound +inf)", "O: docs/bound.md bound not finite");
  // bf16 logits near the type's limit: binary64's own score error is far from small.
  attn_case big;
  big.lk = 3;
  big.type = dtype::bf16;
  big.scale = 1.0f;
  big = oracle_testing::with_zero_tensors(big);
  big.q.set(0, 0, 0, 0, 1e30);
  for (std::int64_t j = 0; j < big.lk; ++j) big.k.set(0, j, 0, 0, 1e8 * static_cast<double>(j + 1));
  oracle_options bf16_out;
  bf16_out.out_type = dtype::bf16;
  expect_fallback(big, bf16_out, "bf16 scores near the f32 limit", "weights outside the first-order range");
  // Scores so large that binary64's own dot-product error leaves the first-order range.
  attn_case large = big;
  large.type = dtype::f32;
  large = oracle_testing::with_zero_tensors(large);
  large.q.set(0, 0, 0, 0, 1e18);
  for (std::int64_t j = 0; j < large.lk; ++j) large.k.set(0, j, 0, 0, 1e2 * static_cast<double>(j + 1));
  expect_fallback(large, oracle_options{}, "|scores| ~ 1e20: binary64 score error > 2^-30",
                  "weights outside the first-order range");
}

// ---- contract 1.1 variants (docs/oracle.md, "Variants in the fast tier") ----

constexpr int variant_small_cases = 3000;
constexpr int variant_wide_cases = 300;
constexpr int value_kinds = static_cast<int>(value_kind::max_v) + 1;

// Draws every variant independently (each about half the time, the chunk a
// quarter), at least one of them, onto c and rematerializes it with a value
// kind from all of them (the adversarial ones included).
template <class Below>
attn_case with_random_variants(attn_case c, const Below& below) {
  while (!c.variants.any()) oracle_testing::draw_variants(c, below, 50.0);
  c.values = static_cast<value_kind>(below(value_kinds));
  materialize(c);
  return c;
}

// A small case (any_small_case's shapes, masks, layouts, dtypes) with variants.
attn_case any_small_variant_case(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0xfa57a11e);
  const oracle_testing::uniform_below below{rng};
  return with_random_variants(oracle_testing::any_small_case(seed), below);
}

// A wide case (any_wide_case's shapes) with variants; windows and chunks then
// cut rows of up to a few hundred keys.
attn_case any_wide_variant_case(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0xfa57a11e);
  const oracle_testing::uniform_below below{rng};
  attn_case c = with_random_variants(any_wide_case(seed), below);
  if (below(2)) {  // windows and chunks of the row's scale
    c.variants.window_left = below(c.lk);
    c.variants.window_right = below(3) ? -1 : below(c.lk);
  }
  if (below(4) == 0) c.variants.chunk = 1 + below(c.lk);
  materialize(c);
  return c;
}

// The variants a case has, each one a tally key.
std::vector<std::string> variants_of(const attn_case& c) {
  const score_variants& w = c.variants;
  std::vector<std::string> out;
  if (w.has_window()) out.emplace_back("window");
  if (w.has_chunk()) out.emplace_back("chunk");
  if (w.has_softcap()) out.emplace_back("softcap");
  if (w.has_sinks()) out.push_back("sinks:" + std::string(name(w.sinks)));
  if (w.has_alibi()) out.push_back("alibi:" + std::string(name(w.alibi)));
  if (w.has_bias()) out.push_back("bias:" + std::string(name(w.bias_values)));
  return out;
}

// The fast tier on cases with variants: the same checks as the contract 1.0
// sweep (own error against mpfr50 on every element; where accepted, the bound
// contains mpfr50's and exceeds it by at most the fraction; where not, mpfr50
// bit for bit), and the share it judges, per variant and overall.
TEST(fast_tier, variants_within_its_own_error_of_mpfr_and_never_looser_than_the_fraction) {
  const std::uint64_t seed = base_seed();
  std::printf("ATTNCHECK_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::map<std::string, tally> shares, per_variant, per_kind;
  own_error_check own;
  std::map<std::string, excess> worst;
  double worst_ratio = 0;  // largest |fast - mpfr| / own error over elements with own error > 0
  std::string worst_at;
  const auto one = [&](const attn_case& c, std::uint64_t s, const std::string& size) {
    const oracle_options opt = options_for(c, s);
    const bool b64 = opt.bound.u_compute < 0x1p-24;
    fast_tier_result f;
    oracle_result m;
    run_case(c, opt, size + std::string(name(c.type)), shares, own, worst, &f, &m);
    const auto ratio = [&](const char* what, std::size_t x, double fast, double mpfr, double e) {
      if (!std::isfinite(e) || e <= 0 || fast == mpfr || std::fabs(fast - mpfr) / e <= worst_ratio) return;
      worst_ratio = std::fabs(fast - mpfr) / e;
      worst_at = std::string(what) + "[" + std::to_string(x) + "] of " + to_line(c);
    };
    for (std::size_t x = 0; x < m.o.size(); ++x) ratio("O", x, f.r.o[x], m.o[x], f.o_error[x]);
    for (std::size_t x = 0; x < m.lse.size(); ++x) ratio("LSE", x, f.r.lse[x], m.lse[x], f.lse_error[x]);
    for (const std::string& v : variants_of(c)) {
      tally& t = per_variant[(b64 ? "u=2^-53 " : "") + v];
      ++t.cases;
      t.fast += f.accepted ? 1 : 0;
      if (!f.accepted) ++t.reasons[f.reason.substr(f.reason.find(": ") + 2)];
    }
    tally& k = per_kind[(b64 ? "u=2^-53 " : "") + std::string(name(c.values))];
    ++k.cases;
    k.fast += f.accepted ? 1 : 0;
  };
  for (int t = 0; t < variant_small_cases && !::testing::Test::HasFatalFailure(); ++t) {
    const std::uint64_t s = seed + 3'000'000 + static_cast<std::uint64_t>(t);
    one(any_small_variant_case(s), s, "small ");
  }
  for (int t = 0; t < variant_wide_cases && !::testing::Test::HasFatalFailure(); ++t) {
    const std::uint64_t s = seed + 4'000'000 + static_cast<std::uint64_t>(t);
    one(any_wide_variant_case(s), s, "wide ");
  }
  EXPECT_EQ(own.outside, 0) << "first: " << own.first;
  long cases = 0, fast = 0, f32_cases = 0, f32_fast = 0;
  for (const auto& [kind, s] : shares) {
    cases += s.cases;
    fast += s.fast;
    if (!kind.starts_with("u=")) f32_cases += s.cases, f32_fast += s.fast;
  }
  std::printf("variant cases judged by the fast tier, by size and dtype:\n");
  print_shares(shares);
  std::printf("by variant (a case counts under each variant it has):\n");
  print_shares(per_variant);
  std::printf("by value kind:\n");
  print_shares(per_kind);
  print_share("all", fast, cases);
  print_share("f32 subjects", f32_fast, f32_cases);
  print_fallback_reasons(shares);
  std::printf("own error checked on %ld elements; largest |fast - mpfr| / own error 2^%.1f at %s\n", own.elements,
              std::log2(worst_ratio), worst_at.c_str());
  print_worst(worst);
  // Most variant cases under f32 subjects must be judged in binary64 (the point of covering them).
  EXPECT_GT(f32_fast, f32_cases * 4 / 5);
  EXPECT_GT(own.elements, 10'000);
}

// A row that sees no key but has a sink: O = 0 and LSE = sigma exactly, with
// the MPFR oracle's bound bit for bit; a sink of -inf is no sink.
TEST(fast_tier, a_row_without_keys_gives_zero_and_the_sink_exactly) {
  attn_case c = oracle_testing::with_zero_tensors(oracle_testing::shaped_case({.hq = 2, .lq = 2, .lk = 3, .dv = 2}));
  c.key_len = {0};
  c.variants.sinks = sink_kind::mixed;
  c.variants.sink_logits = {-3.5f, -std::numeric_limits<float>::infinity()};
  const fast_tier_result f = fast_tier(c, oracle_options{});
  ASSERT_TRUE(f.accepted) << f.reason;
  const oracle_result m = reference(c, mpfr50_options(oracle_options{}));
  for (double o : f.r.o) EXPECT_EQ(o, 0.0);
  EXPECT_EQ(f.r.lse[f.r.lse_index(0, 0, 0)], -3.5);
  EXPECT_EQ(f.r.lse[f.r.lse_index(0, 1, 0)], -inf);
  EXPECT_TRUE(same_bits(f.r.lse, m.lse) && same_bits(f.r.lse_bound, m.lse_bound) && same_bits(f.r.o_bound, m.o_bound));
  EXPECT_GT(f.r.lse_bound[f.r.lse_index(0, 0, 0)], 0.0);
  for (double e : f.lse_error) EXPECT_EQ(e, 0.0);
}

// mpfr50 states no accuracy for contract 1.1 cases (docs/oracle.md,
// "Accuracy"), so auto_tier's fast result claims none either: NaN, while the
// same case without its variant gets the fast tier's own error.
TEST(fast_tier, variant_cases_claim_no_accuracy_as_mpfr50) {
  attn_case c = oracle_testing::shaped_case({.lq = 2, .lk = 4, .d = 2, .dv = 2});
  c.seed = 7;
  materialize(c);
  oracle_options opt;
  opt.precision = oracle_precision::auto_tier;
  opt.want_accuracy = true;
  const oracle_result plain = reference(c, opt);
  ASSERT_EQ(plain.tier, oracle_tier::fast_binary64);
  for (double a : plain.o_accuracy) EXPECT_TRUE(std::isfinite(a));
  c.variants.softcap = 5.0f;
  const oracle_result capped = reference(c, opt);
  ASSERT_EQ(capped.tier, oracle_tier::fast_binary64) << "a softcapped case of ordinary values is judged in binary64";
  for (double a : capped.o_accuracy) EXPECT_TRUE(std::isnan(a));
  for (double a : capped.lse_accuracy) EXPECT_TRUE(std::isnan(a));
}

// The fast tier's values, each element with a nonzero own error moved to twice
// that error from the MPFR value m; the others (empty rows: exact) marked
// non-finite so the own-error check skips them.
fast_tier_result moved_by_twice_own_error(fast_tier_result f, const oracle_result& m) {
  for (std::size_t x = 0; x < f.r.o.size(); ++x) {
    if (std::isfinite(f.o_error[x]) && f.o_error[x] > 0)
      f.r.o[x] = m.o[x] + 2 * f.o_error[x];
    else
      f.o_error[x] = inf;
  }
  for (std::size_t x = 0; x < f.r.lse.size(); ++x) {
    if (std::isfinite(f.lse_error[x]) && f.lse_error[x] > 0)
      f.r.lse[x] = m.lse[x] - 2 * f.lse_error[x];
    else
      f.lse_error[x] = inf;
  }
  return f;
}

// Wrong on purpose in each variant's own arithmetic: tanh 2^-40 off (about
// 8000 ulps where 16 are declared) on every other key of softcapped cases,
// the sink's weight 2^-40 off, exp 2^-40 off in variant cases, and fast values
// moved to twice their own error from mpfr50's: each must be caught.
TEST(fast_tier, a_deliberately_wrong_fast_tier_is_caught_on_variants) {
  const std::uint64_t seed = base_seed();
  own_error_check wrong_tanh, wrong_sink, wrong_exp, moved;
  fast_tier_hooks bad_tanh, bad_sink, bad_exp;
  bad_tanh.tanh_relative_error = 0x1p-40;
  bad_sink.sink_relative_error = 0x1p-40;
  bad_exp.exp_relative_error = 0x1p-40;
  for (int t = 0; t < 400; ++t) {
    const std::uint64_t s = seed + 5'000'000 + static_cast<std::uint64_t>(t);
    const attn_case c = any_small_variant_case(s);
    const oracle_options opt = options_for(c, s);
    const oracle_result m = reference(c, mpfr50_options(opt));
    if (c.variants.has_softcap()) check_own_error(c, fast_tier(c, opt, bad_tanh), m, wrong_tanh);
    if (c.variants.has_sinks()) check_own_error(c, fast_tier(c, opt, bad_sink), m, wrong_sink);
    check_own_error(c, fast_tier(c, opt, bad_exp), m, wrong_exp);
    check_own_error(c, moved_by_twice_own_error(fast_tier(c, opt), m), m, moved);
  }
  std::printf("wrong tanh: %ld of %ld elements outside the own error (first: %s)\n", wrong_tanh.outside, wrong_tanh.elements,
              wrong_tanh.first.c_str());
  std::printf("wrong sink weight: %ld of %ld elements outside the own error (first: %s)\n", wrong_sink.outside,
              wrong_sink.elements, wrong_sink.first.c_str());
  std::printf("wrong exp: %ld of %ld elements outside the own error\n", wrong_exp.outside, wrong_exp.elements);
  std::printf("moved by 2x own error: %ld of %ld elements caught\n", moved.outside, moved.elements);
  EXPECT_GT(wrong_tanh.outside, 0);
  EXPECT_GT(wrong_sink.outside, 0);
  EXPECT_GT(wrong_exp.outside, 0);
  EXPECT_EQ(moved.outside, moved.elements);
  EXPECT_GT(moved.elements, 1000);
}

// The checks above can fail: a fast tier whose exp is 2^-40 off (about 8000
// ulps where 4 are declared) on every other key, and fast values moved by
// twice their own error, must both be caught.
TEST(fast_tier, a_deliberately_wrong_fast_tier_is_caught) {
  const std::uint64_t seed = base_seed();
  own_error_check wrong_exp, moved;
  fast_tier_hooks bad;
  bad.exp_relative_error = 0x1p-40;
  for (int t = 0; t < 300; ++t) {
    const std::uint64_t s = seed + static_cast<std::uint64_t>(t);
    const attn_case c = oracle_testing::any_small_case(s);
    const oracle_options opt = options_for(c, s);
    const oracle_result m = reference(c, mpfr50_options(opt));
    check_own_error(c, fast_tier(c, opt, bad), m, wrong_exp);
    // Each element with a nonzero own error moved to 2x that error from the
    // MPFR value; the others (empty rows: exact) marked non-finite so they are skipped.
    check_own_error(c, moved_by_twice_own_error(fast_tier(c, opt), m), m, moved);
  }
  std::printf("wrong exp: %ld of %ld elements outside the own error (first: %s)\n", wrong_exp.outside, wrong_exp.elements,
              wrong_exp.first.c_str());
  std::printf("moved by 2x own error: %ld of %ld elements caught\n", moved.outside, moved.elements);
  EXPECT_GT(wrong_exp.outside, 0);
  EXPECT_EQ(moved.outside, moved.elements);
  EXPECT_GT(moved.elements, 1000);
}

// The one libm assumption of the fast tier: glibc's double exp and log within
// fast_constants::exp_ulps of the correctly rounded result (MPFR), checked on
// this machine over the arguments the fast tier uses (exp of [-760, 0]
// including its subnormal range; log of [1, 2^40]).
TEST(fast_tier, libm_exp_and_log_within_the_declared_ulps) {
  using mp = oracle_detail::mpfr50;
  std::mt19937_64 rng(base_seed());
  std::uniform_real_distribution<double> exp_arg(-760, 0), log_exponent(0, 40);
  // Error in ulps of the correctly rounded value y (ulp of a subnormal: 2^-1074).
  const auto ulps = [](double got, const mp& exact) {
    const double y = static_cast<double>(exact);
    if (y == 0) return got == 0 ? 0.0 : inf;
    int ex = 0;
    std::frexp(y, &ex);
    const double ulp = std::ldexp(1.0, std::max(ex - 53, -1074));
    return static_cast<double>(abs(mp(got) - exact)) / ulp;
  };
  double worst_exp = 0, worst_log = 0;
  for (int t = 0; t < 20'000; ++t) {
    const double a = t < 200 ? -static_cast<double>(t) / 199 * 1e-6 : exp_arg(rng);  // also arguments near 0
    worst_exp = std::max(worst_exp, ulps(std::exp(a), exp(mp(a))));
    const double l = std::exp2(log_exponent(rng));
    worst_log = std::max(worst_log, ulps(std::log(l), log(mp(l))));
  }
  std::printf("glibc exp: worst %.3f ulps, log: worst %.3f ulps (declared %g)\n", worst_exp, worst_log,
              oracle_detail::fast_constants::exp_ulps);
  EXPECT_LE(worst_exp, oracle_detail::fast_constants::exp_ulps);
  EXPECT_LE(worst_log, oracle_detail::fast_constants::exp_ulps);
}

// The softcap's libm assumption: glibc's double tanh within
// fast_constants::tanh_ulps of the correctly rounded result (MPFR), over the
// arguments x / c the fast tier passes it: both signs, magnitudes from 2^-60
// (tanh(y) ~ y) through the transition near 1 to saturation past 20.
TEST(fast_tier, libm_tanh_within_the_declared_ulps) {
  using mp = oracle_detail::mpfr50;
  std::mt19937_64 rng(base_seed() + 1);
  std::uniform_real_distribution<double> near(-4, 4), wide(-40, 40), log_mag(-60, 6);
  double worst = 0, worst_at = 0;
  for (int t = 0; t < 30'000; ++t) {
    double a = t % 3 == 0 ? near(rng) : t % 3 == 1 ? wide(rng) : std::exp2(log_mag(rng));
    if (t % 2 == 1 && t % 3 == 2) a = -a;
    const mp exact = tanh(mp(a));
    const double y = static_cast<double>(exact);
    int ex = 0;
    std::frexp(y, &ex);
    const double ulp = std::ldexp(1.0, std::max(ex - 53, -1074));
    const double err = static_cast<double>(abs(mp(std::tanh(a)) - exact)) / ulp;
    if (err > worst) worst = err, worst_at = a;
  }
  std::printf("glibc tanh: worst %.3f ulps at %.17g (declared %g)\n", worst, worst_at, oracle_detail::fast_constants::tanh_ulps);
  EXPECT_LE(worst, oracle_detail::fast_constants::tanh_ulps);
}

}  // namespace
}  // namespace attncheck
