// oracle_cost: measures the oracle's cost per multiply-add in each real type
// against plain double, on one fixed case, in one run, then the whole oracle
// (values and bounds) in mpfr50 against auto_tier's fast tier on that case and
// on Lq = 64, Lk = 1024, D = 128. Not a test (timings are not pass/fail);
// docs/oracle.md quotes its output and command.
//
// Usage: oracle_cost [min_seconds_per_type]   (default 1.0, range > 0)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attncheck/oracle.hpp"
#include "oracle_backends.hpp"
#include "oracle_test_support.hpp"

namespace attncheck {
namespace {

// Seconds per multiply-add of reference() (values and bounds) at a precision,
// run repeatedly for at least min_seconds; the tier of the last run in *tier.
double reference_seconds_per_madd(const attn_case& c, oracle_precision p, double min_seconds, oracle_tier* tier) {
  const double madds = static_cast<double>(oracle_testing::madds(c));
  oracle_options opt;
  opt.precision = p;
  opt.out_type = c.type;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  long runs = 0;
  double elapsed = 0, sink = 0;
  do {
    const oracle_result r = reference(c, opt);
    sink += r.o[0] + r.o_bound[0];
    *tier = r.tier;
    ++runs;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < min_seconds);
  if (sink == 12345.678) std::puts("");
  return elapsed / (static_cast<double>(runs) * madds);
}

// Shapes of a small prefill: GQA, D = Dv = 64, causal off so every pair counts.
attn_case cost_case() {
  attn_case c = oracle_testing::shaped_case({.b = 1, .hq = 4, .hkv = 2, .lq = 16, .lk = 64, .d = 64, .dv = 64});
  c.values = value_kind::normal;
  c.seed = 1;
  materialize(c);
  return c;
}

// Runs naive_attention<Real> repeatedly for at least min_seconds; returns
// seconds per multiply-add (B Hq Lq Lk (D + Dv) per run; exp, log and the
// divisions are amortized into that count).
template <class Real>
double seconds_per_madd(const attn_case& c, double min_seconds) {
  const double madds = static_cast<double>(oracle_testing::madds(c));
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  long runs = 0;
  double elapsed = 0;
  double sink = 0;  // keeps the work observable
  do {
    const oracle_detail::naive_result<Real> r = oracle_detail::naive_attention<Real>(c);
    sink += static_cast<double>(r.o[0]);
    ++runs;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < min_seconds);
  if (sink == 12345.678) std::puts("");
  return elapsed / (static_cast<double>(runs) * madds);
}

// Seconds per exp call in Real over arguments in [-20, 0] (the shifted
// softmax's range), where the backends differ most.
template <class Real>
double seconds_per_exp(double min_seconds) {
  using std::exp;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  long calls = 0;
  double elapsed = 0;
  Real sink = 0;
  do {
    for (int k = 0; k < 256; ++k) sink += exp(Real(-20.0 * k / 256.0 - 1e-3 * static_cast<double>(calls % 7)));
    calls += 256;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < min_seconds);
  if (static_cast<double>(sink) == 12345.678) std::puts("");
  return elapsed / static_cast<double>(calls);
}

// The floor: a bare double multiply-add loop over contiguous arrays, with no
// decoding, masking or exp; seconds per multiply-add.
double bare_double_seconds_per_madd(double min_seconds) {
  std::vector<double> a(4096), b(4096);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = 1.0 + 1e-9 * static_cast<double>(i);
    b[i] = 1.0 - 1e-9 * static_cast<double>(i);
  }
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  long runs = 0;
  double elapsed = 0, acc = 0;
  do {
    for (std::size_t i = 0; i < a.size(); ++i) acc += a[i] * b[i];
    a[runs % a.size()] = acc * 1e-300;  // a loop-carried use: the work cannot be hoisted
    ++runs;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < min_seconds);
  if (acc == 12345.678) std::puts("");
  return elapsed / (static_cast<double>(runs) * static_cast<double>(a.size()));
}

}  // namespace
}  // namespace attncheck

int main(int argc, char** argv) {
  using namespace attncheck;
  namespace mp = boost::multiprecision;
  const double min_seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  if (!(min_seconds > 0)) {
    std::fprintf(stderr, "oracle_cost: min_seconds_per_type must be > 0\n");
    return 2;
  }
  const attn_case c = cost_case();
  std::printf("case %s: %lld multiply-adds per run\n", to_line(c).c_str(),
              static_cast<long long>(c.b * c.hq * c.lq * c.lk * (c.d + c.dv)));
  const double base = seconds_per_madd<double>(c, min_seconds);
  const auto row = [&](const char* name, int bits, double s) {
    std::printf("%-20s %4d bits  %9.2f ns/madd  %8.1fx double\n", name, bits, s * 1e9, s / base);
  };
  row("double (bare loop)", 53, bare_double_seconds_per_madd(min_seconds));
  row("double", 53, base);
  const double mpfr50_loops = seconds_per_madd<oracle_detail::mpfr50>(c, min_seconds);  // the default
  row("static_mpfr_float_50", std::numeric_limits<oracle_detail::mpfr50>::digits, mpfr50_loops);
  row("mpfr_float_50", std::numeric_limits<mp::mpfr_float_50>::digits, seconds_per_madd<mp::mpfr_float_50>(c, min_seconds));
  row("cpp_bin_float_50", std::numeric_limits<mp::cpp_bin_float_50>::digits,
      seconds_per_madd<mp::cpp_bin_float_50>(c, min_seconds));
  row("mpfr_float_100", std::numeric_limits<oracle_detail::mpfr100>::digits,
      seconds_per_madd<oracle_detail::mpfr100>(c, min_seconds));
  row("cpp_bin_float_100", std::numeric_limits<oracle_detail::cpp_bin100>::digits,
      seconds_per_madd<oracle_detail::cpp_bin100>(c, min_seconds));
  // The whole oracle, values and bounds: mpfr50 against auto_tier (the fast tier when it accepts).
  std::printf("reference() with bounds:\n");
  const auto tiers = [&](const attn_case& cc, double secs) {
    oracle_tier t_mpfr{}, t_auto{};
    const double mpfr = reference_seconds_per_madd(cc, oracle_precision::mpfr50, secs, &t_mpfr);
    const double fast = reference_seconds_per_madd(cc, oracle_precision::auto_tier, secs, &t_auto);
    std::printf("  %s: %lld multiply-adds\n", to_line(cc).c_str(),
                static_cast<long long>(cc.b * cc.hq * cc.lq * cc.lk * (cc.d + cc.dv)));
    std::printf("  %-18s %-15s %9.2f ns/madd\n", "mpfr50", name(t_mpfr).data(), mpfr * 1e9);
    std::printf(
        "  %-18s %-15s %9.2f ns/madd  %8.1fx faster than mpfr50 with bounds, %.1fx than the static_mpfr_float_50 loops alone\n",
        "auto_tier", name(t_auto).data(), fast * 1e9, mpfr / fast, mpfr50_loops / fast);
  };
  tiers(c, min_seconds);
  // The example: Lq = 64, Lk = 1024, D = 128 (one run of mpfr50 takes seconds).
  attn_case big = oracle_testing::shaped_case({.b = 1, .hq = 1, .hkv = 1, .lq = 64, .lk = 1024, .d = 128, .dv = 128});
  big.seed = 1;
  materialize(big);
  tiers(big, min_seconds);
  std::printf("exp alone (arguments in [-20, 0]):\n");
  const auto exp_row = [&](const char* name, double s) { std::printf("%-20s %9.2f ns/exp\n", name, s * 1e9); };
  exp_row("double", seconds_per_exp<double>(min_seconds));
  exp_row("static_mpfr_float_50", seconds_per_exp<oracle_detail::mpfr50>(min_seconds));
  exp_row("cpp_bin_float_50", seconds_per_exp<mp::cpp_bin_float_50>(min_seconds));
  return 0;
}
