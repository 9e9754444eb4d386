// reference(): runs the naive loops in the requested precision, rounds each
// result once to double, then computes the docs/spec.md bound from those results.
#include <algorithm>
#include <cmath>
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

constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();

// Bound on the one rounding of a real y to the double x (nearest): half an ulp,
// at most 2^-53 |y| <= 2^-53 (1 + 2^-52) |x| for a normal x, 2^-1075 (taken as 2^-1074) for a subnormal one.
double rounding_error(double x) { return std::isfinite(x) ? 0x1p-53 * (1 + 0x1p-52) * std::fabs(x) + 0x1p-1074 : nan_value; }

// o_accuracy and lse_accuracy of a multiprecision result in Real
// (docs/oracle.md, "Accuracy"): per row, with T the largest visible
// |scale| sum_d |Q K| and eps = 2^(1 - digits) (4 (D+2) (T+1) + 2 Lk + 8), each
// value before its rounding is within eps times its scale of the exact one
// (O: sum_j P_j |V_je|; LSE: T + ln Lk + 1); then the rounding to double.
// T and the O scale are evaluated here in double from the stored inputs and
// the returned P, and raised past their own rounding (widen, the P term).
template <class Real>
void fill_accuracy(const attn_case& c, oracle_result& r) {
  const double unit = std::ldexp(1.0, 1 - std::numeric_limits<Real>::digits);
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  const double scale = std::fabs(static_cast<double>(c.effective_scale()));
  const double dd = static_cast<double>(c.d), lk = static_cast<double>(c.lk);
  const double widen = 1 + (dd + lk + 8) * 0x1p-52;
  r.o_accuracy.assign(r.o.size(), 0.0);
  r.lse_accuracy.assign(r.lse.size(), 0.0);
  std::vector<double> scale_e(n(c.dv));
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::size_t row = r.lse_index(bi, h, i);
        const std::int64_t g = c.kv_head(h);
        double t = 0, v_max = 0;
        std::int64_t visible = 0;
        bool finite = true;
        std::fill(scale_e.begin(), scale_e.end(), 0.0);
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(bi, h, i, j)) continue;
          ++visible;
          double tj = 0;
          for (std::int64_t d = 0; d < c.d; ++d) tj += std::fabs(c.q_value(bi, i, h, d) * c.k_value(bi, j, g, d));
          t = std::max(t, scale * tj);
          finite = finite && std::isfinite(tj);
          const double pj = r.p[r.p_index(bi, h, i, j)];
          for (std::int64_t e = 0; e < c.dv; ++e) {
            const double v = std::fabs(c.v_value(bi, j, g, e));
            finite = finite && std::isfinite(v);
            v_max = std::max(v_max, v);
            scale_e[n(e)] += pj * v;
          }
        }
        if (visible == 0) continue;  // O = +0 and LSE = -inf exactly
        if (!finite || !std::isfinite(t)) {
          r.lse_accuracy[row] = nan_value;
          for (std::int64_t e = 0; e < c.dv; ++e) r.o_accuracy[r.o_index(bi, i, h, e)] = nan_value;
          continue;
        }
        t *= widen;
        const double eps = unit * (4 * (dd + 2) * (t + 1) + 2 * lk + 8);
        // Each returned P_j is within (eps + 2^-53) P_j + 2^-1075 of the exact one.
        const double p_slack = (1 + eps) * widen;
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const std::size_t k = r.o_index(bi, i, h, e);
          const double sum_pv = scale_e[n(e)] * p_slack + lk * 0x1p-1074 * v_max;
          r.o_accuracy[k] = eps * sum_pv + rounding_error(r.o[k]);
        }
        r.lse_accuracy[row] = eps * (t + std::log(lk) + 1) * widen + rounding_error(r.lse[row]);
      }
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
  if (opt.want_accuracy && !std::is_same_v<Real, double>) {
    if (!c.variants.any()) {
      fill_accuracy<Real>(c, r);
    } else {  // the statement is derived for contract 1.0 only (docs/oracle.md): not claimed
      r.o_accuracy.assign(r.o.size(), nan_value);
      r.lse_accuracy.assign(r.lse.size(), nan_value);
    }
  }
  if (!opt.want_p) r.p = {};
  r.tier = std::is_same_v<Real, double> ? oracle_tier::binary64 : oracle_tier::multiprecision;
  return r;
}

// The case as a subject that flushes its inputs reads it (bound_params::flush_inputs).
attn_case with_inputs_flushed(const attn_case& c) {
  attn_case f = c;
  for (tensor* t : {&f.q, &f.k, &f.v, &f.variants.bias})
    for (std::uint32_t& bits : t->bits) {
      const double x = decode(t->type, bits);
      if (x != 0 && std::fabs(x) < 0x1p-126) bits = encode(t->type, std::copysign(0.0, x));
    }
  return f;
}

}  // namespace

oracle_result reference(const attn_case& c, const oracle_options& opt) {
  validate(c);  // the loops index Q, K, V through their views: shapes must hold
  if (opt.bound.flush_inputs) {
    oracle_options o = opt;
    o.bound.flush_inputs = false;
    return reference(with_inputs_flushed(c), o);
  }
  switch (opt.precision) {
    case oracle_precision::mpfr50: return run<oracle_detail::mpfr50>(c, opt);
    case oracle_precision::mpfr100: return run<oracle_detail::mpfr100>(c, opt);
    case oracle_precision::cpp_bin100: return run<oracle_detail::cpp_bin100>(c, opt);
    case oracle_precision::binary64: return run<double>(c, opt);
    case oracle_precision::auto_tier: {
      if (!opt.want_p) {  // P has no bound of its own: it must be the MPFR oracle's
        oracle_detail::fast_tier_result f = oracle_detail::fast_tier(c, opt);
        if (f.accepted) {
          if (opt.want_accuracy && !c.variants.any()) {
            f.r.o_accuracy = std::move(f.o_error), f.r.lse_accuracy = std::move(f.lse_error);
          } else if (opt.want_accuracy) {  // as mpfr50: the stated accuracy is derived for contract 1.0 only
            f.r.o_accuracy.assign(f.r.o.size(), nan_value);
            f.r.lse_accuracy.assign(f.r.lse.size(), nan_value);
          }
          return std::move(f.r);
        }
      }
      return run<oracle_detail::mpfr50>(c, opt);
    }
  }
  throw input_error("precision", "unknown oracle precision");
}

std::optional<oracle_result> fast_oracle(const attn_case& c, const oracle_options& opt) {
  validate(c);
  oracle_options o = opt;
  o.want_p = false;
  if (o.bound.flush_inputs) {
    o.bound.flush_inputs = false;
    return fast_oracle(with_inputs_flushed(c), o);
  }
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

std::string_view name(oracle_precision p) {
  static constexpr name_table<oracle_precision, 5> names{{{oracle_precision::mpfr50, "mpfr50"},
                                                          {oracle_precision::mpfr100, "mpfr100"},
                                                          {oracle_precision::cpp_bin100, "cpp_bin100"},
                                                          {oracle_precision::binary64, "binary64"},
                                                          {oracle_precision::auto_tier, "auto"}}};
  return name_in(names, p);
}

namespace {
constexpr const char* mpfr_rounding = "+, *, /, exp and log correctly rounded";

template <class Real>
std::string multiprecision_statement(const std::string& type, const std::string& rounding) {
  // Derived in docs/oracle.md ("Accuracy"); test_oracle_self_check and
  // oracle_accuracy (tests/reference/test_oracle_accuracy.cpp) check it.
  const int bits = std::numeric_limits<Real>::digits;
  return "computed by docs/spec.md's loops in " + type + " (" + std::to_string(bits) + "-bit significand; " + rounding +
         "). Per row, with T the largest visible "
         "|scale| sum_d |Q K| and eps = 2^-" +
         std::to_string(bits - 1) +
         " (4 (D+2) (T+1) + 2 Lk + 8), each value before its one rounding to double is within eps times its "
         "scale of the exact real value (O: sum_j P_j |V_j,e|, so cancellation is measured against that sum; "
         "LSE: T + ln Lk + 1; P: P_j); the rounding adds at most 2^-53 |value|. o_accuracy and lse_accuracy "
         "give that sum per element, absolute and relative; not claimed for rows with a non-finite visible input.";
}
}  // namespace

std::string oracle_accuracy_statement(oracle_precision precision, oracle_tier tier) {
  switch (tier) {
    case oracle_tier::binary64:
      return "computed by docs/spec.md's loops in plain binary64: no accuracy is claimed (its errors are of "
             "the size it would judge); never the oracle.";
    case oracle_tier::fast_binary64:
      return "computed by the fast binary64 tier (docs/oracle.md, \"Tiers\"): per element, |returned - exact| "
             "<= E_own, the tier's own a-priori error (glibc exp and log declared at 4 ulps, checked by "
             "test_fast_tier), given as o_accuracy and lse_accuracy, absolute and relative. The tier is used only "
             "where E_own <= 2^-21 of the subject bound on every element of the case; otherwise mpfr50 computes "
             "the whole case.";
    case oracle_tier::multiprecision: break;
  }
  switch (precision) {
    case oracle_precision::mpfr100: return multiprecision_statement<oracle_detail::mpfr100>("MPFR mpfr_float_100", mpfr_rounding);
    case oracle_precision::cpp_bin100:
      return multiprecision_statement<oracle_detail::cpp_bin100>(
          "Boost cpp_bin_float_100",
          "+, *, / correctly rounded; Boost's own exp and log, held to this statement "
          "against MPFR by test_oracle_self_check");
    default: return multiprecision_statement<oracle_detail::mpfr50>("MPFR static_mpfr_float_50", mpfr_rounding);
  }
}

}  // namespace attncheck
