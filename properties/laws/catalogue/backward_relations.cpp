// The backward group's relation laws (backward.cpp says where the rest
// lives): two or more runs whose exact gradients are related (keys
// translated, GQA against MHA on repeated K/V, dO1 + dO2 against dO1 and
// dO2), each run within its bound of its truth.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backward_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {
// One element of a relation between runs, each run within its bound of its
// truth: `a` and `b` must lie within `bound` (the runs' bounds plus how far
// the relation's truths lie apart in double). Judged where the bound is
// finite: there every term stays below the storage type's overflow, so a
// non-finite a or b fails. A NaN bound (a visible input is not finite) or an
// infinite one judges nothing.
void agree(comparison& cmp, const std::string& w, double a, double b, double bound) {
  if (!std::isfinite(bound)) {
    ++cmp.unbounded;
    return;
  }
  if (std::isfinite(a))
    cmp.element(w, a, b, bound);
  else if (std::isfinite(b))
    cmp.element(w, b, a, bound);
  else
    cmp.element(w, 0.0, a, 0.0);  // both not finite: neither may be
}

// ---- backward.translated_keys_change_no_gradient ----

}  // namespace

// Keys the law can translate exactly: dyadic keys (k/4, |k| <= 8) take a
// translation by +-2^e, e <= 3, exactly in every storage type; a quarter of
// the cases keep the drawn values, where the law finds the largest exact
// translation it can (often an ulp or so).
void prepare_translated(attn_case& c, const subject& s) {
  prepare_gradients(c, s);
  if (c.seed % 4 != 0) c.values = value_kind::dyadic;
}

// K_j -> K_j + t for every key j of a (b, KV head), t one vector per (b, KV
// head): every score of a row moves by scale Q_i . t, a constant of the row,
// so P and O are unchanged and LSE moves by it (the oracle's O and LSE of the
// translated case are handed in). dP = dO V^T, D and dS = P (dP - D) are
// unchanged, hence dK = scale dS^T Q and dV = P^T dO; dQ = scale dS K' =
// dQ + scale (sum_j dS_ij) t = dQ, a row's dS summing to 0 over its keys.
// So all three gradients are the same real numbers on both cases: the
// subject's must agree within the sum of the two cases' bounds. A kernel
// whose dS rows do not sum to 0 (D wrong, dS without P) moves dQ by
// scale (sum_j dS_ij) t.
law_outcome translated_keys(const subject& s, const attn_case& c) {
  law_outcome o;
  law_rng rng(c, 0x7e45);
  attn_case t = c;
  double largest = 0;
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t g = 0; g < c.hkv; ++g)
      for (std::int64_t x = 0; x < c.d; ++x) {
        // The largest +-2^e (e in [-24, 3]) that every key of the column takes exactly.
        const double sign = rng.below(2) ? -1.0 : 1.0;
        double shift = 0;
        for (int e = 3; e >= -24 && shift == 0; --e) {
          const double cand = sign * std::ldexp(1.0, e);
          bool exact = true;
          for (std::int64_t j = 0; j < c.lk && exact; ++j) {
            const double y = c.k.at(bi, j, g, x) + cand;
            exact = std::isfinite(y) && decode(c.type, encode(c.type, y)) == y;
          }
          if (exact) shift = cand;
        }
        if (shift == 0) continue;
        largest = std::max(largest, std::fabs(shift));
        for (std::int64_t j = 0; j < c.lk; ++j) t.k.set(bi, j, g, x, c.k.at(bi, j, g, x) + shift);
      }
  if (largest == 0) return o.nothing_to_judge("no key column takes a translation exactly in the storage type");
  const tensor d_o = draw_grad_output(c, grad_of(c));
  const backward_run a = run_on_oracle(s, c, d_o), b = run_on_oracle(s, t, d_o);
  if (run_failed(a.out, o, "backward") || run_failed(b.out, o, "backward on the translated keys")) return o;
  comparison cmp;
  each_gradient(c, [&](int which, const std::string& w, std::size_t at, auto x0, auto x1, auto x2, auto x3) {
    const double gap = std::fabs(grad_values(a.r, which)[at] - grad_values(b.r, which)[at]);
    agree(cmp, w + " (keys translated)", grad_tensor(a.out, which).at(x0, x1, x2, x3),
          grad_tensor(b.out, which).at(x0, x1, x2, x3), grad_bounds(a.r, which)[at] + grad_bounds(b.r, which)[at] + gap);
  });
  char label[96];
  std::snprintf(label, sizeof label, "dQ, dK, dV with every key translated (largest |t_d| %g) against the original", largest);
  o.add(label, cmp);
  return o;
}

namespace {

// ---- backward.gqa_sums_repeated_mha_gradients ----

}  // namespace

// A group of at least two query heads per KV head (the MHA case repeats each
// KV head G times, so the work stays that of the GQA case).
void prepare_gqa_gradients(attn_case& c, const subject& s) {
  if (c.group() == 1) {
    c.hq = 2 * c.hkv;
    resync(c);
  }
  prepare_gradients(c, s);
}

// The case with K and V repeated per query head (Hkv = Hq, KV head h holding
// the old h / G): the same rows see the same keys and values, so dQ is the
// same and the old KV head g's dK and dV, summed over the rows of its G query
// heads, are the sums of the MHA case's dK and dV over those heads. Both
// subjects' results within their bounds: |dK - sum_h dK_h| <= bound + sum_h
// bound_h + |truth - sum_h truth_h| plus the law's own G - 1 additions in
// double (2^-52 of the summed magnitudes). No claim makes the two bitwise.
law_outcome gqa_sums_repeated_mha(const subject& s, const attn_case& c) {
  law_outcome o;
  if (c.group() == 1) return o.nothing_to_judge("one query head per KV head (the case was cut to G = 1)");
  const attn_case mha = repeated_kv(c);
  const tensor d_o = draw_grad_output(c, grad_of(c));
  const backward_run a = run_on_oracle(s, c, d_o), m = run_on_oracle(s, mha, d_o);
  if (run_failed(a.out, o, "GQA backward") || run_failed(m.out, o, "MHA backward on repeated K/V")) return o;
  comparison cmp;
  const std::int64_t group = c.group();
  each_gradient(c, [&](int which, const std::string& w, std::size_t at, auto x0, auto x1, auto x2, auto x3) {
    const double got = grad_tensor(a.out, which).at(x0, x1, x2, x3);
    const double truth = grad_values(a.r, which)[at];
    double bound = grad_bounds(a.r, which)[at];
    if (which == 0) {  // dQ: the same element of the MHA case
      agree(cmp, w + " (GQA vs MHA on repeated K/V)", got, grad_tensor(m.out, 0).at(x0, x1, x2, x3),
            bound + m.r.dq_bound[at] + std::fabs(truth - m.r.dq[at]));
      return;
    }
    // dK, dV of KV head x2: the sum over its query heads h of the MHA case's KV head h.
    const std::int64_t width = which == 1 ? c.d : c.dv;
    double sum = 0, sum_abs = 0, truths = 0, truths_abs = 0;
    for (std::int64_t h = x2 * group; h < (x2 + 1) * group; ++h) {
      const std::size_t k = static_cast<std::size_t>(((x0 * c.lk + x1) * c.hq + h) * width + x3);
      const double v = grad_tensor(m.out, which).at(x0, x1, h, x3);
      sum += v, sum_abs += std::fabs(v);
      truths += grad_values(m.r, which)[k], truths_abs += std::fabs(grad_values(m.r, which)[k]);
      bound += grad_bounds(m.r, which)[k];
    }
    bound += std::fabs(truth - truths) + static_cast<double>(group) * 0x1p-52 * (sum_abs + truths_abs);
    agree(cmp, w + " vs the sum over its query heads of the MHA gradients on repeated K/V", got, sum, bound);
  });
  o.add("GQA dQ, dK, dV against MHA on K/V repeated per query head (dK, dV summed over each group)", cmp);
  return o;
}

namespace {

// ---- backward.additive_in_output_gradient ----

}  // namespace

// grad(dO1 + dO2) = grad(dO1) + grad(dO2): D = rowsum(dO O), dP = dO V^T, dS,
// dQ, dK and dV are all linear in dO (O, LSE and P do not depend on it). dO1
// is the case's recipe; dO2 a dyadic draw of another seed (k/4, |k| <= 8),
// set to 0 where dO1 + dO2 is not exact in the storage type, so all three dO
// are exact inputs. Each run within its bound: |g12 - g1 - g2| <= b12 + b1 +
// b2 + |t12 - t1 - t2|, plus 2^-52 of |g1| + |g2| and |t1| + |t2| for the
// law's own additions in double.
law_outcome additive_in_output_gradient(const subject& s, const attn_case& c) {
  law_outcome o;
  const tensor d_o1 = draw_grad_output(c, grad_of(c));
  attn_case other = header_only(c);
  other.seed = c.seed ^ 0xadd0add0add0add0ull;
  tensor d_o2 = draw_grad_output(other, grad_kind::dyadic), d_o12 = d_o1;
  std::int64_t zeroed = 0;
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const double x = d_o1.at(bi, i, h, e), y = d_o2.at(bi, i, h, e);
          if (!(std::isfinite(x + y) && decode(c.type, encode(c.type, x + y)) == x + y)) {
            d_o2.set(bi, i, h, e, 0.0);
            ++zeroed;
          }
          d_o12.set(bi, i, h, e, d_o1.at(bi, i, h, e) + d_o2.at(bi, i, h, e));
        }
  const backward_run a = run_on_oracle(s, c, d_o1), b = run_on_oracle(s, c, d_o2), ab = run_on_oracle(s, c, d_o12);
  if (run_failed(a.out, o, "dO1") || run_failed(b.out, o, "dO2") || run_failed(ab.out, o, "dO1 + dO2")) return o;
  comparison cmp;
  each_gradient(c, [&](int which, const std::string& w, std::size_t at, auto x0, auto x1, auto x2, auto x3) {
    const double g1 = grad_tensor(a.out, which).at(x0, x1, x2, x3), g2 = grad_tensor(b.out, which).at(x0, x1, x2, x3);
    const double t1 = grad_values(a.r, which)[at], t2 = grad_values(b.r, which)[at], t12 = grad_values(ab.r, which)[at];
    const double bound = grad_bounds(a.r, which)[at] + grad_bounds(b.r, which)[at] + grad_bounds(ab.r, which)[at] +
                         std::fabs(t12 - (t1 + t2)) + 0x1p-52 * (std::fabs(g1) + std::fabs(g2) + std::fabs(t1) + std::fabs(t2));
    agree(cmp, w + " (dO1 + dO2 against the sum of the gradients of each)", g1 + g2,
          grad_tensor(ab.out, which).at(x0, x1, x2, x3), bound);
  });
  o.add("gradients of dO1 + dO2 against the sums of those of dO1 and dO2 (" + std::to_string(zeroed) +
            " elements of dO2 zeroed to keep the sum exact)",
        cmp);
  return o;
}

}  // namespace attncheck::laws
