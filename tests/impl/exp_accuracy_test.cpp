// Measures the kernel's exp against double exp, in ulps of the f32 result,
// and checks the declared exp_ulps() covers it. The kernel only feeds exp
// values s - m <= 0 and -inf (masked), so the range is [-inf, 0].
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attnimpl/attention.hpp"
#include "attnimpl/exp.hpp"
#include "pattern_sweep.hpp"

namespace {

double ulp_error(float x, float y) {
  const double exact = std::exp(static_cast<double>(x));
  return std::fabs(static_cast<double>(y) - exact) / attnimpl_test::f32_ulp(exact);
}

/// Worst error over the f32 bit patterns [first, last] taken every `step`.
double worst_over(std::uint32_t first, std::uint32_t last, std::uint32_t step, float* where) {
  std::vector<float> y;
  double worst = 0;
  attnimpl_test::sweep_patterns(first, last, step, [&](const std::vector<float>& x) {
    y.resize(x.size());
    attnimpl::exp_kernel(x.data(), y.data(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double e = ulp_error(x[i], y[i]);
      if (e > worst) {
        worst = e;
        *where = x[i];
      }
    }
  });
  return worst;
}

constexpr std::uint32_t minus_zero = 0x80000000u;
constexpr std::uint32_t minus_104 = 0xc2d00000u;  // below it exp rounds to 0 in f32
constexpr std::uint32_t minus_80 = 0xc2a00000u;

TEST(exp_kernel, within_declared_ulps_on_a_dense_sample_of_the_used_range) {
  // Every 7th pattern of [-104, -0] (160M values would take minutes on the
  // shared machine; the full sweep measured 1.0103 ulps, see attention.cpp).
  float where = 0;
  const double worst = worst_over(minus_zero, minus_104, 7, &where);
  EXPECT_LE(worst, attnimpl::exp_ulps()) << "at x = " << where;
  EXPECT_GT(worst, 0.5) << "the sample should reach the polynomial's worst region";
}

TEST(exp_kernel, within_declared_ulps_on_every_input_with_subnormal_result) {
  float where = 0;
  const double worst = worst_over(minus_80, minus_104, 1, &where);
  EXPECT_LE(worst, attnimpl::exp_ulps()) << "at x = " << where;
}

TEST(exp_kernel, special_values) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf, -0.0f, 0.0f, -1e30f, -104.0f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> y(x.size());
  attnimpl::exp_kernel(x.data(), y.data(), x.size());
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_FALSE(std::signbit(y[0]));
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_TRUE(std::isnan(y[5]));
}

}  // namespace
