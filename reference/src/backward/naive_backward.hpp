// The backward pass written straight from its formulas in any real type: the
// backward oracle's only arithmetic (docs/oracle.md, "Backward"). Private to
// reference/ (and the oracle's own tests).
#pragma once

#include <cstddef>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../oracle/oracle_backends.hpp"
#include "attncheck/case.hpp"

namespace attncheck::oracle_detail {

/// Which formulas naive_backward evaluates. Only `exact` is the oracle; the
/// others are planted bugs its finite-difference self-check must catch.
enum class backward_formula : std::uint8_t {
  exact,                       ///< dS = P (dP - D), D = rowsum(dO O), dQ = scale dS K
  ds_without_p,                ///< planted bug: dS = dP - D
  d_from_do_squared,           ///< planted bug: D = rowsum(dO dO)
  dq_without_scale,            ///< planted bug: dQ = dS K
  softcap_without_derivative,  ///< planted bug: the softcap's 1 - tanh^2 factor dropped
  sink_grad_positive,          ///< planted bug: d(sink) = + sum P_sink D
};

/// Gradients in Real, dense row-major: dq (B, Lq, Hq, D), dk (B, Lk, Hkv, D),
/// dv (B, Lk, Hkv, Dv); d_sinks (Hq) with sinks, else empty.
template <class Real>
struct naive_grads {
  std::vector<Real> dq, dk, dv, d_sinks;
};

/// dQ, dK and dV of L = sum dO O for a validated case, from the forward
/// oracle's own P, O and LSE in the same Real (`fwd`, from naive_attention(c)):
///   dP_j = sum_e dO_e V_je,  D = sum_e dO_e O_e,  dS_j = P_j (dP_j - D),
///   dX_j = dS_j (1 - tanh^2(x_j / c)) with a softcap c (x_j = scale q.k_j), else dS_j,
///   dQ_d = scale sum_j dX_j K_jd,  dK_jd += scale dX_j Q_d,  dV_je += P_j dO_e
/// over the visible keys j of every row (b, h, i) (the variants' window,
/// chunk and -inf bias included in visibility; ALiBi and bias are additive, so
/// dS is their gradient too); K and V of query head h are KV head kv_head(h)'s,
/// so a KV head's dK and dV sum over its G query heads. With sinks,
///   d(sink)_h = -sum_(b, i) P_sink D,  P_sink = exp(sigma_h - LSE)
/// (0 for a head whose sink is -inf). Q, K, V and dO are read only at visible
/// pairs: a row with no visible key and a key no row sees read nothing and
/// get exactly +0.
template <class Real, backward_formula F = backward_formula::exact>
naive_grads<Real> naive_backward(const attn_case& c, const tensor& d_o, const naive_result<Real>& fwd) {
  using std::exp;  // ADL picks Boost.Multiprecision's for its types
  using std::tanh;
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  const stored_inputs in{c};
  naive_grads<Real> r;
  r.dq.assign(n(c.b * c.lq * c.hq * c.d), Real(0));
  r.dk.assign(n(c.b * c.lk * c.hkv * c.d), Real(0));
  r.dv.assign(n(c.b * c.lk * c.hkv * c.dv), Real(0));

  const Real scale = Real(static_cast<double>(c.effective_scale()));
  const Real dq_scale = F == backward_formula::dq_without_scale ? Real(1) : scale;
  const score_variants& w = c.variants;
  const Real cap = Real(static_cast<double>(w.softcap));
  if (w.has_sinks()) r.d_sinks.assign(n(c.hq), Real(0));
  std::vector<Real> d_out(n(c.dv));
  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    for (std::int64_t h = 0; h < c.hq; ++h) {
      const std::int64_t g = c.kv_head(h);
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::size_t row = n((bi * c.hq + h) * c.lq + i);
        bool sees_a_key = false;
        for (std::int64_t j = 0; j < c.lk && !sees_a_key; ++j) sees_a_key = c.visible(bi, h, i, j);
        if (!sees_a_key) continue;  // contributes nothing; its dO is never read

        Real big_d = 0;  // D = rowsum(dO O)
        for (std::int64_t e = 0; e < c.dv; ++e) {
          d_out[n(e)] = Real(d_o.at(bi, i, h, e));
          const Real& o = fwd.o[n(((bi * c.lq + i) * c.hq + h) * c.dv + e)];
          big_d += d_out[n(e)] * (F == backward_formula::d_from_do_squared ? d_out[n(e)] : o);
        }
        if (w.has_sinks() && c.sink_of(h) > -std::numeric_limits<double>::infinity()) {
          // The sink's weight exp(sigma - LSE): its share of the denominator.
          const Real p_sink = exp(Real(c.sink_of(h)) - fwd.lse[row]);
          r.d_sinks[n(h)] += F == backward_formula::sink_grad_positive ? Real(p_sink * big_d) : Real(-p_sink * big_d);
        }
        Real* dq = &r.dq[n(((bi * c.lq + i) * c.hq + h) * c.d)];
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(bi, h, i, j)) continue;
          const Real& p = fwd.p[row * n(c.lk) + n(j)];
          Real dp = 0;
          for (std::int64_t e = 0; e < c.dv; ++e) dp += d_out[n(e)] * Real(in.v(bi, j, g, e));
          Real ds = F == backward_formula::ds_without_p ? Real(dp - big_d) : Real(p * (dp - big_d));
          if (w.has_softcap() && F != backward_formula::softcap_without_derivative) {
            // d softcap(x) / dx = 1 - tanh^2(x / c), at the unrounded x = scale q.k_j.
            Real dot = 0;
            for (std::int64_t d = 0; d < c.d; ++d) dot += Real(in.q(bi, i, h, d)) * Real(in.k(bi, j, g, d));
            const Real t = tanh(scale * dot / cap);
            ds *= Real(1) - t * t;
          }
          Real* dk = &r.dk[n(((bi * c.lk + j) * c.hkv + g) * c.d)];
          for (std::int64_t d = 0; d < c.d; ++d) {
            dq[d] += ds * Real(in.k(bi, j, g, d));
            dk[d] += ds * Real(in.q(bi, i, h, d));
          }
          Real* dv = &r.dv[n(((bi * c.lk + j) * c.hkv + g) * c.dv)];
          for (std::int64_t e = 0; e < c.dv; ++e) dv[e] += p * d_out[n(e)];
        }
        for (std::int64_t d = 0; d < c.d; ++d) dq[d] *= dq_scale;
      }
    }
  }
  for (Real& x : r.dk) x *= scale;
  return r;
}

}  // namespace attncheck::oracle_detail

// Instantiated (exact formulas, mpfr50) in naive_backward_mpfr.cpp.
extern template attncheck::oracle_detail::naive_grads<attncheck::oracle_detail::mpfr50> attncheck::oracle_detail::naive_backward(
    const attncheck::attn_case&, const attncheck::tensor&,
    const attncheck::oracle_detail::naive_result<attncheck::oracle_detail::mpfr50>&);
