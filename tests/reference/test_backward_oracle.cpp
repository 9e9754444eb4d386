// The backward oracle checks itself: its dQ, dK and dV (mpfr50, before the one
// rounding to double) agree with central finite differences of the forward
// oracle's L = sum dO O, computed at 334 bits, within the backward oracle's
// stated accuracy plus the finite difference's own proven error, on seeded
// random small cases (docs/oracle.md, "Backward"). Planted gradient bugs fail
// the same comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <utility>

#include "attncheck/backward_oracle.hpp"
#include "naive_backward.hpp"
#include "backward_test_support.hpp"
#include "oracle_test_support.hpp"

// Cases of the finite-difference self-check: a CMake cache variable
// (-DATTNCHECK_BACKWARD_FD_CASES=N) sets it for a longer run.
#ifndef ATTNCHECK_BACKWARD_FD_CASES
#define ATTNCHECK_BACKWARD_FD_CASES 1000
#endif

namespace attncheck {
namespace {

using oracle_detail::backward_formula;
using oracle_detail::mpfr50;
using oracle_detail::naive_attention;
using oracle_detail::naive_backward;
using oracle_detail::naive_grads;
using oracle_detail::naive_result;
using oracle_detail::stored_inputs;

/// The finite differences' type: MPFR at 100 digits (334 bits), stack storage.
using fd_real =
    boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<100, boost::multiprecision::allocate_stack>>;
const fd_real u_fd = fd_real(0x1p-333);    // 2 u of fd_real: absorbs second-order terms
const mpfr50 u_oracle = mpfr50(0x1p-167);  // 2 u of mpfr50, as docs/oracle.md "Accuracy"

std::size_t z(std::int64_t x) { return static_cast<std::size_t>(x); }

/// A small random case with its dO: oracle_testing::any_small_case's shapes
/// (B, Hkv in [1, 2], G in [1, 3], Lq in [1, 4], Lk in [1, 5], so Lq != Lk under
/// causal most of the time; D and Dv in [1, 4]), causal, padding (0 keys
/// included) and broadcast masks (all-false rows included), dtype, layout and
/// poison; then any of the value kinds, a scale of either sign in one case of
/// four, and a grad kind, and the case drawn again.
struct fd_case {
  attn_case c;
  grad_kind grad = grad_kind::normal;
  tensor d_o;
};

fd_case any_fd_case(std::uint64_t seed) {
  fd_case f;
  f.c = oracle_testing::any_small_case(seed);
  std::mt19937_64 rng(~seed);
  const oracle_testing::uniform_below below{rng};
  oracle_testing::grad_draw g = oracle_testing::with_random_values_and_grad(f.c, below);
  f.grad = g.grad;
  f.d_o = std::move(g.d_o);
  return f;
}

/// any_fd_case's shapes and values with every contract 1.1 variant drawn on
/// its own coin (oracle_testing::draw_variants: windows, chunks, softcaps c in
/// [0.25, 8.25], every sink, ALiBi and bias kind), at least one of them on.
fd_case any_fd_variant_case(std::uint64_t seed) {
  fd_case f;
  f.c = oracle_testing::any_small_case(seed);
  std::mt19937_64 rng(seed ^ 0x76617269616e74ull);
  const oracle_testing::uniform_below below{rng};
  oracle_testing::draw_some_variants(f.c, below, 8.0);
  oracle_testing::grad_draw g = oracle_testing::with_random_values_and_grad(f.c, below);
  f.grad = g.grad;
  f.d_o = std::move(g.d_o);
  return f;
}

enum class input : std::uint8_t { q, k, v, sink };

/// The case's stored inputs with one element moved by delta, in fd_real.
struct perturbed_inputs {
  stored_inputs base;
  input which;
  std::array<std::int64_t, 4> at;
  fd_real delta;

  fd_real moved(input t, std::int64_t a0, std::int64_t a1, std::int64_t a2, std::int64_t a3, double x) const {
    fd_real r(x);
    if (t == which && at == std::array<std::int64_t, 4>{a0, a1, a2, a3}) r += delta;
    return r;
  }
  fd_real q(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t d) const {
    return moved(input::q, b, i, h, d, base.q(b, i, h, d));
  }
  fd_real k(std::int64_t b, std::int64_t j, std::int64_t g, std::int64_t d) const {
    return moved(input::k, b, j, g, d, base.k(b, j, g, d));
  }
  fd_real v(std::int64_t b, std::int64_t j, std::int64_t g, std::int64_t e) const {
    return moved(input::v, b, j, g, e, base.v(b, j, g, e));
  }
  fd_real sink(std::int64_t h) const { return moved(input::sink, h, 0, 0, 0, base.sink(h)); }
};

/// A query row (b, h, i).
struct row_id {
  std::int64_t b, h, i;
};

/// What the comparison needs of the unperturbed case, from the mpfr50 forward.
struct case_terms {
  double t_max = 0;        // largest visible |scale| sum_d |Q_d K_jd|
  double t_var = 0;        // largest visible T_j + |alibi| + |bias|: t_max without variants
  mpfr50 eps_backward;     // the backward oracle's stated relative accuracy
  std::vector<mpfr50> mp;  // Mp_rj = sum_e |dO_re| |V_je| (row, key), 0 where not visible
  std::vector<mpfr50> ms;  // MS_rj = P_rj (Mp_rj + MD_r)
};

double dbl(const mpfr50& x) { return static_cast<double>(x); }

case_terms terms_of(const attn_case& c, const tensor& d_o, const naive_result<mpfr50>& fwd) {
  case_terms t;
  const double s = std::fabs(static_cast<double>(c.effective_scale()));
  t.mp.assign(z(c.b * c.hq * c.lq * c.lk), mpfr50(0));
  t.ms = t.mp;
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::size_t row = z((bi * c.hq + h) * c.lq + i);
        const std::int64_t g = c.kv_head(h);
        mpfr50 md = 0;  // MD_r = sum_e |dO_e| sum_j P_j |V_je|
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(bi, h, i, j)) continue;
          double tj = 0;
          for (std::int64_t d = 0; d < c.d; ++d) tj += std::fabs(c.q.at(bi, i, h, d) * c.k.at(bi, j, g, d));
          t.t_max = std::max(t.t_max, s * tj);
          // With ALiBi and bias the scores reach |softcap(x)| + |alibi| + |bias| <= T_j + both.
          t.t_var = std::max(t.t_var, s * tj + std::fabs(c.alibi_at(bi, h, i, j)) + std::fabs(c.bias_at(bi, h, i, j)));
          mpfr50 mp = 0;
          for (std::int64_t e = 0; e < c.dv; ++e) {
            const mpfr50 dov = abs(mpfr50(d_o.at(bi, i, h, e)) * mpfr50(c.v.at(bi, j, g, e)));
            mp += dov;
            md += fwd.p[row * z(c.lk) + z(j)] * dov;
          }
          t.mp[row * z(c.lk) + z(j)] = mp;
        }
        for (std::int64_t j = 0; j < c.lk; ++j) {
          const std::size_t x = row * z(c.lk) + z(j);
          if (c.visible(bi, h, i, j)) t.ms[x] = fwd.p[x] * (t.mp[x] + md);
        }
      }
  // docs/oracle.md "Backward": eps_b = 2 eps_fwd + 2u (2 Dv + Lk + G Lq + 6),
  // eps_fwd = 2u (4 (D + 2)(T + 1) + 2 Lk + 8), u = 2^-168.
  const double dd = static_cast<double>(c.d), lk = static_cast<double>(c.lk);
  const mpfr50 eps_fwd = u_oracle * (4 * (dd + 2) * (t.t_var + 1) + 2 * lk + 8);
  t.eps_backward = 2 * eps_fwd + u_oracle * static_cast<double>(2 * c.dv + c.lk + c.group() * c.lq + 6);
  // A softcap c: g = 1 - tanh^2(x / c) off by |t_hat - t| (2 + ...) with t off by
  // x's error over c ((D + 2) T u) and tanh's few u (docs/oracle.md "Backward").
  if (c.variants.has_softcap())
    t.eps_backward += u_oracle * (2 * (dd + 2) * t.t_max / static_cast<double>(c.variants.softcap) + 4);
  // d(sink) sums up to B Lq rows more.
  if (c.variants.has_sinks()) t.eps_backward += u_oracle * static_cast<double>(c.b * c.lq);
  return t;
}

/// L over the given rows, sum_e dO_re O_re, and its proven error bound: each
/// O_re within eps_fwd' sum_j P_j |V_je| (docs/oracle.md "Accuracy" at
/// fd_real's u, with T doubled to cover the perturbation) and the sum's own
/// roundings, gamma_(terms + 1) sum |dO| |O|; times 2 for second-order terms.
struct loss {
  fd_real value, error;
};

loss loss_over(const attn_case& c, const tensor& d_o, const perturbed_inputs& in, const std::vector<row_id>& rows, double t_max) {
  const naive_result<fd_real> r = naive_attention<fd_real>(c, in);
  const double dd = static_cast<double>(c.d), lk = static_cast<double>(c.lk);
  const fd_real eps = u_fd * (4 * (dd + 2) * (2 * t_max + 1) + 2 * lk + 8);
  const fd_real gamma = u_fd * static_cast<double>(static_cast<std::int64_t>(rows.size()) * c.dv + 2);
  loss l{0, 0};
  fd_real md = 0;
  for (const row_id& w : rows) {
    const std::size_t row = z((w.b * c.hq + w.h) * c.lq + w.i);
    for (std::int64_t e = 0; e < c.dv; ++e) {
      const fd_real d_out(d_o.at(w.b, w.i, w.h, e));
      l.value += d_out * r.o[z(((w.b * c.lq + w.i) * c.hq + w.h) * c.dv + e)];
      fd_real mo = 0;
      for (std::int64_t j = 0; j < c.lk; ++j)
        if (c.visible(w.b, w.h, w.i, j)) mo += r.p[row * z(c.lk) + z(j)] * abs(in.v(w.b, j, c.kv_head(w.h), e));
      md += abs(d_out) * mo;
    }
  }
  l.error = 2 * (eps + gamma) * md;
  return l;
}

/// One input element's derivative by central differences, and its proven error.
struct difference {
  fd_real value, error;
  bool exact_steps = true;  // x + h and x - h were exact in fd_real
};

/// The step for Q and K: a power of two, h = 2^-100 / R (R the largest rate at
/// which a score moves with the element), so the truncation error, h^2 times
/// the third derivative, is ~2^-200 of the gradient's scale while x +- h stays
/// exact in fd_real's 334 bits.
fd_real step_for(double rate) {
  int e = 0;
  if (rate > 0) std::frexp(rate, &e);  // rate < 2^e
  return fd_real(std::ldexp(1.0, -100 - e));
}

/// The step for V: L is linear in V (no truncation error at any h), so h is as
/// large as exactness allows, 2^180 times the column's largest |V|: the
/// rounding error of L, divided by h, is then ~2^-334 of the derivative.
fd_real linear_step_for(double column) {
  int e = 0;
  if (column > 0) std::frexp(column, &e);
  return fd_real(std::ldexp(1.0, 180 + e));
}

difference central_difference(const attn_case& c, const tensor& d_o, input which, std::array<std::int64_t, 4> at, fd_real h,
                              double x, const std::vector<row_id>& rows, double truncation, double t_max) {
  difference d;
  const fd_real xs(x);
  d.exact_steps = (xs + h) - xs == h && xs - (xs - h) == h;
  const perturbed_inputs up{stored_inputs{c}, which, at, h}, down{stored_inputs{c}, which, at, -h};
  const loss lu = loss_over(c, d_o, up, rows, t_max), ld = loss_over(c, d_o, down, rows, t_max);
  d.value = (lu.value - ld.value) / (2 * h);
  // (lu - ld) rounds once, the division by 2h is exact.
  d.error = (lu.error + ld.error) / (2 * h) + u_fd * abs(d.value) + fd_real(truncation);
  return d;
}

/// Results of comparing every gradient element with its finite difference.
struct fd_stats {
  std::int64_t elements = 0;                      // used elements compared
  std::int64_t zero_elements = 0;                 // unused elements, required exactly 0
  std::array<std::int64_t, 6> failed_elements{};  // per formula
  std::array<std::int64_t, 6> failed_cases{};     // per formula
  double worst_ratio = 0;                         // exact formula: max |g - fd| / tolerance
  std::int64_t at_stated_accuracy = 0;            // elements whose fd error is at most the oracle's stated error
  std::int64_t beyond_double = 0;                 // elements whose whole tolerance is at most 2^-64 of their magnitude
  std::int64_t exact_zero = 0;                    // elements of magnitude 0: the stated accuracy demands exactly 0
  std::int64_t cases = 0, fully_masked_rows = 0, unseen_keys = 0, gqa_cases = 0, causal_lq_ne_lk = 0;
  std::int64_t sink_elements = 0, softcap_cases = 0;  // variant cases: d(sink) entries judged, cases with a softcap
  std::array<std::int64_t, 3> grad_kinds{};
};

constexpr std::array<backward_formula, 6> formulas{backward_formula::exact,
                                                   backward_formula::ds_without_p,
                                                   backward_formula::d_from_do_squared,
                                                   backward_formula::dq_without_scale,
                                                   backward_formula::softcap_without_derivative,
                                                   backward_formula::sink_grad_positive};
constexpr std::array<const char*, 6> formula_names{"exact",
                                                   "dS without the P factor",
                                                   "D = rowsum(dO dO)",
                                                   "dQ without the scale",
                                                   "softcap without 1 - t^2",
                                                   "d(sink) with its sign flipped"};

template <backward_formula F>
naive_grads<mpfr50> grads(const attn_case& c, const tensor& d_o, const naive_result<mpfr50>& fwd) {
  return naive_backward<mpfr50, F>(c, d_o, fwd);
}

void check_case(const fd_case& f, fd_stats& st) {
  const attn_case& c = f.c;
  const tensor& d_o = f.d_o;
  const naive_result<mpfr50> fwd = naive_attention<mpfr50>(c);
  const std::array<naive_grads<mpfr50>, 6> g{grads<formulas[0]>(c, d_o, fwd), grads<formulas[1]>(c, d_o, fwd),
                                             grads<formulas[2]>(c, d_o, fwd), grads<formulas[3]>(c, d_o, fwd),
                                             grads<formulas[4]>(c, d_o, fwd), grads<formulas[5]>(c, d_o, fwd)};
  const case_terms t = terms_of(c, d_o, fwd);
  const slot_usage used = used_slots(c);
  const mpfr50 s_abs = abs(mpfr50(static_cast<double>(c.effective_scale())));
  std::array<bool, 6> case_failed{};

  // Judges element `at` of gradient `which` for every formula: exactly 0 where
  // its slot is unused, else against the finite difference that `measure`
  // returns with the element's magnitude.
  const auto judge = [&](input which, std::array<std::int64_t, 4> at, bool slot_used, const auto& measure) {
    static constexpr std::array<const char*, 4> grad_names{"dQ", "dK", "dV", "dSink"};
    static constexpr std::array<const char*, 4> axes{"b=%lld,i=%lld,h=%lld,d=%lld", "b=%lld,j=%lld,g=%lld,d=%lld",
                                                     "b=%lld,j=%lld,g=%lld,e=%lld", "h=%lld%.0lld%.0lld%.0lld"};
    const auto w = static_cast<std::size_t>(which);
    char index_text[160];
    std::snprintf(index_text, sizeof index_text, axes[w], static_cast<long long>(at[0]), static_cast<long long>(at[1]),
                  static_cast<long long>(at[2]), static_cast<long long>(at[3]));
    const std::string where = std::string(grad_names[w]) + "[" + index_text + "]";
    const dims4 shape = which == input::q      ? dims4{c.b, c.lq, c.hq, c.d}
                        : which == input::k    ? dims4{c.b, c.lk, c.hkv, c.d}
                        : which == input::sink ? dims4{c.hq, 1, 1, 1}
                                               : dims4{c.b, c.lk, c.hkv, c.dv};
    const std::size_t x = backward_result::index(shape, at[0], at[1], at[2], at[3]);
    const auto pick = [&](const naive_grads<mpfr50>& gr) -> const mpfr50& {
      return which == input::q ? gr.dq[x] : which == input::k ? gr.dk[x] : which == input::v ? gr.dv[x] : gr.d_sinks[x];
    };
    if (!slot_used) {
      ++st.zero_elements;
      EXPECT_EQ(pick(g[0]), 0) << where << " of an unused slot is not 0: " << to_line(c);
      return;
    }
    const auto [fd, magnitude] = measure();
    ++st.elements;
    EXPECT_TRUE(fd.exact_steps) << where << ": x +- h not exact in fd_real " << to_line(c);
    const fd_real oracle_error = fd_real(t.eps_backward * magnitude) * (1 + fd_real(0x1p-100));
    const fd_real tolerance = oracle_error + fd.error;
    if (fd.error <= oracle_error) ++st.at_stated_accuracy;
    if (tolerance <= fd_real(magnitude) * fd_real(0x1p-64)) ++st.beyond_double;
    if (magnitude == 0) {  // every term of the element is 0: so must the oracle's value be
      ++st.exact_zero;
      EXPECT_EQ(pick(g[0]), 0) << where << " has magnitude 0 but the oracle gives " << pick(g[0]) << " in " << to_line(c);
    }
    for (std::size_t m = 0; m < formulas.size(); ++m) {
      const fd_real miss = abs(fd_real(pick(g[m])) - fd.value);
      const bool ok = miss <= tolerance;
      if (m == 0) {
        if (tolerance > 0) st.worst_ratio = std::max(st.worst_ratio, static_cast<double>(miss / tolerance));
        EXPECT_TRUE(ok) << where << ": oracle " << pick(g[0]) << " finite difference " << fd.value << " miss " << miss
                        << " tolerance " << tolerance << " (oracle's " << oracle_error << ") in " << to_line(c)
                        << " grad=" << name(f.grad);
      }
      if (!ok) {
        ++st.failed_elements[m];
        case_failed[m] = true;
      }
    }
  };

  // Rows of (b, group g) that see key j.
  const auto rows_seeing = [&](std::int64_t bi, std::int64_t j, std::int64_t g) {
    std::vector<row_id> rows;
    for (std::int64_t h = 0; h < c.hq; ++h)
      if (c.kv_head(h) == g)
        for (std::int64_t i = 0; i < c.lq; ++i)
          if (c.visible(bi, h, i, j)) rows.push_back({bi, h, i});
    return rows;
  };
  const auto row_index = [&](const row_id& w) { return z((w.b * c.hq + w.h) * c.lq + w.i); };
  const auto max_mp = [&](const row_id& w) {
    double m = 0;
    for (std::int64_t j = 0; j < c.lk; ++j) m = std::max(m, dbl(t.mp[row_index(w) * z(c.lk) + z(j)]));
    return m;
  };
  const double scale = static_cast<double>(c.effective_scale());
  // A softcap c bends each score: |s'| <= r, |s''| <= r^2 / c, |s'''| <= 2 r^3 / c^2 for a
  // rate r of x, so L''' gains the chain rule's terms: (1 + 1/c)^3 covers them.
  const double soft = c.variants.has_softcap() ? std::pow(1 + 1 / static_cast<double>(c.variants.softcap), 3) : 1.0;

  // dQ[b, i, h, d]: only row (b, h, i) moves; its scores move at rates scale K_jd.
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h) {
        const row_id w{bi, h, i};
        const bool row_used = used.query_row(c, bi, i, h);
        if (!row_used) ++st.fully_masked_rows;
        for (std::int64_t d = 0; d < c.d; ++d)
          judge(input::q, {bi, i, h, d}, row_used, [&] {
            double rate = 0;
            mpfr50 magnitude = 0;  // |scale| sum_j MS_j |K_jd|
            for (std::int64_t j = 0; j < c.lk; ++j) {
              if (!c.visible(bi, h, i, j)) continue;
              const double kjd = c.k.at(bi, j, c.kv_head(h), d);
              rate = std::max(rate, std::fabs(scale * kjd));
              magnitude += t.ms[row_index(w) * z(c.lk) + z(j)] * std::fabs(kjd);
            }
            const fd_real h_step = step_for(rate);
            // |L'''| <= 4 A R^3, A <= 2 max_j Mp_j, R <= 2 rate: (h^2 / 6) 64 max Mp rate^3, times 2.
            const double trunc = 2 * static_cast<double>(h_step * h_step) / 6 * 64 * max_mp(w) * rate * rate * rate * soft;
            return std::pair{
                central_difference(c, d_o, input::q, {bi, i, h, d}, h_step, c.q.at(bi, i, h, d), {w}, trunc, t.t_var),
                mpfr50(magnitude * s_abs)};
          });
      }

  // dK[b, j, g, d] and dV[b, j, g, e]: every row of the group that sees key j moves.
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g) {
        const bool key_used = used.key(c, bi, j, g);
        if (!key_used) ++st.unseen_keys;
        const std::vector<row_id> rows = rows_seeing(bi, j, g);
        for (std::int64_t d = 0; d < c.d; ++d)
          judge(input::k, {bi, j, g, d}, key_used, [&] {
            double rate = 0, cubes = 0;
            mpfr50 magnitude = 0;  // |scale| sum_rows MS_rj |Q_rd|
            for (const row_id& w : rows) {
              const double qd = c.q.at(w.b, w.i, w.h, d);
              const double r = std::fabs(scale * qd);
              rate = std::max(rate, r);
              cubes += max_mp(w) * r * r * r;
              magnitude += t.ms[row_index(w) * z(c.lk) + z(j)] * std::fabs(qd);
            }
            const fd_real h_step = step_for(rate);
            // Per row |L_r'''| <= 4 A R^3 with A <= 2 max Mp, R <= rate_r: (h^2 / 6) 8 sum_r max Mp_r rate_r^3, times 2.
            const double trunc = 2 * static_cast<double>(h_step * h_step) / 6 * 8 * cubes * soft;
            return std::pair{
                central_difference(c, d_o, input::k, {bi, j, g, d}, h_step, c.k.at(bi, j, g, d), rows, trunc, t.t_var),
                mpfr50(magnitude * s_abs)};
          });
        for (std::int64_t e = 0; e < c.dv; ++e)
          judge(input::v, {bi, j, g, e}, key_used, [&] {
            mpfr50 magnitude = 0;  // sum_rows P_rj |dO_re|
            for (const row_id& w : rows) magnitude += fwd.p[row_index(w) * z(c.lk) + z(j)] * std::fabs(d_o.at(w.b, w.i, w.h, e));
            double column = 0;  // largest |V| of the column: L is linear in V, no truncation
            for (std::int64_t jj = 0; jj < c.lk; ++jj) column = std::max(column, std::fabs(c.v.at(bi, jj, g, e)));
            return std::pair{central_difference(c, d_o, input::v, {bi, j, g, e}, linear_step_for(column), c.v.at(bi, j, g, e),
                                                rows, 0.0, t.t_var),
                             magnitude};
          });
      }

  // d(sink)_h: every row of head h that sees a key moves; its scores do not
  // (rate 1 on the sink's own logit alone).
  if (c.variants.has_sinks())
    for (std::int64_t h = 0; h < c.hq; ++h) {
      std::vector<row_id> rows;
      for (std::int64_t bi = 0; bi < c.b; ++bi)
        for (std::int64_t i = 0; i < c.lq; ++i)
          if (used.query_row(c, bi, i, h)) rows.push_back({bi, h, i});
      const bool used_sink = c.sink_of(h) > -std::numeric_limits<double>::infinity() && !rows.empty();
      if (used_sink) ++st.sink_elements;
      judge(input::sink, {h, 0, 0, 0}, used_sink, [&] {
        mpfr50 magnitude = 0;  // sum_rows P_sink,r MD_r: MD_r = sum_e |dO_e| sum_j P_j |V_je| >= |D_r|
        double cubes = 0;
        for (const row_id& w : rows) {
          const std::size_t row = row_index(w);
          mpfr50 md = 0;
          for (std::int64_t j = 0; j < c.lk; ++j)
            if (c.visible(w.b, w.h, w.i, j))
              for (std::int64_t e = 0; e < c.dv; ++e)
                md +=
                    fwd.p[row * z(c.lk) + z(j)] * abs(mpfr50(d_o.at(w.b, w.i, w.h, e)) * mpfr50(c.v.at(w.b, j, c.kv_head(h), e)));
          magnitude += exp(mpfr50(c.sink_of(h)) - fwd.lse[row]) * md;
          cubes += max_mp(w);
        }
        const fd_real h_step = step_for(1.0);
        // The sink tilts each row's softmax along the sink alone (range 1): as for K, 64 sum_r max Mp_r h^2 / 6, times 2.
        const double trunc = 2 * static_cast<double>(h_step * h_step) / 6 * 64 * cubes;
        return std::pair{central_difference(c, d_o, input::sink, {h, 0, 0, 0}, h_step, c.sink_of(h), rows, trunc, t.t_var),
                         magnitude};
      });
    }

  ++st.cases;
  if (c.variants.has_softcap()) ++st.softcap_cases;
  if (c.group() > 1) ++st.gqa_cases;
  if (c.causal && c.lq != c.lk) ++st.causal_lq_ne_lk;
  ++st.grad_kinds[static_cast<std::size_t>(f.grad)];
  for (std::size_t m = 0; m < formulas.size(); ++m) st.failed_cases[m] += case_failed[m] ? 1 : 0;
}

/// Runs the self-check on `cases` cases make(seed + n), prints its figures and
/// expects every planted bug of the first `bugs` formulas caught.
void run_self_check(int cases, fd_case (*make)(std::uint64_t), std::size_t bugs) {
  const std::uint64_t seed = oracle_testing::base_seed();
  std::printf("ATTNCHECK_SEED=%llu (cases seed .. seed+%d)\n", static_cast<unsigned long long>(seed), cases - 1);
  fd_stats st;
  for (int n = 0; n < cases; ++n) {
    check_case(make(seed + static_cast<std::uint64_t>(n)), st);
    if (st.failed_cases[0] > 0) {
      std::printf("first failing case: seed %llu\n", static_cast<unsigned long long>(seed + static_cast<std::uint64_t>(n)));
      return;
    }
  }
  std::printf("%lld cases: %lld gradient elements against finite differences, %lld unused slots exactly 0\n",
              static_cast<long long>(st.cases), static_cast<long long>(st.elements), static_cast<long long>(st.zero_elements));
  std::printf(
      "coverage: %lld GQA cases, %lld causal with Lq != Lk, %lld rows seeing no key, %lld keys no row sees, grad kinds %lld/%lld/%lld\n",
      static_cast<long long>(st.gqa_cases), static_cast<long long>(st.causal_lq_ne_lk),
      static_cast<long long>(st.fully_masked_rows), static_cast<long long>(st.unseen_keys),
      static_cast<long long>(st.grad_kinds[0]), static_cast<long long>(st.grad_kinds[1]),
      static_cast<long long>(st.grad_kinds[2]));
  if (bugs > 4)
    std::printf("variants: %lld cases with a softcap, %lld d(sink) entries judged\n", static_cast<long long>(st.softcap_cases),
                static_cast<long long>(st.sink_elements));
  std::printf(
      "exact formulas: worst |oracle - fd| / tolerance = %.3g; fd error within the oracle's stated error on %lld elements, "
      "tolerance within 2^-64 of the magnitude on %lld, magnitude 0 (oracle exactly 0) on %lld\n",
      st.worst_ratio, static_cast<long long>(st.at_stated_accuracy), static_cast<long long>(st.beyond_double),
      static_cast<long long>(st.exact_zero));
  for (std::size_t m = 1; m < bugs; ++m) {
    std::printf("planted bug %-30s caught in %lld of %lld cases (%lld elements)\n", formula_names[m],
                static_cast<long long>(st.failed_cases[m]), static_cast<long long>(st.cases),
                static_cast<long long>(st.failed_elements[m]));
    EXPECT_GT(st.failed_cases[m], 0) << formula_names[m] << " passed the self-check: the check is toothless";
  }
  EXPECT_EQ(st.failed_cases[0], 0);
}

TEST(backward_oracle_self_check, gradients_match_finite_differences_and_planted_bugs_do_not) {
  run_self_check(ATTNCHECK_BACKWARD_FD_CASES, any_fd_case, 4);
}

// Every contract 1.1 variant (window, chunk, softcap, sinks, ALiBi, bias),
// d(sink) included, and the two variant bugs caught.
TEST(backward_oracle_self_check, variant_gradients_match_finite_differences_and_planted_bugs_do_not) {
  run_self_check(ATTNCHECK_BACKWARD_FD_CASES / 2, any_fd_variant_case, formulas.size());
}

TEST(backward_oracle, grad_output_is_drawn_from_the_seed_alone) {
  for (std::uint64_t n = 0; n < 60; ++n) {
    const fd_case f = any_fd_case(oracle_testing::base_seed() + n);
    const tensor again = draw_grad_output(f.c, f.grad);
    EXPECT_EQ(again.bits, f.d_o.bits) << to_line(f.c);
    EXPECT_EQ(f.d_o.shape, output_shape(f.c));
    EXPECT_EQ(f.d_o.type, f.c.type);
    attn_case other = f.c;
    other.seed ^= 1;
    EXPECT_NE(draw_grad_output(other, grad_kind::normal).bits, draw_grad_output(f.c, grad_kind::normal).bits) << to_line(f.c);
    const tensor dyadic = draw_grad_output(f.c, grad_kind::dyadic);
    for (std::int64_t bi = 0; bi < f.c.b; ++bi)
      for (std::int64_t i = 0; i < f.c.lq; ++i)
        for (std::int64_t h = 0; h < f.c.hq; ++h)
          for (std::int64_t e = 0; e < f.c.dv; ++e) {
            const double x = dyadic.at(bi, i, h, e);
            EXPECT_TRUE(std::fabs(x) <= 2 && x * 4 == std::floor(x * 4)) << x;
          }
  }
  for (grad_kind k : {grad_kind::dyadic, grad_kind::normal, grad_kind::adversarial}) EXPECT_EQ(parse_grad_kind(name(k)), k);
  EXPECT_FALSE(parse_grad_kind("uniform").has_value());
}

TEST(backward_oracle, returns_the_mpfr_gradients_rounded_once_and_never_reads_unseen_slots) {
  for (std::uint64_t n = 0; n < 100; ++n) {
    const fd_case f = any_fd_case(oracle_testing::base_seed() + n);
    const attn_case& c = f.c;
    const backward_result r = reference_backward(c, f.d_o);
    const naive_grads<mpfr50> g = naive_backward<mpfr50>(c, f.d_o, naive_attention<mpfr50>(c));
    ASSERT_EQ(r.dq.size(), g.dq.size());
    ASSERT_EQ(r.dk.size(), g.dk.size());
    ASSERT_EQ(r.dv.size(), g.dv.size());
    for (std::size_t x = 0; x < g.dq.size(); ++x) EXPECT_EQ(r.dq[x], static_cast<double>(g.dq[x]));
    for (std::size_t x = 0; x < g.dk.size(); ++x) EXPECT_EQ(r.dk[x], static_cast<double>(g.dk[x]));
    for (std::size_t x = 0; x < g.dv.size(); ++x) EXPECT_EQ(r.dv[x], static_cast<double>(g.dv[x]));
    EXPECT_EQ(r.dq_shape, (dims4{c.b, c.lq, c.hq, c.d}));
    EXPECT_EQ(r.dk[backward_result::index(r.dk_shape, c.b - 1, c.lk - 1, c.hkv - 1, c.d - 1)], r.dk.back());
    // NaN in dO rows that see no key, and in every unused Q, K and V slot: the same bits.
    const slot_usage used = used_slots(c);
    attn_case poisoned = c;
    tensor d_o = f.d_o;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::int64_t bi = 0; bi < c.b; ++bi) {
      for (std::int64_t i = 0; i < c.lq; ++i)
        for (std::int64_t h = 0; h < c.hq; ++h) {
          if (used.query_row(c, bi, i, h)) continue;
          for (std::int64_t e = 0; e < c.dv; ++e) d_o.set(bi, i, h, e, nan);
          for (std::int64_t d = 0; d < c.d; ++d) poisoned.q.set(bi, i, h, d, nan);
        }
      for (std::int64_t j = 0; j < c.lk; ++j)
        for (std::int64_t g2 = 0; g2 < c.hkv; ++g2) {
          if (used.key(c, bi, j, g2)) continue;
          for (std::int64_t d = 0; d < c.d; ++d) poisoned.k.set(bi, j, g2, d, nan);
          for (std::int64_t e = 0; e < c.dv; ++e) poisoned.v.set(bi, j, g2, e, nan);
        }
    }
    const backward_result p = reference_backward(poisoned, d_o);
    EXPECT_EQ(p.dq, r.dq) << to_line(c);
    EXPECT_EQ(p.dk, r.dk) << to_line(c);
    EXPECT_EQ(p.dv, r.dv) << to_line(c);
  }
}

TEST(backward_oracle, refuses_a_grad_output_that_is_not_the_cases) {
  const fd_case f = any_fd_case(oracle_testing::base_seed());
  attn_case wider = f.c;
  wider.dv += 1;
  EXPECT_THROW(reference_backward(f.c, draw_grad_output(wider, grad_kind::normal)), input_error);
  attn_case retyped = f.c;
  retyped.type = f.c.type == dtype::f32 ? dtype::f16 : dtype::f32;
  EXPECT_THROW(reference_backward(f.c, draw_grad_output(retyped, grad_kind::normal)), input_error);
  tensor cut = f.d_o;
  cut.offset = static_cast<std::int64_t>(cut.bits.size());
  EXPECT_THROW(reference_backward(f.c, cut), input_error);
}

}  // namespace
}  // namespace attncheck
