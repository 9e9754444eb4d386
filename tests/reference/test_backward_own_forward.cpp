// The backward bound for a subject handed its own forward pass's O and LSE
// (docs/bound.md "Backward", "Handed its own forward"): E_O is the forward
// bound's o_bound and e_L its lse_bound (reference_backward with
// backward_handed_errors). The subject is f32 end to end: its forward is the
// oracle's loops in float (naive_attention<float>: a subject of the forward
// bound's class, u = 2^-24, expf and logf < 1 ulp, one block), O rounded once
// to the storage type; its backward recomputes P = expf(S_hat - LSE_in) from
// that LSE and runs the oracle's backward loops in float (naive_backward<float>:
// D = rowsum(dO O_in), one block each way), each gradient rounded once to the
// storage type. On thousands of random cases (every storage type, value kind,
// layout, mask and dO kind) every judged element lies within the extended
// bound; a forward LSE off by more than its bound falls outside it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attncheck/backward_oracle.hpp"
#include "attncheck/oracle.hpp"
#include "backward_test_support.hpp"
#include "naive_attention.hpp"
#include "naive_backward.hpp"
#include "oracle_test_support.hpp"

// Cases: a CMake cache variable (-DATTNCHECK_BACKWARD_OWN_FORWARD_CASES=N) sets it for a longer run.
#ifndef ATTNCHECK_BACKWARD_OWN_FORWARD_CASES
#define ATTNCHECK_BACKWARD_OWN_FORWARD_CASES 2000
#endif

namespace attncheck {
namespace {

std::size_t z(std::int64_t x) { return static_cast<std::size_t>(x); }
double stored(dtype t, double x) { return decode(t, encode(t, x)); }

/// The subject's forward: O (B, Lq, Hq, Dv) in the storage type, LSE (B, Hq, Lq) in f32.
struct forward_out {
  std::vector<double> o;
  std::vector<float> lse;
};

forward_out f32_forward(const attn_case& c) {
  const auto f = oracle_detail::naive_attention<float>(c);
  forward_out out;
  out.o.resize(f.o.size());
  for (std::size_t x = 0; x < f.o.size(); ++x) out.o[x] = stored(c.type, f.o[x]);
  out.lse = f.lse;
  return out;
}

/// The subject's backward, handed O (storage type) and LSE (f32): P = expf(S_hat - LSE_in) at visible pairs,
/// then naive_backward in float; dQ, dK, dV rounded once to the storage type.
oracle_detail::naive_grads<double> f32_backward(const attn_case& c, const tensor& d_o, const forward_out& in) {
  oracle_detail::naive_result<float> h;
  h.o.resize(in.o.size());
  for (std::size_t x = 0; x < in.o.size(); ++x) h.o[x] = static_cast<float>(in.o[x]);
  h.p.assign(z(c.b * c.hq * c.lq * c.lk), 0.f);
  const float scale = c.effective_scale();
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t hh = 0; hh < c.hq; ++hh)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::size_t row = z((bi * c.hq + hh) * c.lq + i);
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(bi, hh, i, j)) continue;
          h.p[row * z(c.lk) + z(j)] = std::exp(scale * oracle_testing::f32_dot(c, bi, hh, i, j) - in.lse[row]);
        }
      }
  const auto g = oracle_detail::naive_backward<float>(c, d_o, h);
  oracle_detail::naive_grads<double> out;
  for (const float x : g.dq) out.dq.push_back(stored(c.type, x));
  for (const float x : g.dk) out.dk.push_back(stored(c.type, x));
  for (const float x : g.dv) out.dv.push_back(stored(c.type, x));
  return out;
}

/// The forward bound for the subject's forward: u = 2^-24, glibc expf and logf < 1 ulp, one block.
oracle_options forward_options(const attn_case& c) {
  oracle_options opt;
  opt.out_type = c.type;
  opt.bound.u_compute = 0x1p-24;
  opt.bound.exp_ulps = 1;
  opt.bound.key_blocks = 1;
  return opt;
}

/// The backward declaration: u = 2^-24, expf < 1 ulp, one key block into dQ, one query block into dK and dV.
backward_bound_params backward_params() {
  backward_bound_params bp;
  bp.u_compute = 0x1p-24;
  bp.exp_ulps = 1;
  return bp;
}

struct tally {
  long cases = 0, judged = 0, outside = 0, unjudged = 0, cases_outside = 0;
  long forward_outside = 0;       // forward elements outside their own bound (the premise)
  long outside_oracle_bound = 0;  // the same gradients outside the bound for the oracle's O and LSE
  double worst_ratio = 0;
  std::string worst;
};

/// Every element of `got` against `exact` within `bound` where the bound is finite.
void judge(const attn_case& c, const char* what, const std::vector<double>& got, const std::vector<double>& exact,
           const std::vector<double>& bound, const std::vector<double>* oracle_bound, tally& t, bool& any_outside) {
  for (std::size_t x = 0; x < got.size(); ++x) {
    if (!std::isfinite(bound[x])) {
      ++t.unjudged;
      continue;
    }
    ++t.judged;
    const double err = std::fabs(got[x] - exact[x]);
    if (!(err <= bound[x])) {
      ++t.outside;
      any_outside = true;
    }
    if (oracle_bound && std::isfinite((*oracle_bound)[x]) && !(err <= (*oracle_bound)[x])) ++t.outside_oracle_bound;
    if (bound[x] > 0 && err / bound[x] > t.worst_ratio) {
      t.worst_ratio = err / bound[x];
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s[%zu] got %.9g exact %.9g bound %.3g of ", what, x, got[x], exact[x], bound[x]);
      t.worst = buf + to_line(c);
    }
  }
}

/// test_backward_bound's long cases (oracle_testing::any_long_shape).
attn_case any_long_case(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x6c6f6e67ull);
  return oracle_testing::any_long_shape(rng);
}

/// Runs `cases` cases of make(seed + n), each with a random value kind, scale
/// and dO. lse_shift: added to the subject's forward LSE (times 1 + |LSE|)
/// before backward is handed it, the bound still told the correct forward's
/// errors (0: the correct subject).
tally run_cases(int cases, double lse_shift, attn_case (*make)(std::uint64_t) = oracle_testing::any_small_case) {
  const std::uint64_t seed = oracle_testing::base_seed();
  std::printf("ATTNCHECK_SEED=%llu\n", static_cast<unsigned long long>(seed));
  tally t;
  for (int n = 0; n < cases; ++n) {
    const std::uint64_t s = seed + static_cast<std::uint64_t>(n);
    attn_case c = make(s);
    std::mt19937_64 rng(s ^ 0x6f776e66ull);
    const auto below = [&](std::int64_t k) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(k)); };
    const oracle_testing::grad_draw g = oracle_testing::with_random_values_and_grad(c, below);
    ++t.cases;

    forward_out fw = f32_forward(c);
    const oracle_result rf = reference(c, forward_options(c));
    for (std::size_t x = 0; x < fw.o.size(); ++x)
      if (std::isfinite(rf.o_bound[x]) && !(std::fabs(fw.o[x] - rf.o[x]) <= rf.o_bound[x])) ++t.forward_outside;
    for (std::size_t x = 0; x < fw.lse.size(); ++x) {
      if (rf.lse[x] == -std::numeric_limits<double>::infinity() || !std::isfinite(rf.lse_bound[x])) continue;
      if (!(std::fabs(fw.lse[x] - rf.lse[x]) <= rf.lse_bound[x])) ++t.forward_outside;
      if (lse_shift != 0) fw.lse[x] = static_cast<float>(fw.lse[x] + lse_shift * (1 + std::fabs(rf.lse[x])));
    }

    const backward_result rb = reference_backward(c, g.d_o, backward_params(), backward_handed_errors{rf.o_bound, rf.lse_bound});
    const backward_result ro = reference_backward(c, g.d_o, backward_params());
    const auto got = f32_backward(c, g.d_o, fw);
    bool any_outside = false;
    judge(c, "dQ", got.dq, rb.dq, rb.dq_bound, &ro.dq_bound, t, any_outside);
    judge(c, "dK", got.dk, rb.dk, rb.dk_bound, &ro.dk_bound, t, any_outside);
    judge(c, "dV", got.dv, rb.dv, rb.dv_bound, &ro.dv_bound, t, any_outside);
    if (any_outside) ++t.cases_outside;
  }
  std::printf(
      "%ld cases (LSE shifted by %g (1 + |LSE|)): judged elements %ld, outside the bound %ld (in %ld cases), unjudged %ld;\n"
      "forward elements outside their own bound %ld; judged elements outside the bound for the oracle's O and LSE %ld;\n"
      "max observed/bound %.3g at %s\n",
      t.cases, lse_shift, t.judged, t.outside, t.cases_outside, t.unjudged, t.forward_outside, t.outside_oracle_bound,
      t.worst_ratio, t.worst.c_str());
  return t;
}

TEST(backward_own_forward, f32_subject_on_its_own_forward_stays_within) {
  const tally t = run_cases(ATTNCHECK_BACKWARD_OWN_FORWARD_CASES, 0);
  EXPECT_EQ(t.forward_outside, 0) << "the forward subject left its own bound: the premise of the extension fails";
  EXPECT_EQ(t.outside, 0);
  EXPECT_GT(t.judged, 20 * t.cases);  // most of every case is judged
}

TEST(backward_own_forward, long_rows_stay_within) {
  const tally t = run_cases(ATTNCHECK_BACKWARD_OWN_FORWARD_CASES / 10, 0, any_long_case);
  EXPECT_EQ(t.forward_outside, 0) << "the forward subject left its own bound: the premise of the extension fails";
  EXPECT_EQ(t.outside, 0);
  EXPECT_GT(t.judged, 100 * t.cases);
}

// The extension is no blanket: handed an LSE 2^-10 (1 + |LSE|) off (every
// weight ~0.1% off), far beyond the forward's lse_bound the bound was told,
// the gradients fall outside it.
TEST(backward_own_forward, a_forward_lse_beyond_its_bound_falls_outside) {
  const int cases = ATTNCHECK_BACKWARD_OWN_FORWARD_CASES / 4;
  const tally t = run_cases(cases, 0x1p-10);
  EXPECT_GT(t.cases_outside, t.cases / 4);
}

TEST(backward_own_forward, refuses_errors_of_the_wrong_size) {
  attn_case c = oracle_testing::any_small_case(oracle_testing::base_seed());
  const tensor d_o = draw_grad_output(c, grad_kind::normal);
  const oracle_result rf = reference(c, forward_options(c));
  std::vector<double> short_o(rf.o_bound.begin(), rf.o_bound.end() - 1);
  EXPECT_THROW(reference_backward(c, d_o, backward_params(), backward_handed_errors{short_o, rf.lse_bound}), input_error);
  EXPECT_THROW(reference_backward(c, d_o, backward_params(), backward_handed_errors{rf.o_bound, {}}), input_error);
}

// Handed exactly the errors the oracle's own O and LSE carry once rounded to
// storage and f32 (u_out |O| + eta_out / 2, u_lse |LSE| + eta_lse / 2, the
// LSE multiply's u |LSE| counted by both), the extended bound is the default
// one up to that multiply's second-order term: both paths compute one formula.
TEST(backward_own_forward, errors_of_the_oracles_rounding_give_the_default_bound) {
  const std::uint64_t seed = oracle_testing::base_seed();
  long compared = 0;
  for (int n = 0; n < 200; ++n) {
    attn_case c = oracle_testing::any_small_case(seed + static_cast<std::uint64_t>(n));
    const tensor d_o = draw_grad_output(c, grad_kind::normal);
    const backward_result ro = reference_backward(c, d_o, backward_params());
    backward_handed_errors e;
    for (const double o : ro.o) e.o.push_back(unit_roundoff(c.type) * std::fabs(o) + smallest_subnormal(c.type) / 2);
    for (const double l : ro.lse)
      e.lse.push_back(std::isfinite(l) ? 0x1p-24 * std::fabs(l) + smallest_subnormal(dtype::f32) / 2 : 0.0);
    const backward_result rb = reference_backward(c, d_o, backward_params(), e);
    const auto same = [&](const std::vector<double>& a, const std::vector<double>& b) {
      for (std::size_t x = 0; x < a.size(); ++x) {
        if (std::isnan(a[x])) {
          EXPECT_TRUE(std::isnan(b[x])) << to_line(c);
          continue;
        }
        if (!std::isfinite(a[x]) || a[x] == 0) {
          EXPECT_EQ(a[x], b[x]) << to_line(c);
          continue;
        }
        EXPECT_NEAR(b[x] / a[x], 1.0, 1e-6) << to_line(c) << " element " << x;
        ++compared;
      }
    };
    same(ro.dq_bound, rb.dq_bound);
    same(ro.dk_bound, rb.dk_bound);
    same(ro.dv_bound, rb.dv_bound);
  }
  EXPECT_GT(compared, 1000);
}

}  // namespace
}  // namespace attncheck
