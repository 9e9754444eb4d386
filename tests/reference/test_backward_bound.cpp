// The backward bound (docs/bound.md, "Backward") against an f32 subject of
// its class, written here: FlashAttention 2's backward (P recomputed from the
// handed-in LSE, D from the handed-in O or as sum_j P dP, key blocks outside,
// query blocks inside, dQ, dK, dV accumulated block by block in f32, outputs
// rounded once to the case's storage type). On thousands of small random cases
// the subject stays within the bound on every judged element; four planted
// bugs fall outside it. Beside it, what the two fudge-factor rules in use
// (PyTorch: 180x, FlashAttention: 2x the error of a same-precision reference;
// attncheck/backward_fudge.hpp, as `attncheck campaign --backward` applies
// them to real subjects) accept on the same cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/backward_fudge.hpp"
#include "attncheck/backward_oracle.hpp"
#include "attncheck/enum_names.hpp"
#include "attncheck/oracle.hpp"
#include "backward_test_support.hpp"
#include "oracle_test_support.hpp"

// Cases: a CMake cache variable (-DATTNCHECK_BACKWARD_BOUND_CASES=N) sets it for a longer run.
#ifndef ATTNCHECK_BACKWARD_BOUND_CASES
#define ATTNCHECK_BACKWARD_BOUND_CASES 3000
#endif

namespace attncheck {
namespace {

std::size_t z(std::int64_t x) { return static_cast<std::size_t>(x); }
using oracle_testing::grad_draw;
double stored(dtype t, double x) { return decode(t, encode(t, x)); }

/// The subject's planted bugs (the backward mutants a value check can see).
enum class mutant : std::uint8_t {
  none,
  dq_without_scale,
  d_from_do_squared,
  ds_without_p,
  dv_unnormalized,
  softcap_grad_ignored,  ///< dX = dS: the softcap's 1 - t^2 dropped
  sink_grad_positive,    ///< d(sink) = + sum P_sink D
};
const std::vector<mutant> mutants{mutant::dq_without_scale, mutant::d_from_do_squared, mutant::ds_without_p,
                                  mutant::dv_unnormalized};
const std::vector<mutant> variant_mutants{mutant::dq_without_scale, mutant::d_from_do_squared,    mutant::ds_without_p,
                                          mutant::dv_unnormalized,  mutant::softcap_grad_ignored, mutant::sink_grad_positive};
constexpr name_table<mutant, 7> mutant_names{{
    {mutant::none, "correct"},
    {mutant::dq_without_scale, "dq_without_scale"},
    {mutant::d_from_do_squared, "d_from_do_squared"},
    {mutant::ds_without_p, "ds_without_p"},
    {mutant::dv_unnormalized, "dv_unnormalized"},
    {mutant::softcap_grad_ignored, "softcap_grad_ignored"},
    {mutant::sink_grad_positive, "sink_grad_positive"},
}};
// Its name, for printf (each name a literal, so NUL-terminated).
const char* name(mutant m) { return name_in(mutant_names, m).data(); }

struct subject_config {
  std::int64_t bk = 1, bq = 1;  ///< key and query block sizes
  bool d_from_p = false;        ///< D = sum_j P dP instead of rowsum(dO O_in)
  mutant bug = mutant::none;
};

struct grads {
  std::vector<double> dq, dk, dv, d_sinks;
};

/// The f32 subject. o_in (B, Lq, Hq, Dv) and lse_in (B, Hq, Lq): what a forward
/// pass hands backward (the oracle's O in the storage type, its LSE in f32).
grads subject(const attn_case& c, const tensor& d_o, const std::vector<float>& o_in, const std::vector<float>& lse_in,
              const subject_config& cfg) {
  const float scale = c.effective_scale();
  grads out;
  out.dq.assign(z(c.b * c.lq * c.hq * c.d), 0.0);
  out.dk.assign(z(c.b * c.lk * c.hkv * c.d), 0.0);
  out.dv.assign(z(c.b * c.lk * c.hkv * c.dv), 0.0);
  const auto q = [&](std::int64_t bi, std::int64_t i, std::int64_t h, std::int64_t d) {
    return static_cast<float>(c.q.at(bi, i, h, d));
  };
  const auto k = [&](std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t d) {
    return static_cast<float>(c.k.at(bi, j, g, d));
  };
  const auto v = [&](std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t e) {
    return static_cast<float>(c.v.at(bi, j, g, e));
  };
  const auto dov = [&](std::int64_t bi, std::int64_t i, std::int64_t h, std::int64_t e) {
    return static_cast<float>(d_o.at(bi, i, h, e));
  };
  // The scaled score x, and the score s = softcap(x) + alibi + bias (each term in f32).
  const score_variants& w = c.variants;
  const float cap = w.softcap;
  const auto scaled = [&](std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) {
    return oracle_testing::f32_dot(c, bi, h, i, j) * scale;
  };
  const auto score = [&](std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) {
    float s = scaled(bi, h, i, j);
    if (w.has_softcap()) s = cap * std::tanh(s / cap);
    if (w.has_alibi() || w.has_bias())
      s = s + static_cast<float>(c.alibi_at(bi, h, i, j)) + static_cast<float>(c.bias_at(bi, h, i, j));
    return s;
  };
  // d softcap / dx = 1 - tanh^2(x / c), from the kernel's own tanh.
  const auto softcap_grad = [&](std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) {
    if (!w.has_softcap() || cfg.bug == mutant::softcap_grad_ignored) return 1.0f;
    const float t = std::tanh(scaled(bi, h, i, j) / cap);
    return 1.0f - t * t;
  };
  const auto dot_dp = [&](std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) {
    float dp = 0;
    for (std::int64_t e = 0; e < c.dv; ++e) dp += dov(bi, i, h, e) * v(bi, j, c.kv_head(h), e);
    return dp;
  };
  const std::size_t rows = z(c.b * c.hq * c.lq);
  // Preprocessing (FlashAttention 2's separate pass): per row, whether it sees
  // a key, D and the row maximum (for the unnormalized-P mutant).
  std::vector<char> sees(rows, 0);
  std::vector<float> big_d(rows, 0.f), row_max(rows, -std::numeric_limits<float>::infinity());
  const auto row_of = [&](std::int64_t bi, std::int64_t h, std::int64_t i) { return z((bi * c.hq + h) * c.lq + i); };
  const auto weight = [&](std::int64_t bi, std::int64_t h, std::int64_t i, float s) {
    return std::exp(s - lse_in[row_of(bi, h, i)]);
  };
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::size_t r = row_of(bi, h, i);
        for (std::int64_t j = 0; j < c.lk; ++j)
          if (c.visible(bi, h, i, j)) {
            sees[r] = 1;
            row_max[r] = std::max(row_max[r], score(bi, h, i, j));
          }
        if (!sees[r]) continue;
        float dd = 0;
        if (cfg.d_from_p) {
          for (std::int64_t j = 0; j < c.lk; ++j)
            if (c.visible(bi, h, i, j)) dd += weight(bi, h, i, score(bi, h, i, j)) * dot_dp(bi, h, i, j);
        } else {
          for (std::int64_t e = 0; e < c.dv; ++e) {
            const float o =
                cfg.bug == mutant::d_from_do_squared ? dov(bi, i, h, e) : o_in[z(((bi * c.lq + i) * c.hq + h) * c.dv + e)];
            dd += dov(bi, i, h, e) * o;
          }
        }
        big_d[r] = dd;
      }
  // d(sink)_h = -sum_(b,i) exp(sigma_h - LSE_in) D, rows in order, in f32.
  if (w.has_sinks()) {
    out.d_sinks.assign(z(c.hq), 0.0);
    for (std::int64_t h = 0; h < c.hq; ++h) {
      const float sigma = static_cast<float>(c.sink_of(h));
      if (!(sigma > -std::numeric_limits<float>::infinity())) continue;
      float acc = 0;
      for (std::int64_t bi = 0; bi < c.b; ++bi)
        for (std::int64_t i = 0; i < c.lq; ++i) {
          const std::size_t r = row_of(bi, h, i);
          if (!sees[r]) continue;
          const float term = std::exp(sigma - lse_in[r]) * big_d[r];
          acc += cfg.bug == mutant::sink_grad_positive ? term : -term;
        }
      out.d_sinks[z(h)] = acc;
    }
  }

  const std::int64_t bk = cfg.bk, bq = cfg.bq;
  std::vector<float> dq_acc(out.dq.size(), 0.f), dk_acc(out.dk.size(), 0.f), dv_acc(out.dv.size(), 0.f);
  std::vector<float> dq_part(z(c.d)), dk_part, dv_part;
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t g = 0; g < c.hkv; ++g)
      for (std::int64_t j0 = 0; j0 < c.lk; j0 += bk) {
        const std::int64_t j1 = std::min(c.lk, j0 + bk);
        for (std::int64_t h = g * c.group(); h < (g + 1) * c.group(); ++h)
          for (std::int64_t i0 = 0; i0 < c.lq; i0 += bq) {
            const std::int64_t i1 = std::min(c.lq, i0 + bq);
            dk_part.assign(z((j1 - j0) * c.d), 0.f);
            dv_part.assign(z((j1 - j0) * c.dv), 0.f);
            for (std::int64_t i = i0; i < i1; ++i) {
              const std::size_t r = row_of(bi, h, i);
              if (!sees[r]) continue;
              std::fill(dq_part.begin(), dq_part.end(), 0.f);
              for (std::int64_t j = j0; j < j1; ++j) {
                if (!c.visible(bi, h, i, j)) continue;
                const float s = score(bi, h, i, j);
                const float p = weight(bi, h, i, s);
                const float dp = dot_dp(bi, h, i, j);
                const float ds =
                    (cfg.bug == mutant::ds_without_p ? dp - big_d[r] : p * (dp - big_d[r])) * softcap_grad(bi, h, i, j);
                const float pv = cfg.bug == mutant::dv_unnormalized ? std::exp(s - row_max[r]) : p;
                for (std::int64_t d = 0; d < c.d; ++d) {
                  dq_part[z(d)] += ds * k(bi, j, g, d);
                  dk_part[z((j - j0) * c.d + d)] += ds * q(bi, i, h, d);
                }
                for (std::int64_t e = 0; e < c.dv; ++e) dv_part[z((j - j0) * c.dv + e)] += pv * dov(bi, i, h, e);
              }
              float* dq = &dq_acc[z(((bi * c.lq + i) * c.hq + h) * c.d)];
              for (std::int64_t d = 0; d < c.d; ++d)
                dq[d] += cfg.bug == mutant::dq_without_scale ? dq_part[z(d)] : scale * dq_part[z(d)];
            }
            for (std::int64_t j = j0; j < j1; ++j) {
              for (std::int64_t d = 0; d < c.d; ++d)
                dk_acc[z(((bi * c.lk + j) * c.hkv + g) * c.d + d)] += dk_part[z((j - j0) * c.d + d)];
              for (std::int64_t e = 0; e < c.dv; ++e)
                dv_acc[z(((bi * c.lk + j) * c.hkv + g) * c.dv + e)] += dv_part[z((j - j0) * c.dv + e)];
            }
          }
      }
  for (std::size_t x = 0; x < dq_acc.size(); ++x) out.dq[x] = stored(c.type, dq_acc[x]);
  for (std::size_t x = 0; x < dk_acc.size(); ++x) out.dk[x] = stored(c.type, scale * dk_acc[x]);
  for (std::size_t x = 0; x < dv_acc.size(); ++x) out.dv[x] = stored(c.type, dv_acc[x]);
  return out;
}

/// A random case: any_small_case, a scale of either sign in one case of four,
/// any value kind, and a dO kind; then the subject's blocks and D variant.
struct bound_case {
  attn_case c;
  grad_kind grad = grad_kind::normal;
  tensor d_o;
  subject_config cfg;
};

/// After f.c's shape and storage: its value kind, scale and dO
/// (with_random_values_and_grad), then the subject's key blocks of 1 to
/// bk_max, query blocks of 1 to bq_max and its D variant.
template <class Below>
void draw_the_rest(bound_case& f, const Below& below, std::int64_t bk_max, std::int64_t bq_max) {
  grad_draw g = oracle_testing::with_random_values_and_grad(f.c, below);
  f.grad = g.grad;
  f.d_o = std::move(g.d_o);
  f.cfg.bk = 1 + below(bk_max);
  f.cfg.bq = 1 + below(bq_max);
  f.cfg.d_from_p = below(2) == 0;
}

bound_case any_bound_case(std::uint64_t seed) {
  bound_case f;
  f.c = oracle_testing::any_small_case(seed);
  std::mt19937_64 rng(seed ^ 0x62776462ull);
  const oracle_testing::uniform_below below{rng};
  draw_the_rest(f, below, 3, 2);
  return f;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// One tensor judged against the bound.
struct judged {
  std::int64_t elements = 0, outside = 0, unjudged = 0, overflow_accepted = 0;
  std::int64_t changed = 0, changed_outside = 0;  ///< elements where a mutant's value differs from the correct subject's
  double worst_ratio = 0, worst_ratio_f32 = 0;    ///< max observed/bound; over f32-stored cases only
  std::string worst_case, worst_case_f32;
  std::string first_outside;  ///< the first element outside: index, value, oracle, bound
};

/// Judges got against exact +- bound; `correct` (the correct subject's values,
/// or null) counts the elements a mutant changes.
void judge(const std::vector<double>& got, const std::vector<double>& exact, const std::vector<double>& bound, dtype t,
           const std::vector<double>* correct, const std::string& line, judged& j) {
  for (std::size_t x = 0; x < got.size(); ++x) {
    if (!std::isfinite(bound[x])) {
      ++j.unjudged;
      continue;
    }
    ++j.elements;
    const bool changed = correct && !((*correct)[x] == got[x] || (std::isnan((*correct)[x]) && std::isnan(got[x])));
    if (changed) ++j.changed;
    const double err = std::fabs(got[x] - exact[x]);
    bool outside = false;
    if (!std::isfinite(got[x])) {
      // The comparison accepts +-inf of the right sign where the bound reaches the overflow threshold.
      if (std::fabs(exact[x]) + bound[x] >= largest_finite(t) && std::signbit(got[x]) == std::signbit(exact[x])) {
        ++j.overflow_accepted;
      } else {
        outside = true;
      }
    } else {
      outside = err > bound[x];
      if (bound[x] > 0 && t == dtype::f32 && err / bound[x] > j.worst_ratio_f32) {
        j.worst_ratio_f32 = err / bound[x];
        char buf[120];
        std::snprintf(buf, sizeof buf, " [%zu] got %.9g oracle %.9g bound %.9g", x, got[x], exact[x], bound[x]);
        j.worst_case_f32 = line + buf;
      }
      if (bound[x] > 0 && err / bound[x] > j.worst_ratio) {
        j.worst_ratio = err / bound[x];
        j.worst_case = line;
      }
    }
    if (outside) {
      if (j.first_outside.empty()) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "[%zu] got %.17g oracle %.17g bound %.17g", x, got[x], exact[x], bound[x]);
        j.first_outside = buf;
      }
      ++j.outside;
      if (changed) ++j.changed_outside;
    }
  }
}

bool all_finite(const std::vector<double>& b) {
  return std::all_of(b.begin(), b.end(), [](double x) { return std::isfinite(x); });
}

struct tally {
  judged dq, dk, dv, d_sinks;
  std::int64_t cases_outside = 0;  // cases with an element outside the bound
  std::int64_t fudge_cases = 0;    // cases every element of which is judged: the fudge comparison's
  std::int64_t bound_accepts = 0, pytorch_accepts = 0, flash_accepts = 0;  // of fudge_cases
};

/// The long cases (oracle_testing::any_long_shape), every value kind and dO
/// kind; key blocks of 1 to 16, query blocks of 1 to 8.
bound_case any_long_case(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x6c6f6e67ull);
  const oracle_testing::uniform_below below{rng};
  bound_case f;
  f.c = oracle_testing::any_long_shape(rng);
  draw_the_rest(f, below, 16, 8);
  return f;
}

/// Runs `cases` cases of make(seed + n) and returns the correct subject's and
/// each mutant's tallies, printing them.
std::vector<tally> run_cases(int cases, bound_case (*make)(std::uint64_t), const std::vector<mutant>& bugs = mutants) {
  const std::uint64_t seed = oracle_testing::base_seed();
  std::printf("ATTNCHECK_SEED=%llu (cases seed .. seed+%d)\n", static_cast<unsigned long long>(seed), cases - 1);
  std::vector<tally> t(bugs.size() + 1);  // correct, then the mutants
  std::int64_t unjudged_cases = 0;
  for (int n = 0; n < cases; ++n) {
    const bound_case f = make(seed + static_cast<std::uint64_t>(n));
    const attn_case& c = f.c;
    backward_bound_params bp;
    bp.dq_blocks = ceil_div(c.lk, f.cfg.bk);
    bp.dkv_blocks = c.group() * ceil_div(c.lq, f.cfg.bq);
    bp.tanh_ulps = 2;  // glibc's tanhf: at most 2 ulps on x86-64 (its libm-test-ulps)
    const backward_result r = reference_backward(c, f.d_o, bp);
    // The forward a subject's backward is handed: the oracle's O in the storage type, LSE in f32.
    oracle_options opt;
    opt.out_type = c.type;
    const oracle_result fwd = reference(c, opt);
    std::vector<float> o_in(fwd.o.size()), lse_in(fwd.lse.size());
    for (std::size_t x = 0; x < o_in.size(); ++x) o_in[x] = static_cast<float>(stored(c.type, fwd.o[x]));
    for (std::size_t x = 0; x < lse_in.size(); ++x) lse_in[x] = static_cast<float>(fwd.lse[x]);
    // The fudge-factor rules' same-precision reference covers contract 1.0 only.
    const bool fudge = !c.variants.any();
    const gradient_values ref = fudge ? same_precision_backward(c, f.d_o) : gradient_values{};
    const bool every_judged =
        all_finite(r.dq_bound) && all_finite(r.dk_bound) && all_finite(r.dv_bound) && all_finite(r.d_sinks_bound);
    if (!every_judged) ++unjudged_cases;
    grads correct;
    for (std::size_t m = 0; m < t.size(); ++m) {
      subject_config cfg = f.cfg;
      cfg.bug = m == 0 ? mutant::none : bugs[m - 1];
      const grads g = subject(c, f.d_o, o_in, lse_in, cfg);
      tally& s = t[m];
      if (m == 0) correct = g;
      const std::int64_t before = s.dq.outside + s.dk.outside + s.dv.outside + s.d_sinks.outside;
      const std::string line = to_line(c) + " grad=" + std::string(name(f.grad));
      judge(g.dq, r.dq, r.dq_bound, c.type, m ? &correct.dq : nullptr, line, s.dq);
      judge(g.dk, r.dk, r.dk_bound, c.type, m ? &correct.dk : nullptr, line, s.dk);
      judge(g.dv, r.dv, r.dv_bound, c.type, m ? &correct.dv : nullptr, line, s.dv);
      judge(g.d_sinks, r.d_sinks, r.d_sinks_bound, dtype::f32, m ? &correct.d_sinks : nullptr, line, s.d_sinks);
      const bool outside = s.dq.outside + s.dk.outside + s.dv.outside + s.d_sinks.outside > before;
      if (outside) ++s.cases_outside;
      if (m == 0 && outside) {
        ADD_FAILURE() << "outside the bound: " << line << "\n dQ " << s.dq.first_outside << "\n dK " << s.dk.first_outside
                      << "\n dV " << s.dv.first_outside << "\n d(sink) " << s.d_sinks.first_outside;
        s.dq.first_outside.clear(), s.dk.first_outside.clear(), s.dv.first_outside.clear(), s.d_sinks.first_outside.clear();
      }
      if (every_judged && fudge) {
        ++s.fudge_cases;
        if (!outside) ++s.bound_accepts;
        if (pytorch_rule_accepts(g.dq, ref.dq, r.dq) && pytorch_rule_accepts(g.dk, ref.dk, r.dk) &&
            pytorch_rule_accepts(g.dv, ref.dv, r.dv))
          ++s.pytorch_accepts;
        if (flash_rule_accepts(g.dq, ref.dq, r.dq) && flash_rule_accepts(g.dk, ref.dk, r.dk) &&
            flash_rule_accepts(g.dv, ref.dv, r.dv))
          ++s.flash_accepts;
      }
    }
  }
  std::printf("%d cases, %lld with an element the bound does not judge (NaN or +inf bound)\n", cases,
              static_cast<long long>(unjudged_cases));
  std::printf(
      "judged elements outside the bound (in brackets: of those the bug changes); cases with one outside;\n"
      "of the fully judged cases, how many the bound / PyTorch 180x / FlashAttention 2x accept\n");
  std::printf("%-18s %16s %16s %16s  %-12s  %s\n", "subject", "dQ", "dK", "dV", "cases", "bound / PyTorch / FA");
  for (std::size_t m = 0; m < t.size(); ++m) {
    const tally& s = t[m];
    const auto pct = [](std::int64_t a, std::int64_t b) {
      return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0;
    };
    const auto share = [&](const judged& j) {
      static thread_local char buf[40];
      std::snprintf(buf, sizeof buf, "%5.1f%% (%5.1f%%)", pct(j.outside, j.elements), pct(j.changed_outside, j.changed));
      return std::string(buf);
    };
    std::printf("%-18s %16s %16s %16s  %5lld/%-6d  %lld: %lld / %lld / %lld\n", name(m == 0 ? mutant::none : bugs[m - 1]),
                share(s.dq).c_str(), share(s.dk).c_str(), share(s.dv).c_str(), static_cast<long long>(s.cases_outside), cases,
                static_cast<long long>(s.fudge_cases), static_cast<long long>(s.bound_accepts),
                static_cast<long long>(s.pytorch_accepts), static_cast<long long>(s.flash_accepts));
  }
  const tally& ok = t[0];
  if (ok.d_sinks.elements > 0) {
    std::printf("d(sink) entries outside the bound (of those the bug changes):");
    for (std::size_t m = 0; m < t.size(); ++m)
      std::printf(" %s %lld of %lld (%lld of %lld);", name(m == 0 ? mutant::none : bugs[m - 1]),
                  static_cast<long long>(t[m].d_sinks.outside), static_cast<long long>(t[m].d_sinks.elements),
                  static_cast<long long>(t[m].d_sinks.changed_outside), static_cast<long long>(t[m].d_sinks.changed));
    std::printf("\nmax observed/bound d(sink) %.3g\n", ok.d_sinks.worst_ratio);
  }
  std::printf(
      "correct subject: judged elements dQ %lld, dK %lld, dV %lld; unjudged %lld; overflow accepted %lld;\n"
      "max observed/bound dQ %.3g, dK %.3g, dV %.3g\n",
      static_cast<long long>(ok.dq.elements), static_cast<long long>(ok.dk.elements), static_cast<long long>(ok.dv.elements),
      static_cast<long long>(ok.dq.unjudged + ok.dk.unjudged + ok.dv.unjudged),
      static_cast<long long>(ok.dq.overflow_accepted + ok.dk.overflow_accepted + ok.dv.overflow_accepted), ok.dq.worst_ratio,
      ok.dk.worst_ratio, ok.dv.worst_ratio);
  std::printf("max observed/bound, f32 storage only: dQ %.3g, dK %.3g, dV %.3g\n", ok.dq.worst_ratio_f32, ok.dk.worst_ratio_f32,
              ok.dv.worst_ratio_f32);
  std::printf("worst: dQ %s\n       dK %s\n       dV %s\n", ok.dq.worst_case.c_str(), ok.dk.worst_case.c_str(),
              ok.dv.worst_case.c_str());
  std::printf("worst in f32: dQ %s\n              dK %s\n              dV %s\n", ok.dq.worst_case_f32.c_str(),
              ok.dk.worst_case_f32.c_str(), ok.dv.worst_case_f32.c_str());
  return t;
}

// The correct subject (the tally of run_cases' first row): no gradient
// element outside the bound, and some of each judged.
void expect_correct_within(const tally& ok) {
  EXPECT_EQ(ok.dq.outside + ok.dk.outside + ok.dv.outside, 0);
  EXPECT_GT(ok.dq.elements, 0);
  EXPECT_GT(ok.dk.elements, 0);
  EXPECT_GT(ok.dv.elements, 0);
}

// The share of the elements a planted bug changes that fall outside the bound.
double caught(const judged& j) {
  return j.changed ? static_cast<double>(j.changed_outside) / static_cast<double>(j.changed) : 0.0;
}

TEST(backward_bound, f32_subject_stays_within_and_mutants_fall_outside) {
  const std::vector<tally> t = run_cases(ATTNCHECK_BACKWARD_BOUND_CASES, any_bound_case);
  expect_correct_within(t[0]);
  // Each planted bug falls outside the bound on most of the judged elements it
  // changes, in the gradient it corrupts (measured 70% to 99%, docs/bound.md).
  EXPECT_GE(caught(t[1].dq), 0.5) << "dq_without_scale";
  EXPECT_GE(caught(t[2].dq), 0.5) << "d_from_do_squared";
  EXPECT_GE(caught(t[2].dk), 0.5) << "d_from_do_squared";
  EXPECT_GE(caught(t[3].dq), 0.5) << "ds_without_p";
  EXPECT_GE(caught(t[3].dk), 0.5) << "ds_without_p";
  EXPECT_GE(caught(t[4].dv), 0.5) << "dv_unnormalized";
}

// The same on longer rows and wider heads, where the gamma_n terms grow with n.
TEST(backward_bound, long_rows_stay_within) {
  const std::vector<tally> t = run_cases(ATTNCHECK_BACKWARD_BOUND_CASES / 10, any_long_case);
  expect_correct_within(t[0]);
}

/// any_bound_case with every contract 1.1 variant drawn on its own coin
/// (oracle_testing::draw_variants: softcaps c in [0.25, 30.25]), at least one on.
bound_case any_variant_bound_case(std::uint64_t seed) {
  bound_case f;
  f.c = oracle_testing::any_small_case(seed);
  std::mt19937_64 rng(seed ^ 0x7661726273ull);
  const oracle_testing::uniform_below below{rng};
  oracle_testing::draw_some_variants(f.c, below, 30.0);
  draw_the_rest(f, below, 3, 2);
  return f;
}

// Every variant (window, chunk, softcap, sinks, ALiBi, bias) with d(sink):
// the f32 subject stays within, each planted bug falls outside where it acts.
TEST(backward_bound, variant_cases_stay_within_and_mutants_fall_outside) {
  const std::vector<tally> t = run_cases(ATTNCHECK_BACKWARD_BOUND_CASES / 2, any_variant_bound_case, variant_mutants);
  const tally& ok = t[0];
  EXPECT_EQ(ok.dq.outside + ok.dk.outside + ok.dv.outside + ok.d_sinks.outside, 0);
  EXPECT_GT(ok.d_sinks.elements, 0);
  EXPECT_GE(caught(t[1].dq), 0.5) << "dq_without_scale";
  EXPECT_GE(caught(t[3].dk), 0.5) << "ds_without_p";
  EXPECT_GE(caught(t[5].dq), 0.5) << "softcap_grad_ignored";
  EXPECT_GE(caught(t[5].dk), 0.5) << "softcap_grad_ignored";
  EXPECT_GE(caught(t[6].d_sinks), 0.5) << "sink_grad_positive";
}

TEST(backward_bound, rejects_invalid_declarations_naming_the_field) {
  const bound_case f = any_bound_case(oracle_testing::base_seed());
  const auto field_of = [&](const backward_bound_params& bp) -> std::string {
    try {
      (void)reference_backward(f.c, f.d_o, bp);
    } catch (const input_error& e) {
      return e.what();
    }
    return "";
  };
  backward_bound_params bp;
  bp.u_compute = 1.0;
  EXPECT_NE(field_of(bp).find("bound.u_compute"), std::string::npos);
  bp = {};
  bp.exp_ulps = -1;
  EXPECT_NE(field_of(bp).find("bound.exp_ulps"), std::string::npos);
  bp = {};
  bp.tanh_ulps = std::numeric_limits<double>::infinity();
  EXPECT_NE(field_of(bp).find("bound.tanh_ulps"), std::string::npos);
  bp = {};
  bp.dq_blocks = 0;
  EXPECT_NE(field_of(bp).find("bound.dq_blocks"), std::string::npos);
  bp = {};
  bp.dkv_blocks = 0;
  EXPECT_NE(field_of(bp).find("bound.dkv_blocks"), std::string::npos);
  // The bound-free entry is unchanged: no bounds returned.
  const backward_result plain = reference_backward(f.c, f.d_o);
  EXPECT_TRUE(plain.dq_bound.empty() && plain.dk_bound.empty() && plain.dv_bound.empty());
  const backward_result bounded = reference_backward(f.c, f.d_o, backward_bound_params{});
  EXPECT_EQ(bounded.dq, plain.dq);
  EXPECT_EQ(bounded.dk, plain.dk);
  EXPECT_EQ(bounded.dv, plain.dv);
  EXPECT_EQ(bounded.dq_bound.size(), plain.dq.size());
}

// Rows with no visible key and keys no row sees: bound exactly 0 (the gradient
// must be exactly 0); elsewhere with finite inputs a bound > 0 or +inf.
TEST(backward_bound, zero_exactly_where_the_gradient_must_be_zero) {
  std::int64_t empty_rows = 0, unseen_keys = 0, seen = 0;
  for (std::uint64_t n = 0; n < 400; ++n) {
    const bound_case f = any_bound_case(oracle_testing::base_seed() + n);
    const attn_case& c = f.c;
    const backward_result r = reference_backward(c, f.d_o, backward_bound_params{});
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t i = 0; i < c.lq; ++i) {
          bool any = false;
          for (std::int64_t j = 0; j < c.lk; ++j) any = any || c.visible(bi, h, i, j);
          if (any) continue;
          ++empty_rows;
          for (std::int64_t d = 0; d < c.d; ++d) {
            const std::size_t x = backward_result::index(r.dq_shape, bi, i, h, d);
            ASSERT_EQ(r.dq_bound[x], 0.0) << to_line(c);
            ASSERT_EQ(r.dq[x], 0.0) << to_line(c);
          }
        }
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t g = 0; g < c.hkv; ++g)
        for (std::int64_t j = 0; j < c.lk; ++j) {
          bool any = false;
          for (std::int64_t h = g * c.group(); h < (g + 1) * c.group(); ++h)
            for (std::int64_t i = 0; i < c.lq; ++i) any = any || c.visible(bi, h, i, j);
          // A seen key: NaN (a non-finite input) or > 0 (+inf included); unseen: exactly 0.
          const auto check = [&](double b) { EXPECT_TRUE(any ? std::isnan(b) || b > 0 : b == 0.0) << to_line(c); };
          for (std::int64_t d = 0; d < c.d; ++d) check(r.dk_bound[backward_result::index(r.dk_shape, bi, j, g, d)]);
          for (std::int64_t e = 0; e < c.dv; ++e) check(r.dv_bound[backward_result::index(r.dv_shape, bi, j, g, e)]);
          (any ? seen : unseen_keys) += 1;
        }
  }
  std::printf("%lld rows with no visible key, %lld keys no row sees, %lld keys seen\n", static_cast<long long>(empty_rows),
              static_cast<long long>(unseen_keys), static_cast<long long>(seen));
  EXPECT_GT(empty_rows, 0);
  EXPECT_GT(unseen_keys, 0);
}

}  // namespace
}  // namespace attncheck
