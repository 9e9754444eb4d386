// Attention written straight from docs/spec.md in any real type: the oracle's only
// arithmetic. Private to reference/ (and the oracle's own tests and cost tool).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "attncheck/case.hpp"

namespace attncheck::oracle_detail {

/// Results in Real, dense in the layouts of oracle_result:
/// o (B, Lq, Hq, Dv); lse and log_sum (B, Hq, Lq); p and gap (B, Hq, Lq, Lk).
template <class Real>
struct naive_result {
  std::vector<Real> o, lse, p;
  /// m - S_j rounded to double for visible keys, 0 elsewhere: how far each
  /// score sits below the row maximum (the bound's 2u(m - S_j) term).
  std::vector<double> gap;
  /// log sum_j exp(S_j - m) rounded to double, 0 for rows with no visible key.
  std::vector<double> log_sum;
};

/// The inputs as the contract defines them: the exact stored values of the
/// case's Q, K and V. The oracle reads every input through such a source; the
/// backward self-check hands it one with a single element perturbed.
struct stored_inputs {
  const attn_case& c;
  double q(std::int64_t bi, std::int64_t i, std::int64_t h, std::int64_t d) const { return c.q.at(bi, i, h, d); }
  double k(std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t d) const { return c.k.at(bi, j, g, d); }
  double v(std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t e) const { return c.v.at(bi, j, g, e); }
};

/// Computes S, P, O and LSE of docs/spec.md for a validated case in Real
/// arithmetic, reading Q, K and V from `in` (q(b, i, h, d), k(b, j, g, d),
/// v(b, j, g, e), each convertible to Real). Reads them only at visible pairs
/// (c.visible), so a masked slot never enters any arithmetic. Non-finite
/// visible inputs propagate (NaN or inf results), never a crash.
template <class Real, class Inputs>
naive_result<Real> naive_attention(const attn_case& c, const Inputs& in) {
  using std::exp;  // ADL picks Boost.Multiprecision's exp/log for its types
  using std::isnan;
  using std::log;
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };

  naive_result<Real> r;
  r.o.assign(n(c.b * c.lq * c.hq * c.dv), Real(0));
  r.lse.assign(n(c.b * c.hq * c.lq), Real(0));
  r.log_sum.assign(r.lse.size(), 0.0);
  r.p.assign(n(c.b * c.hq * c.lq * c.lk), Real(0));
  r.gap.assign(r.p.size(), 0.0);

  // The scale exactly as the subject receives it (an f32), widened exactly.
  const Real scale = Real(static_cast<double>(c.effective_scale()));
  std::vector<std::int64_t> keys;
  std::vector<Real> s(n(c.lk));

  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    for (std::int64_t h = 0; h < c.hq; ++h) {
      const std::int64_t g = c.kv_head(h);
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::size_t row = n((bi * c.hq + h) * c.lq + i);
        keys.clear();
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (c.visible(bi, h, i, j)) keys.push_back(j);
        }
        if (keys.empty()) {  // docs/spec.md: O = 0, P = 0, LSE = -inf, never NaN
          r.lse[row] = -std::numeric_limits<Real>::infinity();
          continue;
        }

        for (std::int64_t j : keys) {
          Real dot = 0;
          for (std::int64_t d = 0; d < c.d; ++d) {
            dot += Real(in.q(bi, i, h, d)) * Real(in.k(bi, j, g, d));
          }
          s[n(j)] = scale * dot;
        }

        // m = max over visible S; a NaN score makes the row NaN on purpose.
        Real m = s[n(keys.front())];
        for (std::int64_t j : keys) {
          if (isnan(s[n(j)])) {
            m = s[n(j)];
            break;
          }
          if (s[n(j)] > m) m = s[n(j)];
        }

        Real sum = 0;
        Real* p = &r.p[row * n(c.lk)];
        for (std::int64_t j : keys) {
          p[j] = exp(s[n(j)] - m);
          sum += p[j];
        }
        for (std::int64_t j : keys) {
          p[j] /= sum;
          r.gap[row * n(c.lk) + n(j)] = static_cast<double>(Real(m - s[n(j)]));
        }
        const Real log_sum = log(sum);
        r.lse[row] = m + log_sum;
        r.log_sum[row] = static_cast<double>(log_sum);

        for (std::int64_t e = 0; e < c.dv; ++e) {
          Real acc = 0;
          for (std::int64_t j : keys) acc += p[j] * Real(in.v(bi, j, g, e));
          r.o[n(((bi * c.lq + i) * c.hq + h) * c.dv + e)] = acc;
        }
      }
    }
  }
  return r;
}

/// The oracle proper: naive_attention on the case's stored, materialized inputs.
template <class Real>
naive_result<Real> naive_attention(const attn_case& c) {
  return naive_attention<Real>(c, stored_inputs{c});
}

}  // namespace attncheck::oracle_detail
