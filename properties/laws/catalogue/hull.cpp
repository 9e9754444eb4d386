// The hull law: every output lies in the convex hull of the visible values.
#include <algorithm>
#include <bit>
#include <limits>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

law_outcome output_in_convex_hull(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto out = s.attend(c);
  if (run_failed(out, o, "run")) return o;
  const oracle_result ref = fast_bound(s, c);
  comparison hull, single;
  hull.overflow_threshold = overflow_threshold(c.type);
  // Elements outside the bound's domain: NaN (a non-finite visible input) by
  // the NaN rule, +inf (a possible overflow) not judged.
  const auto outside_domain = [&](comparison& r, const attn_case& cc, const oracle_result& rr, const element_where& where,
                                  std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t e, double got) {
    const auto k = rr.o_index(b, i, h, e);
    if (std::isfinite(rr.o_bound[k]) && !std::isnan(rr.o[k])) return false;
    if (std::isinf(rr.o_bound[k]))
      ++r.unbounded;
    else
      r.without_bound(where, rr.o[k], got, every_visible_score_is_minus_inf(cc, b, h, i) ? 0.0 : std::nan(""));
    return true;
  };
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::int64_t g = c.kv_head(h);
        std::int64_t seen = 0, last = -1;
        for (std::int64_t j = 0; j < c.lk; ++j)
          if (c.visible(b, h, i, j)) ++seen, last = j;
        if (seen == 0) continue;
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const double got = out.o.at(b, i, h, e);
          const auto where = o_where(b, i, h, e);
          if (outside_domain(seen == 1 ? single : hull, c, ref, where, b, i, h, e, got)) continue;
          double lo = std::numeric_limits<double>::infinity(), hi = -lo;
          for (std::int64_t j = 0; j < c.lk; ++j)
            if (c.visible(b, h, i, j)) lo = std::min(lo, c.v_value(b, j, g, e)), hi = std::max(hi, c.v_value(b, j, g, e));
          const double bound = ref.o_bound[ref.o_index(b, i, h, e)];
          if (seen == 1) {  // the true P is 1 and O is V; within the bound, as docs/spec.md asks no more
            single.element(where + " (one visible key: O is V)", c.v_value(b, last, g, e), got, bound);
          } else if (std::isnan(got)) {
            hull.fail("NaN at " + where.text);
          } else {
            hull.element(where + (got < lo   ? " (below min visible V)"
                                  : got > hi ? " (above max visible V)"
                                             : ""),
                         std::clamp(got, lo, hi), got, bound);
          }
        }
      }
  o.add("single visible key", single);
  o.add("within [min V, max V]", hull);
  // All keys equal: uniform weights, O = mean of the visible V.
  // Copy a key that some row sees (slots nobody sees may hold poison).
  attn_case eq = c;
  const slot_usage used = used_slots(c);
  std::vector<std::int64_t> source(static_cast<std::size_t>(c.b * c.hkv), 0);
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t g = 0; g < c.hkv; ++g)
      for (std::int64_t j = c.lk - 1; j >= 0; --j)
        if (used.key(c, b, j, g)) source[static_cast<std::size_t>(b * c.hkv + g)] = j;
  eq.k = remake(c.type, c.k.shape, c.layout, [&](auto b, auto j, auto g, auto x) {
    return used.key(c, b, j, g) ? c.k.bits_at(b, source[static_cast<std::size_t>(b * c.hkv + g)], g, x) : c.k.bits_at(b, j, g, x);
  });
  const auto outq = s.attend(eq);
  if (run_failed(outq, o, "equal keys")) return o;
  const oracle_result refq = fast_bound(s, eq);
  comparison mean;
  mean.overflow_threshold = overflow_threshold(c.type);
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i)
        for (std::int64_t e = 0; e < c.dv; ++e) {
          double sum = 0;
          std::int64_t n = 0;
          for (std::int64_t j = 0; j < c.lk; ++j)
            if (eq.visible(b, h, i, j)) sum += eq.v_value(b, j, eq.kv_head(h), e), ++n;
          if (n == 0) continue;
          if (outside_domain(mean, eq, refq, o_where(b, i, h, e), b, i, h, e, outq.o.at(b, i, h, e))) continue;
          // Exact enough: the double mean errs by ~n*2^-53 relative, far below any f32 bound.
          mean.element(o_where(b, i, h, e), sum / static_cast<double>(n), outq.o.at(b, i, h, e),
                       refq.o_bound[refq.o_index(b, i, h, e)]);
        }
  o.add("equal keys give mean(V)", mean);
  return o;
}

}  // namespace attncheck::laws
