// reference(): runs the naive loops in the requested precision, rounds each
// result once to double, then computes the SPEC.md bound from those results.
#include <limits>
#include <string>

#include "attncheck/oracle.hpp"
#include "error_bound.hpp"
#include "oracle_backends.hpp"

namespace attncheck {

namespace {

template <class Real>
std::vector<double> rounded_to_double(const std::vector<Real>& x) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(x[i]);  // MPFR: mpfr_get_d, nearest
  return out;
}

template <class Real>
oracle_result run(const attn_case& c, const oracle_options& opt) {
  oracle_detail::naive_result<Real> n = oracle_detail::naive_attention<Real>(c);
  oracle_result r;
  r.b = c.b;
  r.hq = c.hq;
  r.lq = c.lq;
  r.lk = c.lk;
  r.dv = c.dv;
  r.o = rounded_to_double(n.o);
  r.lse = rounded_to_double(n.lse);
  r.p = rounded_to_double(n.p);
  oracle_detail::fill_bounds(c, opt, n.gap, n.log_sum, r);
  if (!opt.want_p) r.p = {};
  return r;
}

}  // namespace

oracle_result reference(const attn_case& c, const oracle_options& opt) {
  validate(c);  // the loops index Q, K, V through their views: shapes must hold
  switch (opt.precision) {
    case oracle_precision::mpfr50: return run<oracle_detail::mpfr50>(c, opt);
    case oracle_precision::mpfr100: return run<oracle_detail::mpfr100>(c, opt);
    case oracle_precision::cpp_bin100: return run<oracle_detail::cpp_bin100>(c, opt);
    case oracle_precision::binary64: return run<double>(c, opt);
  }
  throw input_error("precision", "unknown oracle precision");
}

std::string oracle_accuracy_statement() {
  const int bits = std::numeric_limits<oracle_detail::mpfr50>::digits;
  return "attncheck reference oracle: naive SPEC.md loops in Boost.Multiprecision mpfr_float_50 (" +
         std::to_string(bits) +
         "-bit MPFR, exp and log correctly rounded). For a row whose visible scores have "
         "T_j = |scale| sum_d |Q K| <= 2^60 and D, Dv, Lk <= 2^20, before the one rounding to double: "
         "each P has relative error <= 2^-80, each O absolute error <= 2^-80 * sum_j P_j |V_j| "
         "(cancellation is measured against that sum, not |O|), LSE absolute error <= "
         "2^-80 * (max_j T_j + log sum + 1). So P, and O and LSE when they do not cancel below "
         "2^-27 of those sums, are within 1 ulp of the exact real value (faithful rounding). "
         "Checked against mpfr_float_100 and cpp_bin_float_100 on >= 1000 seeded random cases "
         "(tests/reference/test_oracle_self_check.cpp). See docs/oracle.md.";
}

}  // namespace attncheck
