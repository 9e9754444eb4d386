// reference(): runs the naive loops in the requested precision, rounds each
// result once to double, then computes the docs/spec.md bound from those results.
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "attncheck/enum_names.hpp"
#include "attncheck/oracle.hpp"
#include "error_bound.hpp"
#include "fast_tier.hpp"
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
  oracle_detail::fill_bounds(c, opt, n.gap, n.log_sum, r, n.sink_p, n.sink_above);
  if (!opt.want_p) r.p = {};
  r.tier = std::is_same_v<Real, double> ? oracle_tier::binary64 : oracle_tier::multiprecision;
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
    case oracle_precision::auto_tier: {
      if (!opt.want_p && !c.variants.any()) {  // the fast tier covers contract 1.0 cases only
        oracle_detail::fast_tier_result f = oracle_detail::fast_tier(c, opt);
        if (f.accepted) return std::move(f.r);
      }
      return run<oracle_detail::mpfr50>(c, opt);
    }
  }
  throw input_error("precision", "unknown oracle precision");
}

std::optional<oracle_result> fast_oracle(const attn_case& c, const oracle_options& opt) {
  validate(c);
  if (c.variants.any()) return std::nullopt;  // the fast tier covers contract 1.0 cases only
  oracle_options o = opt;
  o.want_p = false;
  oracle_detail::fast_tier_result f = oracle_detail::fast_tier(c, o);
  if (!f.accepted) return std::nullopt;
  return std::move(f.r);
}

std::string_view name(oracle_tier t) {
  static constexpr name_table<oracle_tier, 3> names{{{oracle_tier::multiprecision, "multiprecision"},
                                                     {oracle_tier::binary64, "binary64"},
                                                     {oracle_tier::fast_binary64, "fast_binary64"}}};
  return name_in(names, t);
}

std::string oracle_accuracy_statement() {
  // Derived in docs/oracle.md ("Accuracy"); test_oracle_self_check checks it.
  const int bits = std::numeric_limits<oracle_detail::mpfr50>::digits;
  return "attncheck reference oracle: docs/spec.md's loops in Boost.Multiprecision static_mpfr_float_50 (" +
         std::to_string(bits) + "-bit MPFR; exp and log correctly rounded). Per row, with T the largest " +
         "visible |scale| sum_d |Q K| and eps = 2^-" + std::to_string(bits - 1) +
         " * (4 (D+2) (T+1) + 2 Lk + 8), every value before its one rounding to double is within eps " +
         "times its scale of the exact real value: P_j for P; sum_j P_j |V_j,e| for O (cancellation is " +
         "measured against that sum, not |O|); T + ln Lk + 1 for LSE. Where that is below 2^-54 |value| " +
         "(for P whenever (D+2)(T+1) <= 2^" + std::to_string(bits - 58) +
         "), the double returned is within 1 ulp of the exact value. Checked against mpfr_float_100 " +
         "and cpp_bin_float_100 on 1,000 seeded cases (test_oracle_self_check); see docs/oracle.md.";
}

}  // namespace attncheck
