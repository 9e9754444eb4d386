// The backward pass written straight from its formulas in any real type: the
// backward oracle's only arithmetic (docs/oracle.md, "Backward"). Private to
// reference/ (and the oracle's own tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../oracle/oracle_backends.hpp"
#include "attncheck/case.hpp"

namespace attncheck::oracle_detail {

/// Which formulas naive_backward evaluates. Only `exact` is the oracle; the
/// others are planted bugs its finite-difference self-check must catch.
enum class backward_formula : std::uint8_t {
  exact,              ///< dS = P (dP - D), D = rowsum(dO O), dQ = scale dS K
  ds_without_p,       ///< planted bug: dS = dP - D
  d_from_do_squared,  ///< planted bug: D = rowsum(dO dO)
  dq_without_scale,   ///< planted bug: dQ = dS K
};

/// Gradients in Real, dense row-major: dq (B, Lq, Hq, D), dk (B, Lk, Hkv, D),
/// dv (B, Lk, Hkv, Dv).
template <class Real>
struct naive_grads {
  std::vector<Real> dq, dk, dv;
};

/// dQ, dK and dV of L = sum dO O for a validated case, from the forward
/// oracle's own P and O in the same Real (`fwd`, from naive_attention(c)):
///   dP_j = sum_e dO_e V_je,  D = sum_e dO_e O_e,  dS_j = P_j (dP_j - D),
///   dQ_d = scale sum_j dS_j K_jd,  dK_jd += scale dS_j Q_d,  dV_je += P_j dO_e
/// over the visible keys j of every row (b, h, i); K and V of query head h are
/// KV head kv_head(h)'s, so a KV head's dK and dV sum over its G query heads.
/// Q, K, V and dO are read only at visible pairs: a row with no visible key
/// and a key no row sees read nothing and get exactly +0.
template <class Real, backward_formula F = backward_formula::exact>
naive_grads<Real> naive_backward(const attn_case& c, const tensor& d_o, const naive_result<Real>& fwd) {
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  const stored_inputs in{c};
  naive_grads<Real> r;
  r.dq.assign(n(c.b * c.lq * c.hq * c.d), Real(0));
  r.dk.assign(n(c.b * c.lk * c.hkv * c.d), Real(0));
  r.dv.assign(n(c.b * c.lk * c.hkv * c.dv), Real(0));

  const Real scale = Real(static_cast<double>(c.effective_scale()));
  const Real dq_scale = F == backward_formula::dq_without_scale ? Real(1) : scale;
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
        Real* dq = &r.dq[n(((bi * c.lq + i) * c.hq + h) * c.d)];
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(bi, h, i, j)) continue;
          const Real& p = fwd.p[row * n(c.lk) + n(j)];
          Real dp = 0;
          for (std::int64_t e = 0; e < c.dv; ++e) dp += d_out[n(e)] * Real(in.v(bi, j, g, e));
          const Real ds = F == backward_formula::ds_without_p ? Real(dp - big_d) : Real(p * (dp - big_d));
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
