// The window laws (docs/spec.md, "Sliding window" and "Chunked local
// attention"): keys outside a row's window or chunk never matter, with a
// huge-logit canary one position past each edge, and the degenerate windows
// equal what they degenerate to (a window wider than every distance, the
// causal window (-1, 0), a chunk longer than the sequence).
#include <algorithm>
#include <cmath>
#include <limits>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The window and chunk rules alone (not padding, causal, mask or bias).
bool in_window(const attn_case& c, std::int64_t bi, std::int64_t i, std::int64_t j) {
  const score_variants& w = c.variants;
  const std::int64_t p = c.position(bi, i);
  if (w.window_left >= 0 && j < p - w.window_left) return false;
  if (w.window_right >= 0 && j > p + w.window_right) return false;
  if (w.chunk > 0 && floor_div(j, w.chunk) != floor_div(p, w.chunk)) return false;
  return true;
}

}  // namespace

// A window or a chunk on every case, drawn from the case's seed where the
// generator left both off: left anywhere in [0, Lk), right unbounded, 0 or
// anywhere; a chunk of 1..Lk.
void prepare_outside(attn_case& c, const subject& s) {
  score_variants& w = c.variants;
  law_rng rng(c, 0x3a11d0);
  // A window or chunk that hides nothing of Lk keys is narrowed (every row
  // then has keys outside it, unless its position lies far from them).
  if (w.has_window() && (w.window_left < 0 || w.window_left >= c.lk) && (w.window_right < 0 || w.window_right >= c.lk))
    w.window_left = rng.below(c.lk);
  if (w.has_chunk() && w.chunk >= c.lk) w.chunk = 1 + rng.below(c.lk);
  if (w.has_window() || w.has_chunk()) return;
  if (s.features_v3() & ATTNCHECK_FEATURE3_WINDOW) {
    w.window_left = rng.below(c.lk);
    const std::int64_t r = rng.below(3);
    w.window_right = r == 0 ? -1 : r == 1 ? 0 : rng.below(c.lk);
  } else {
    w.chunk = 1 + rng.below(c.lk);
  }
}

law_outcome outside_keys_never_matter(const subject& s, const attn_case& c) {
  law_outcome o;
  if (!c.variants.has_window() && !c.variants.has_chunk()) return o.nothing_to_judge("no window and no chunk");
  law_rng rng(c, 0x0c7a11);
  const score_variants& w = c.variants;
  // One target row per batch element: every key outside its window or chunk
  // is perturbed, the keys one past each edge become canaries (a score about
  // 30 above the row's through an extra head dimension only the target row's
  // query reads, and a large value), the others garbage or NaN.
  std::vector<std::int64_t> target(static_cast<std::size_t>(c.b));
  for (auto& t : target) t = rng.below(c.lq);
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  std::vector<std::uint8_t> perturbed(n(c.b * c.lk), 0), canary(n(c.b * c.lk), 0);
  std::int64_t n_perturbed = 0, n_canaries = 0;
  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    const std::int64_t i = target[n(bi)], p = c.position(bi, i);
    for (std::int64_t j = 0; j < c.lk; ++j)
      if (!in_window(c, bi, i, j)) perturbed[n(bi * c.lk + j)] = 1, ++n_perturbed;
    std::vector<std::int64_t> edges;
    if (w.window_left >= 0) edges.push_back(p - w.window_left - 1);
    if (w.window_right >= 0) edges.push_back(p + w.window_right + 1);
    if (w.chunk > 0) edges.push_back(floor_div(p, w.chunk) * w.chunk - 1), edges.push_back((floor_div(p, w.chunk) + 1) * w.chunk);
    for (std::int64_t j : edges)
      if (j >= 0 && j < c.lk && perturbed[n(bi * c.lk + j)] && !canary[n(bi * c.lk + j)])
        canary[n(bi * c.lk + j)] = 1, ++n_canaries;
  }
  if (n_perturbed == 0) return o.nothing_to_judge("every key lies inside the target rows' windows");
  const double sc = static_cast<double>(c.effective_scale());
  const double lo = c.type == dtype::f16 ? 0x1p-14 : 0x1p-100, hi = c.type == dtype::f16 ? 0x1p14 : 0x1p100;
  const double kappa =
      sc == 0 ? 0.0 : std::copysign(std::clamp(std::exp2(std::round(std::log2(30 / std::fabs(sc)))), lo, hi), sc);
  const bool nan_garbage = rng.below(2) == 1;
  const double big_v = 4096;  // exact in every type
  std::vector<double> garbage(n(c.b * c.lk * c.hkv * (c.d + c.dv)));
  for (auto& g : garbage) g = nan_garbage ? std::nan("") : static_cast<double>(rng.below(2001) - 1000) / 8;
  const auto gidx = [&](std::int64_t bi, std::int64_t j, std::int64_t g, std::int64_t x) {
    return n(((bi * c.lk + j) * c.hkv + g) * (c.d + c.dv) + x);
  };
  attn_case base = c, pert = c;
  base.d = pert.d = c.d + 1;
  base.scale = pert.scale = c.effective_scale();
  base.q = remake(c.type, {c.b, c.lq, c.hq, c.d + 1}, c.layout, [&](auto bi, auto i, auto h, auto x) {
    return x < c.d ? c.q.bits_at(bi, i, h, x) : encode(c.type, i == target[n(bi)] ? 1.0 : 0.0);
  });
  pert.q = base.q;
  base.k = remake(c.type, {c.b, c.lk, c.hkv, c.d + 1}, c.layout,
                  [&](auto bi, auto j, auto g, auto x) { return x < c.d ? c.k.bits_at(bi, j, g, x) : encode(c.type, 0.0); });
  pert.k = remake(c.type, {c.b, c.lk, c.hkv, c.d + 1}, c.layout, [&](auto bi, auto j, auto g, auto x) {
    const std::size_t at = n(bi * c.lk + j);
    if (canary[at]) return x < c.d ? c.k.bits_at(bi, j, g, x) : encode(c.type, kappa);
    if (perturbed[at]) return x < c.d ? encode(c.type, garbage[gidx(bi, j, g, x)]) : encode(c.type, 0.0);
    return x < c.d ? c.k.bits_at(bi, j, g, x) : encode(c.type, 0.0);
  });
  pert.v = remake(c.type, {c.b, c.lk, c.hkv, c.dv}, c.layout, [&](auto bi, auto j, auto g, auto e) {
    const std::size_t at = n(bi * c.lk + j);
    if (canary[at]) return encode(c.type, (e % 2 == 0) ? big_v : -big_v);
    if (perturbed[at]) return encode(c.type, garbage[gidx(bi, j, g, c.d + e)]);
    return c.v.bits_at(bi, j, g, e);
  });
  const auto a = s.attend(base), b = s.attend(pert);
  if (run_failed(a, o, "base run") || run_failed(b, o, "outside keys perturbed")) return o;
  // Rows that see no perturbed key (the target rows always) must not move.
  std::vector<std::uint8_t> keep(n(c.b * c.hq * c.lq), 1);
  bool any_row = false;
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        bool sees = false;
        for (std::int64_t j = 0; j < c.lk && !sees; ++j) sees = perturbed[n(bi * c.lk + j)] && c.visible(bi, h, i, j);
        keep[n((bi * c.hq + h) * c.lq + i)] = !sees;
        any_row = any_row || (!sees && row_sees_any(c, bi, h, i));
      }
  if (!any_row) o.nothing_to_judge("no row that sees a key is clear of the perturbed keys");
  within_bounds_options opt;
  opt.keep = [&](std::int64_t bi, std::int64_t h, std::int64_t i) { return keep[n((bi * c.hq + h) * c.lq + i)] != 0; };
  o.add(std::to_string(n_perturbed) + " keys outside the target rows' windows perturbed (" + std::to_string(n_canaries) +
            " canaries one past an edge" + (nan_garbage ? ", the rest NaN)" : ", the rest garbage)"),
        compare_within_own_bounds(s, base, a, pert, b, opt));
  return o;
}

// One of: a window wider than every distance equals none; the window
// (-1, 0) equals the causal rule; a chunk of at least Lk + Lq equals none on
// rows with p >= 0. Each side keeps every other variant of the case.
law_outcome degenerate_windows_equal_plain(const subject& s, const attn_case& c) {
  law_outcome o;
  const std::uint32_t f = s.features_v3();
  std::vector<int> kinds;
  if (f & ATTNCHECK_FEATURE3_WINDOW) kinds.push_back(0);
  if ((f & ATTNCHECK_FEATURE3_WINDOW) && s.has(ATTNCHECK_FEATURE_CAUSAL)) kinds.push_back(1);
  if (f & ATTNCHECK_FEATURE3_CHUNK) kinds.push_back(2);
  if (kinds.empty()) return o.nothing_to_judge("subject does not declare window or chunk");
  law_rng rng(c, 0xde9e11);
  const int kind = kinds[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(kinds.size())))];
  attn_case a = c, b = c;
  const std::int64_t wide = c.lk + c.lq + rng.below(3);
  std::string what;
  within_bounds_options opt;
  switch (kind) {
    case 0: {
      const std::int64_t side = rng.below(3);
      a.variants.window_left = side == 1 ? -1 : wide;
      a.variants.window_right = side == 2 ? -1 : wide;
      b.variants.window_left = b.variants.window_right = -1;
      what = "window [" + std::to_string(a.variants.window_left) + "," + std::to_string(a.variants.window_right) +
             "] against no window";
      break;
    }
    case 1:
      a.causal = false;
      a.variants.window_left = -1, a.variants.window_right = 0;
      b.causal = true;
      b.variants.window_left = b.variants.window_right = -1;
      what = "window [-1,0] against the causal rule";
      break;
    default:
      a.variants.chunk = wide;
      b.variants.chunk = 0;
      what = "chunk " + std::to_string(wide) + " against no chunk (rows with p >= 0)";
      opt.keep = [&c](std::int64_t bi, std::int64_t, std::int64_t i) { return c.position(bi, i) >= 0; };
      break;
  }
  add_runs_within_bounds(o, s, a, "degenerate", b, "plain", what, opt);
  return o;
}

std::string declares_window_or_chunk(const subject& s) {
  return (s.features_v3() & (ATTNCHECK_FEATURE3_WINDOW | ATTNCHECK_FEATURE3_CHUNK)) ? ""
                                                                                    : "subject does not declare window or chunk";
}

}  // namespace attncheck::laws
