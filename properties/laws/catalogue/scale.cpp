// The scale law: power-of-two scalings of Q or K with the scale are exact
// where claimed (scale_exact) and within the bounds otherwise, V's are exact,
// V * 3 gives 3 O within the bounds, and another scale moves O.
#include <algorithm>
#include <bit>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// True when x * 2^a is exact and normal (or zero) in t, and x was normal or zero too.
bool scales_exactly(dtype t, double x, int a) {
  if (x == 0) return true;
  if (!std::isfinite(x)) return false;
  const double y = std::ldexp(x, a);
  const double min_normal = t == dtype::f16 ? 0x1p-14 : 0x1p-126;
  if (std::fabs(x) < min_normal || std::fabs(y) < min_normal) return false;
  return decode(t, encode(t, y)) == y;
}

// True when every element that some visible pair uses scales exactly (the
// others may hold poison and never matter).
bool tensor_scales_exactly(const tensor& t, int a, const std::function<bool(std::int64_t, std::int64_t, std::int64_t)>& used) {
  for (std::int64_t i0 = 0; i0 < t.shape[0]; ++i0)
    for (std::int64_t i1 = 0; i1 < t.shape[1]; ++i1)
      for (std::int64_t i2 = 0; i2 < t.shape[2]; ++i2) {
        if (!used(i0, i1, i2)) continue;
        for (std::int64_t i3 = 0; i3 < t.shape[3]; ++i3)
          if (!scales_exactly(t.type, t.at(i0, i1, i2, i3), a)) return false;
      }
  return true;
}

}  // namespace

law_outcome power_of_two_scalings_are_exact(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto base = s.attend(c);
  if (run_failed(base, o, "base run")) return o;
  const float scale = c.effective_scale();
  const slot_usage used = used_slots(c);
  const auto q_used = [&](auto b, auto i, auto h) { return used.query_row(c, b, i, h); };
  const auto kv_used = [&](auto b, auto j, auto g) { return used.key(c, b, j, g); };
  bool qk_judged = false;
  // Per key slot (b, j, g) in use: its smallest and largest nonzero |k| and
  // whether it scales exactly by 2 and by 1/2; likewise per query row.
  struct extent {
    double min = INFINITY, max = 0;
    bool exact[2] = {true, true};  // by 2^1, by 2^-1
  };
  const auto extent_of = [&](const tensor& t, std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t n) {
    extent e;
    for (std::int64_t x = 0; x < n; ++x) {
      const double v = t.at(i0, i1, i2, x);
      if (std::fabs(v) > 0) e.min = std::min(e.min, std::fabs(v)), e.max = std::max(e.max, std::fabs(v));
      e.exact[0] = e.exact[0] && scales_exactly(t.type, v, 1);
      e.exact[1] = e.exact[1] && scales_exactly(t.type, v, -1);
    }
    return e;
  };
  std::vector<extent> key_ext(static_cast<std::size_t>(c.b * c.lk * c.hkv)), row_q(static_cast<std::size_t>(c.b * c.hq * c.lq)),
      row_k(row_q.size());
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g)
        if (kv_used(b, j, g)) key_ext[static_cast<std::size_t>((b * c.lk + j) * c.hkv + g)] = extent_of(c.k, b, j, g, c.d);
  std::vector<char> row_sees(row_q.size(), 0);
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const auto r = static_cast<std::size_t>((b * c.hq + h) * c.lq + i);
        if (q_used(b, i, h)) row_q[r] = extent_of(c.q, b, i, h, c.d);
        extent& k = row_k[r];
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(b, h, i, j)) continue;
          row_sees[r] = 1;
          const extent& e = key_ext[static_cast<std::size_t>((b * c.lk + j) * c.hkv + c.kv_head(h))];
          k.min = std::min(k.min, e.min), k.max = std::max(k.max, e.max);
          k.exact[0] = k.exact[0] && e.exact[0], k.exact[1] = k.exact[1] && e.exact[1];
        }
      }
  // Q * 2^a (or K * 2^a) with scale * 2^-a: every score is the same real
  // number. A subject that applies the scale after the dot product or folds
  // it into Q or K gives the same bits, and may claim so (scale_exact); one
  // that splits sqrt(scale) into Q and K (PyTorch's math path) rounds
  // sqrt(scale * 2^-a) anew, so without the claim the two runs are held
  // within their bounds of the one truth (docs/spec.md "Scores and scale").
  const bool exact_claim = s.claims_v4(ATTNCHECK_CLAIM4_SCALE_EXACT);
  for (int a : {1, -1}) {
    const float s2 = std::ldexp(scale, -a);
    if (!(scale == 0.0f || (std::fabs(s2) >= 0x1p-126f && std::isfinite(s2)))) continue;
    const double sc = std::min(std::fabs(static_cast<double>(scale)), std::fabs(static_cast<double>(s2)));
    const double sc_max = std::max(std::fabs(static_cast<double>(scale)), std::fabs(static_cast<double>(s2)));
    // Same bits needs every intermediate normal: a product q k, q scale or
    // k scale in the subnormal range rounds differently once scaled (fuzz
    // finding: a one-key score of 2e-41), and far below f32's overflow (a
    // score past it becomes +-inf on one side only). Judged row by row (the
    // rows of a query are computed apart): a row counts where the smallest
    // nonzero |q| |k| |scale| products of its visible pairs stay far above
    // f32's normal floor and the largest far below its overflow. Each factor
    // is held to that alone, even where the other is all zeros: a kernel may
    // fold the scale into Q (or K) first, and q scale overflowing to inf
    // times a zero k is NaN on one side only (fuzz finding: bf16 q = -max,
    // k = -0, scale 2; builtin folds the scale into Q).
    const auto row_in_range = [&](const extent& q, const extent& k) {
      const double floor = 0x1p-100, ceiling = 0x1p100;
      const bool q_nonzero = std::isfinite(q.min), k_nonzero = std::isfinite(k.min);
      if ((q_nonzero && q.max * sc_max > ceiling) || (k_nonzero && k.max * sc_max > ceiling)) return false;
      if (q_nonzero && k_nonzero && q.max * k.max * static_cast<double>(c.d) * std::max(sc_max, 1.0) > ceiling) return false;
      if (scale == 0.0f) return true;
      if ((q_nonzero && q.min * sc < floor) || (k_nonzero && k.min * sc < floor)) return false;
      return !(q_nonzero && k_nonzero && (q.min * k.min * std::min(sc, 1.0) < floor || q.min * k.min < floor));
    };
    const int ai = a == 1 ? 0 : 1;
    for (int which = 0; which < 2; ++which) {
      std::vector<char> ok(row_q.size(), 0);
      std::int64_t n_ok = 0;
      for (std::size_t r = 0; r < ok.size(); ++r) {
        ok[r] = row_sees[r] && (!exact_claim || row_in_range(row_q[r], row_k[r])) &&
                (which == 0 ? row_q[r].exact[ai] : row_k[r].exact[ai]);
        n_ok += ok[r];
      }
      if (n_ok == 0) continue;
      const tensor& t = which == 0 ? c.q : c.k;
      attn_case p = c;
      (which == 0 ? p.q : p.k) = scaled(t, a, c.layout);
      p.scale = s2;
      const auto out = s.attend(p);
      if (run_failed(out, o, which == 0 ? "scaled Q" : "scaled K")) return o;
      const auto keep = [&](std::int64_t b, std::int64_t h, std::int64_t i) {
        return ok[static_cast<std::size_t>((b * c.hq + h) * c.lq + i)] != 0;
      };
      within_bounds_options rows;
      rows.keep = keep;
      const comparison r = exact_claim ? rows_bitwise(c, base, out, keep) : compare_within_own_bounds(s, c, base, p, out, rows);
      o.add(std::string(which == 0 ? "Q" : "K") + " * 2^" + std::to_string(a) + " with scale * 2^" + std::to_string(-a) + " (" +
                std::to_string(n_ok) + " of " + std::to_string(ok.size()) + " rows" +
                (exact_claim ? " in range, claimed bit for bit: scale_exact)" : ", within the bounds)"),
            r);
      qk_judged = true;
    }
    // V * 2^a scales O by 2^a exactly and leaves LSE's bits alone: every
    // rounding commutes with 2^a in the normal range, so any evaluation
    // order keeps it, given the same order in both calls (a deterministic
    // subject). Without that claim V * 3 below judges linearity in V within the bounds.
    // A subject that flushes its intermediates rounds a product w V below the
    // smallest normal to 0 in one call and not in the other: V * 3 judges it.
    if (s.claims(ATTNCHECK_CLAIM_DETERMINISTIC) && !s.flushes(ATTNCHECK_FLUSH_INTERMEDIATES) &&
        tensor_scales_exactly(c.v, a, kv_used)) {
      attn_case p = c;
      p.v = scaled(c.v, a, c.layout);
      const auto out = s.attend(p);
      if (run_failed(out, o, "scaled V")) return o;
      // Where the scaled case's bound is +inf an accumulator may overflow (a
      // pre-cast factor on P takes it there sooner): no exactness to demand.
      const oracle_result rv = fast_bound(s, p);
      comparison r;
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t i = 0; i < c.lq; ++i)
          for (std::int64_t h = 0; h < c.hq; ++h) {
            for (std::int64_t e = 0; e < c.dv; ++e) {
              const double x = base.o.at(b, i, h, e);
              // A zero or subnormal output was rounded with an absolute error:
              // the scaled truth may round to a different multiple (fuzz finding E).
              if (x == 0 || !scales_exactly(c.type, x, a) || std::isinf(rv.o_bound[rv.o_index(b, i, h, e)])) continue;
              // An output at the bottom of the normal range may come from a
              // subnormal true value, rounded on the subnormal grid (fuzz
              // finding: f16 O = 2^-14 exactly): judged from twice the floor up.
              const double floor = 2 * (c.type == dtype::f16 ? 0x1p-14 : 0x1p-126);
              if (std::fabs(x) < floor || std::fabs(std::ldexp(x, a)) < floor) continue;
              r.element(o_where(b, i, h, e), std::ldexp(x, a), out.o.at(b, i, h, e), 0.0);
            }
            if (!base.lse.empty()) {
              const float x = lse_of(base, c, c.lq, b, h, i), y = lse_of(out, c, c.lq, b, h, i);
              r.exact(lse_where(b, h, i) + " (V scaled)", std::bit_cast<std::uint32_t>(x), std::bit_cast<std::uint32_t>(y), x, y);
            }
          }
      o.add("V * 2^" + std::to_string(a) + " gives O * 2^" + std::to_string(a) + ", LSE unchanged", r);
    }
  }
  if (!qk_judged) o.nothing_to_judge("neither Q nor K scales exactly by 2 or 1/2 (or the scale would not)");
  const oracle_result r0 = fast_bound(s, c);
  // V * 3 (not a power of two): O is linear in V and the weights do not move,
  // so O(fl(3V)) = 3 O(V) + sum_j P_j (fl(3V_j) - 3V_j); the last term is at
  // most the largest rounding of 3V over the keys in use.
  {
    attn_case p = c;
    std::vector<double> delta(static_cast<std::size_t>(c.b * c.hkv * c.dv), 0.0);
    bool finite = true;
    p.v = remake(c.type, c.v.shape, c.layout, [&](auto b, auto j, auto g, auto e) {
      if (!used.key(c, b, j, g)) return c.v.bits_at(b, j, g, e);
      const double x = 3.0 * c.v.at(b, j, g, e);  // exact in double
      const std::uint32_t bits = encode(c.type, x);
      const double y = decode(c.type, bits);
      finite = finite && std::isfinite(y);
      auto& d = delta[static_cast<std::size_t>((b * c.hkv + g) * c.dv + e)];
      d = std::max(d, std::fabs(y - x));
      return bits;
    });
    if (finite) {
      const auto out = s.attend(p);
      if (run_failed(out, o, "V * 3")) return o;
      const oracle_result r3 = fast_bound(s, p);
      comparison r;
      r.overflow_threshold = overflow_threshold(c.type);
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t i = 0; i < c.lq; ++i)
          for (std::int64_t h = 0; h < c.hq; ++h)
            for (std::int64_t e = 0; e < c.dv; ++e) {
              const auto k = r0.o_index(b, i, h, e);
              const double bound =
                  r3.o_bound[k] + 3 * r0.o_bound[k] + delta[static_cast<std::size_t>((b * c.hkv + c.kv_head(h)) * c.dv + e)];
              if (!std::isfinite(bound)) {  // a non-finite input or a possible overflow: nothing to judge
                ++r.unbounded;
                continue;
              }
              r.element(o_where(b, i, h, e) + " (V * 3 vs 3 O)", 3 * base.o.at(b, i, h, e), out.o.at(b, i, h, e), bound);
            }
      o.add("V * 3 gives 3 O within the bounds", r);
    }
  }
  // A different scale must change the output wherever the oracle proves the
  // true outputs of the two scales further apart than both bounds together
  // (require_changes: the oracle's values, not the binary64 loops' estimates).
  attn_case p = c;
  p.scale = scale * 1.5f;
  const auto out = s.attend(p);
  if (run_failed(out, o, "scale * 1.5")) return o;
  const comparison moved = require_changes(s, c, base, p, out, "scale * 1.5", [](auto, auto, auto) { return true; });
  o.add("changing the scale changes the output", moved);
  return o;
}

}  // namespace attncheck::laws
