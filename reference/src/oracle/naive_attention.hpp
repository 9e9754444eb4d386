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
  /// With a sink, m is the largest of the scores and sigma, and the sum has the sink's term.
  std::vector<double> log_sum;
  /// Rows of a head with a finite sink sigma (contract 1.1), else empty:
  /// sink_p = exp(sigma - m) / sum, the sink's share of the denominator;
  /// sink_above = sigma - (the largest visible score), -inf where the row sees no key.
  std::vector<double> sink_p, sink_above;
};

/// The inputs as the contract defines them: the exact stored values of the
/// case's Q, K and V. The oracle reads every input through such a source; the
/// backward self-check hands it one with a single element perturbed.
struct stored_inputs {
  const attn_case& c;
  double q(std::int64_t bi, std::int64_t i, std::int64_t h, std::int64_t d) const { return c.q_value(bi, i, h, d); }
  double k(std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t d) const { return c.k_value(bi, j, g, d); }
  double v(std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t e) const { return c.v_value(bi, j, g, e); }
  /// Query head h's sink logit (-inf: none), read only where the head has a finite one.
  double sink(std::int64_t h) const { return c.sink_of(h); }
};

/// Computes S, P, O and LSE of docs/spec.md for a validated case in Real
/// arithmetic, reading Q, K and V from `in` (q(b, i, h, d), k(b, j, g, d),
/// v(b, j, g, e), each convertible to Real) and a finite sink logit from
/// in.sink(h). Reads them only at visible pairs
/// (c.visible), so a masked slot never enters any arithmetic. Non-finite
/// visible inputs propagate (NaN or inf results), never a crash.
template <class Real, class Inputs>
naive_result<Real> naive_attention(const attn_case& c, const Inputs& in) {
  using std::exp;  // ADL picks Boost.Multiprecision's exp/log for its types
  using std::isnan;
  using std::log;
  using std::tanh;
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };

  naive_result<Real> r;
  r.o.assign(n(c.b * c.lq * c.hq * c.dv), Real(0));
  r.lse.assign(n(c.b * c.hq * c.lq), Real(0));
  r.log_sum.assign(r.lse.size(), 0.0);
  r.p.assign(n(c.b * c.hq * c.lq * c.lk), Real(0));
  r.gap.assign(r.p.size(), 0.0);
  const score_variants& w = c.variants;
  if (w.has_sinks()) {
    r.sink_p.assign(r.lse.size(), 0.0);
    r.sink_above.assign(r.lse.size(), -std::numeric_limits<double>::infinity());
  }
  const Real cap = Real(static_cast<double>(w.softcap));

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
        // The sink sigma_h (contract 1.1): a term of the denominator with no value; -inf is no sink.
        const bool sink = c.sink_of(h) > -std::numeric_limits<double>::infinity();
        const Real sigma = sink ? Real(in.sink(h)) : Real(0);
        if (keys.empty()) {  // docs/spec.md: O = 0, P = 0, LSE = -inf (sigma with a sink), never NaN
          r.lse[row] = sink ? sigma : -std::numeric_limits<Real>::infinity();
          if (sink) r.sink_p[row] = 1.0;
          continue;
        }

        for (std::int64_t j : keys) {
          Real dot = 0;
          for (std::int64_t d = 0; d < c.d; ++d) {
            dot += Real(in.q(bi, i, h, d)) * Real(in.k(bi, j, g, d));
          }
          // s = softcap(scale * q.k) + alibi + bias (docs/spec.md, "Order of operations").
          Real x = scale * dot;
          if (w.has_softcap()) x = cap * tanh(x / cap);
          if (w.has_alibi()) x += Real(c.alibi_at(bi, h, i, j));  // exact in double
          if (w.has_bias()) x += Real(c.bias_at(bi, h, i, j));
          s[n(j)] = x;
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

        Real sink_w = 0;
        if (sink) {
          if (!isnan(m)) r.sink_above[row] = static_cast<double>(Real(sigma - m));
          if (sigma > m) m = sigma;
        }
        Real sum = 0;
        Real* p = &r.p[row * n(c.lk)];
        for (std::int64_t j : keys) {
          p[j] = exp(s[n(j)] - m);
          sum += p[j];
        }
        if (sink) {
          sink_w = exp(sigma - m);
          sum += sink_w;
        }
        for (std::int64_t j : keys) {
          p[j] /= sum;
          r.gap[row * n(c.lk) + n(j)] = static_cast<double>(Real(m - s[n(j)]));
        }
        if (sink) r.sink_p[row] = static_cast<double>(Real(sink_w / sum));
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
