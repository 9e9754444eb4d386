// The oracle checks itself: its default precision (MPFR, 50 digits) against
// MPFR at 100 digits and against cpp_bin_float_100, a backend sharing no code
// with MPFR, on 1,000 seeded random cases, far beyond double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "oracle_backends.hpp"
#include "oracle_test_support.hpp"

namespace attncheck {
namespace {

using oracle_detail::cpp_bin100;
using oracle_detail::mpfr100;
using oracle_detail::mpfr50;
using oracle_detail::naive_attention;
using oracle_detail::naive_result;

// The issue asks for at least 1,000.
constexpr int self_check_cases = 1000;

// Unit roundoff of a Real: 2^(1 - digits).
template <class Real>
double unit_roundoff_of() {
  return std::ldexp(1.0, 1 - std::numeric_limits<Real>::digits);
}

// Per-row a-priori error of the oracle in Real (docs/oracle.md, "Accuracy"):
// eps_row = u * (4 (D + 2) (T_max + 1) + 2 Lk + 8), the relative error of
// every weight; O's error is eps_row * sum_j P_j |V_j|, LSE's eps_row * (T_max + log Lk + 1).
struct row_scale {
  double eps_factor;  // eps_row / u
  double lse_magnitude;
};

row_scale scale_of_row(const attn_case& c, std::int64_t bi, std::int64_t h, std::int64_t i) {
  const double s = std::fabs(static_cast<double>(c.effective_scale()));
  double t_max = 0;
  for (std::int64_t j = 0; j < c.lk; ++j) {
    if (!c.visible(bi, h, i, j)) continue;
    double t = 0;
    for (std::int64_t d = 0; d < c.d; ++d) t += std::fabs(c.q.at(bi, i, h, d) * c.k.at(bi, j, c.kv_head(h), d));
    t_max = std::max(t_max, s * t);
  }
  const double dd = static_cast<double>(c.d), lk = static_cast<double>(c.lk);
  return {4 * (dd + 2) * (t_max + 1) + 2 * lk + 8, t_max + std::log(lk) + 1};
}

// Checks a (the less precise, unit roundoff u_a) against b on every value.
template <class A, class B>
void expect_agree(const attn_case& c, const naive_result<A>& a, const naive_result<B>& b, double u_a, const char* names) {
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::size_t row = n((bi * c.hq + h) * c.lq + i);
        const row_scale rs = scale_of_row(c, bi, h, i);
        const mpfr100 eps = mpfr100(u_a) * rs.eps_factor;
        const mpfr100 lse_a(a.lse[row]), lse_b(b.lse[row]);
        if (isinf(lse_b)) {
          EXPECT_EQ(lse_a, lse_b) << names << " " << to_line(c);
        } else {
          EXPECT_LE(abs(lse_a - lse_b), eps * rs.lse_magnitude) << names << " LSE row " << row << " " << to_line(c);
        }
        mpfr100 p_sum = 0;
        for (std::int64_t j = 0; j < c.lk; ++j) {
          const std::size_t x = row * n(c.lk) + n(j);
          const mpfr100 pa(a.p[x]), pb(b.p[x]);
          EXPECT_LE(abs(pa - pb), eps * pb) << names << " P row " << row << " key " << j << " " << to_line(c);
          p_sum += pb;
        }
        for (std::int64_t e = 0; e < c.dv; ++e) {
          mpfr100 magnitude = 0;  // sum_j P_j |V_j|: cancellation in O is measured against it
          for (std::int64_t j = 0; j < c.lk; ++j)
            if (c.visible(bi, h, i, j))
              magnitude += mpfr100(b.p[row * n(c.lk) + n(j)]) * std::fabs(c.v.at(bi, j, c.kv_head(h), e));
          const std::size_t x = n(((bi * c.lq + i) * c.hq + h) * c.dv + e);
          EXPECT_LE(abs(mpfr100(a.o[x]) - mpfr100(b.o[x])), eps * magnitude) << names << " O[" << x << "] " << to_line(c);
        }
      }
}

TEST(oracle_self_check, precisions_and_backends_agree_far_beyond_double) {
  const std::uint64_t seed = oracle_testing::base_seed();
  std::printf("ATTNCHECK_SEED=%llu (cases seed .. seed+%d)\n", static_cast<unsigned long long>(seed), self_check_cases - 1);
  // The check is only as strong as its tolerance: both must lie far below 2^-53.
  ASSERT_LT(unit_roundoff_of<mpfr50>(), 0x1p-160);
  ASSERT_LT(unit_roundoff_of<cpp_bin100>(), 0x1p-320);
  for (int t = 0; t < self_check_cases; ++t) {
    const attn_case c = oracle_testing::any_small_case(seed + static_cast<std::uint64_t>(t));
    const naive_result<mpfr50> r50 = naive_attention<mpfr50>(c);
    const naive_result<mpfr100> r100 = naive_attention<mpfr100>(c);
    const naive_result<cpp_bin100> rbin = naive_attention<cpp_bin100>(c);
    expect_agree(c, r50, r100, unit_roundoff_of<mpfr50>(), "mpfr50 vs mpfr100");
    expect_agree(c, rbin, r100, unit_roundoff_of<cpp_bin100>(), "cpp_bin100 vs mpfr100");
    if (::testing::Test::HasFailure()) {
      std::printf("first failing case: seed %llu\n", static_cast<unsigned long long>(seed + t));
      return;
    }
  }
}

}  // namespace
}  // namespace attncheck
