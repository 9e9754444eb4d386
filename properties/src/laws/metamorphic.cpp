// Metamorphic laws: transformations of the inputs with a known effect on the
// output (GQA vs repeated K/V, power-of-two scalings, score shifts, permutations).
#include <algorithm>
#include <bit>
#include <numeric>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// A random permutation of 0..n-1, never the identity when n >= 2.
std::vector<std::int64_t> permutation(law_rng& rng, std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  for (std::int64_t i = n - 1; i > 0; --i) std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(rng.below(i + 1))]);
  if (n >= 2 && std::is_sorted(p.begin(), p.end())) std::swap(p[0], p[1]);
  return p;
}

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

tensor scaled(const tensor& t, int a, layout_kind layout) {
  return remake(t.type, t.shape, layout, [&](auto i0, auto i1, auto i2, auto i3) { return encode(t.type, std::ldexp(t.at(i0, i1, i2, i3), a)); });
}

}  // namespace

void prepare_gqa(attn_case& c, const subject&) {
  // G != Hkv and G > 1: only then do h / G, h / Hkv and h % Hkv all differ.
  std::int64_t g = c.group();
  if (c.hkv == 1 && (c.seed & 1)) c.hkv = 2;
  if (g == 1) g = 2;
  if (g == c.hkv) g += 1;
  c.hq = c.hkv * g;
  if (c.has_mask() && c.mask_shape[1] != 1) c.mask_shape[1] = c.hq;
}

law_outcome gqa_matches_repeated_kv(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto base = s.attend(c);
  if (run_failed(base, o, "GQA run")) return o;
  const oracle_result ref = fast_bound(s, c);
  // MHA on K/V repeated in place (repeat_interleave): KV head h holds the old h / G.
  attn_case mha = c;
  mha.hkv = c.hq;
  mha.k = remake(c.type, {c.b, c.lk, c.hq, c.d}, c.layout, [&](auto b, auto j, auto h, auto x) { return c.k.bits_at(b, j, c.kv_head(h), x); });
  mha.v = remake(c.type, {c.b, c.lk, c.hq, c.dv}, c.layout, [&](auto b, auto j, auto h, auto x) { return c.v.bits_at(b, j, c.kv_head(h), x); });
  const auto rep = s.attend(mha);
  if (run_failed(rep, o, "MHA run on repeated K/V")) return o;
  o.add("GQA vs MHA on repeated K/V", compare_within_bounds(c, base, ref, rep, fast_bound(s, mha)));
  // Perturb one KV head: exactly its G query heads may change, and they must.
  if (c.hkv == 1) o.nothing_to_judge("Hkv = 1: no other KV head's query heads to keep unchanged");
  law_rng rng(c, 0x69a);
  const std::int64_t g0 = rng.below(c.hkv);
  attn_case p = c;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t j = 0; j < c.lk; ++j) {
      for (std::int64_t x = 0; x < c.d; ++x) p.k.set(b, j, g0, x, 2 * c.k.at(b, j, g0, x));
      for (std::int64_t x = 0; x < c.dv; ++x) {
        const double v = c.v.at(b, j, g0, x);
        p.v.set(b, j, g0, x, std::fabs(v) < 1e3 ? v + 1 : -v);
      }
    }
  const auto out = s.attend(p);
  if (run_failed(out, o, "perturbed KV head")) return o;
  comparison others, mine;
  for (std::int64_t h = 0; h < c.hq; ++h) {
    bool changed = false, sees = false;
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        // A row that sees a NaN or inf input (its bound is NaN) may be anything, moved or not.
        bool finite_row = true;
        for (std::int64_t e = 0; e < c.dv; ++e)
          finite_row = finite_row && std::isfinite(base.o.at(b, i, h, e)) && !std::isnan(ref.o_bound[ref.o_index(b, i, h, e)]);
        for (std::int64_t j = 0; j < c.lk; ++j) sees = sees || (finite_row && c.visible(b, h, i, j));
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const auto x = base.o.bits_at(b, i, h, e), y = out.o.bits_at(b, i, h, e);
          if (c.kv_head(h) != g0) others.exact(o_where(b, i, h, e) + " (query head of another KV head)", x, y, base.o.at(b, i, h, e), out.o.at(b, i, h, e));
          changed = changed || (x != y && !(std::isnan(base.o.at(b, i, h, e)) && std::isnan(out.o.at(b, i, h, e))));
        }
      }
    if (c.kv_head(h) == g0 && sees && !changed)
      mine.fail("perturbing KV head " + std::to_string(g0) + " left query head " + std::to_string(h) + " (h / G = " +
                std::to_string(c.kv_head(h)) + ") unchanged");
  }
  o.add("perturbing KV head " + std::to_string(g0) + ": other heads keep their bits", others);
  o.add("perturbing KV head " + std::to_string(g0) + ": its query heads change", mine);
  return o;
}

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
  for (int a : {1, -1}) {
    // Q * 2^a (or K * 2^a) with scale * 2^-a: every score is the same real
    // number, whether the scale is folded into Q, into K or applied last: same bits.
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
    // f32's normal floor and the largest far below its overflow.
    const auto row_in_range = [&](const extent& q, const extent& k) {
      if (scale == 0.0f || !std::isfinite(q.min) || !std::isfinite(k.min)) return true;
      const double floor = 0x1p-100, ceiling = 0x1p100;
      if (q.min * k.min * std::min(sc, 1.0) < floor || q.min * sc < floor || k.min * sc < floor || q.min * k.min < floor) return false;
      return !(q.max * k.max * static_cast<double>(c.d) * std::max(sc_max, 1.0) > ceiling || q.max * sc_max > ceiling || k.max * sc_max > ceiling);
    };
    const int ai = a == 1 ? 0 : 1;
    for (int which = 0; which < 2; ++which) {
      std::vector<char> ok(row_q.size(), 0);
      std::int64_t n_ok = 0;
      for (std::size_t r = 0; r < ok.size(); ++r) {
        ok[r] = row_sees[r] && row_in_range(row_q[r], row_k[r]) && (which == 0 ? row_q[r].exact[ai] : row_k[r].exact[ai]);
        n_ok += ok[r];
      }
      if (n_ok == 0) continue;
      const tensor& t = which == 0 ? c.q : c.k;
      attn_case p = c;
      (which == 0 ? p.q : p.k) = scaled(t, a, c.layout);
      p.scale = s2;
      const auto out = s.attend(p);
      if (run_failed(out, o, which == 0 ? "scaled Q" : "scaled K")) return o;
      comparison r;
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t h = 0; h < c.hq; ++h)
          for (std::int64_t i = 0; i < c.lq; ++i) {
            if (!ok[static_cast<std::size_t>((b * c.hq + h) * c.lq + i)]) continue;
            for (std::int64_t e = 0; e < c.dv; ++e)
              r.exact(o_where(b, i, h, e), base.o.bits_at(b, i, h, e), out.o.bits_at(b, i, h, e), base.o.at(b, i, h, e), out.o.at(b, i, h, e));
            if (!base.lse.empty() && !out.lse.empty()) {
              const float x = lse_of(base, c, c.lq, b, h, i), y = lse_of(out, c, c.lq, b, h, i);
              r.exact(lse_where(b, h, i), std::bit_cast<std::uint32_t>(x), std::bit_cast<std::uint32_t>(y), x, y);
            }
          }
      o.add(std::string(which == 0 ? "Q" : "K") + " * 2^" + std::to_string(a) + " with scale * 2^" + std::to_string(-a) + " (" +
                std::to_string(n_ok) + " of " + std::to_string(ok.size()) + " rows in range)",
            r);
      qk_judged = true;
    }
    // V * 2^a scales O by 2^a exactly and leaves LSE's bits alone.
    if (tensor_scales_exactly(c.v, a, kv_used)) {
      attn_case p = c;
      p.v = scaled(c.v, a, c.layout);
      const auto out = s.attend(p);
      if (run_failed(out, o, "scaled V")) return o;
      comparison r;
      for (std::int64_t b = 0; b < c.b; ++b)
        for (std::int64_t i = 0; i < c.lq; ++i)
          for (std::int64_t h = 0; h < c.hq; ++h) {
            for (std::int64_t e = 0; e < c.dv; ++e) {
              const double x = base.o.at(b, i, h, e);
              // A zero or subnormal output was rounded with an absolute error:
              // the scaled truth may round to a different multiple (fuzz finding E).
              if (x == 0 || !scales_exactly(c.type, x, a)) continue;
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
              const double bound = r3.o_bound[k] + 3 * r0.o_bound[k] + delta[static_cast<std::size_t>((b * c.hkv + c.kv_head(h)) * c.dv + e)];
              if (!std::isfinite(bound)) {  // a non-finite input or a possible overflow: nothing to judge
                ++r.unbounded;
                continue;
              }
              r.element(o_where(b, i, h, e) + " (V * 3 vs 3 O)", 3 * base.o.at(b, i, h, e), out.o.at(b, i, h, e), bound);
            }
      o.add("V * 3 gives 3 O within the bounds", r);
    }
  }
  // A different scale must change the output wherever the true outputs of the
  // two scales are further apart than both bounds together.
  attn_case p = c;
  p.scale = scale * 1.5f;
  const auto out = s.attend(p);
  if (run_failed(out, o, "scale * 1.5")) return o;
  const oracle_result r1 = fast_bound(s, p);
  comparison moved;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const auto k = r0.o_index(b, i, h, e);
          if (!(std::fabs(r1.o[k] - r0.o[k]) > r0.o_bound[k] + r1.o_bound[k])) continue;
          ++moved.compared;
          if (base.o.bits_at(b, i, h, e) == out.o.bits_at(b, i, h, e))
            moved.fail("scale * 1.5 left " + o_where(b, i, h, e) + " at " + std::to_string(base.o.at(b, i, h, e)) +
                       " though the true value moves from " + std::to_string(r0.o[k]) + " to " + std::to_string(r1.o[k]));
        }
  o.add("changing the scale changes the output", moved);
  return o;
}

law_outcome constant_score_shift_changes_nothing(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto base = s.attend(c);
  if (run_failed(base, o, "base run")) return o;
  // An extra head dimension: Q[..., D] = t (per row), K[..., D] = 1 adds scale * t to every score of the row.
  law_rng rng(c, 0x5f1f7);
  attn_case p = c;
  p.d = c.d + 1;
  p.scale = c.effective_scale();
  std::vector<double> shift(static_cast<std::size_t>(c.b * c.lq * c.hq));
  // Half the cases: small dyadic shifts in [-8, 8] (exact in every type) with
  // K[..., D] = 1. The other half: shifts of 1e3..1e4 in score units, far
  // past exp's range (a kernel without the max shift overflows or
  // underflows): K[..., D] = kappa, a power of two, Q[..., D] = t with 4
  // significant bits, so scale * kappa * t is exact and both are normal.
  double kappa = 1.0;
  const double sc = std::fabs(static_cast<double>(c.effective_scale()));
  const bool big = rng.below(2) == 1 && sc > 0;
  const double tiny = c.type == dtype::f16 ? 0x1p-14 : 0x1p-126, top = largest_finite(c.type) / 2;
  if (big) kappa = std::clamp(std::exp2(std::round(std::log2(std::sqrt(3e3 / sc)))), c.type == dtype::f16 ? 0x1p-14 : 0x1p-100,
                              c.type == dtype::f16 ? 0x1p14 : 0x1p100);
  std::int64_t big_rows = 0;
  for (auto& t : shift) {
    t = static_cast<double>(rng.below(33) - 16) / 2;
    if (!big) continue;
    const double target = (1e3 + 9e3 * static_cast<double>(rng.below(1024)) / 1024.0) * (rng.below(2) ? -1 : 1);
    const double want = target / (sc * kappa);
    const int e = std::ilogb(want);
    const double q = std::ldexp(std::round(std::ldexp(want, 3 - e)), e - 3);  // 4 significant bits
    if (std::fabs(q) >= tiny && std::fabs(q) <= top) t = q, ++big_rows;
  }
  p.q = remake(c.type, {c.b, c.lq, c.hq, c.d + 1}, c.layout, [&](auto b, auto i, auto h, auto x) {
    return x < c.d ? c.q.bits_at(b, i, h, x) : encode(c.type, shift[static_cast<std::size_t>((b * c.lq + i) * c.hq + h)]);
  });
  p.k = remake(c.type, {c.b, c.lk, c.hkv, c.d + 1}, c.layout,
               [&](auto b, auto j, auto g, auto x) { return x < c.d ? c.k.bits_at(b, j, g, x) : encode(c.type, kappa); });
  const auto out = s.attend(p);
  if (run_failed(out, o, "shifted run")) return o;
  subject_output a = base, b = out;
  a.lse.clear(), b.lse.clear();  // LSE moves by the shift; O must not
  o.add(std::string("scores shifted by scale * t per row") + (big_rows ? " (" + std::to_string(big_rows) + " rows by 1e3..1e4)" : ""),
        compare_within_bounds(c, a, fast_bound(s, c), b, fast_bound(s, p)));
  return o;
}

void prepare_permutation(attn_case& c, const subject&) {
  c.causal = false;  // permuting keys or queries is only a symmetry without order-dependent masks
  c.mask_shape = {};
  c.mask.clear();
  c.lk = std::max<std::int64_t>(c.lk, 2);  // one key has no order to permute
}

law_outcome permutations_commute(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto base = s.attend(c);
  if (run_failed(base, o, "base run")) return o;
  const oracle_result ref = fast_bound(s, c);
  law_rng rng(c, 0x9e7);
  bool keys_move = false;
  for (std::int64_t b = 0; b < c.b; ++b) keys_move = keys_move || c.valid_keys(b) >= 2;
  if (!keys_move && c.lq == 1 && c.b == 1 && c.hkv == 1) o.nothing_to_judge("a single key, query, batch element and KV head");
  // Keys with their values, within each sequence's valid keys.
  {
    attn_case p = c;
    for (std::int64_t b = 0; b < c.b; ++b) {
      const auto perm = permutation(rng, c.valid_keys(b));
      for (std::int64_t j = 0; j < static_cast<std::int64_t>(perm.size()); ++j)
        for (std::int64_t g = 0; g < c.hkv; ++g) {
          for (std::int64_t x = 0; x < c.d; ++x) p.k.set_bits(b, j, g, x, c.k.bits_at(b, perm[static_cast<std::size_t>(j)], g, x));
          for (std::int64_t x = 0; x < c.dv; ++x) p.v.set_bits(b, j, g, x, c.v.bits_at(b, perm[static_cast<std::size_t>(j)], g, x));
        }
    }
    const auto out = s.attend(p);
    if (run_failed(out, o, "permuted keys")) return o;
    o.add("keys permuted with their values", compare_within_bounds(c, base, ref, out, fast_bound(s, p)));
  }
  // Queries, batch elements and KV heads (with their query heads): the output is permuted the same way.
  const auto qp = permutation(rng, c.lq), bp = permutation(rng, c.b), gp = permutation(rng, c.hkv);
  const std::int64_t G = c.group();
  auto head = [&](std::int64_t h) { return gp[static_cast<std::size_t>(h / G)] * G + h % G; };
  attn_case p = c;
  p.q = remake(c.type, c.q.shape, c.layout, [&](auto b, auto i, auto h, auto x) {
    return c.q.bits_at(bp[static_cast<std::size_t>(b)], qp[static_cast<std::size_t>(i)], head(h), x);
  });
  p.k = remake(c.type, c.k.shape, c.layout, [&](auto b, auto j, auto g, auto x) { return c.k.bits_at(bp[static_cast<std::size_t>(b)], j, gp[static_cast<std::size_t>(g)], x); });
  p.v = remake(c.type, c.v.shape, c.layout, [&](auto b, auto j, auto g, auto x) { return c.v.bits_at(bp[static_cast<std::size_t>(b)], j, gp[static_cast<std::size_t>(g)], x); });
  if (!c.key_len.empty())
    for (std::int64_t b = 0; b < c.b; ++b) p.key_len[static_cast<std::size_t>(b)] = c.key_len[static_cast<std::size_t>(bp[static_cast<std::size_t>(b)])];
  const auto out = s.attend(p);
  if (run_failed(out, o, "permuted queries, batch and heads")) return o;
  // Undo the permutation on the output, then compare with the base run.
  subject_output back = out;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h) {
        const std::int64_t ob = bp[static_cast<std::size_t>(b)], oi = qp[static_cast<std::size_t>(i)], oh = head(h);
        for (std::int64_t e = 0; e < c.dv; ++e) back.o.set_bits(ob, oi, oh, e, out.o.bits_at(b, i, h, e));
        if (!out.lse.empty())
          back.lse[static_cast<std::size_t>((ob * c.hq + oh) * c.lq + oi)] = out.lse[static_cast<std::size_t>((b * c.hq + h) * c.lq + i)];
      }
  o.add("queries, batch elements and KV heads permuted",
        s.claims(ATTNCHECK_CLAIM_BATCH) ? compare_bitwise(c, base, back) : compare_within_bounds(c, base, ref, back, ref));
  return o;
}

}  // namespace attncheck::laws
