// Laws on the shape of the softmax: weights form a distribution, outputs stay
// in the convex hull of the visible values, fully masked rows are zero.
#include <algorithm>
#include <bit>
#include <limits>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// Rows that see at least one key.
bool row_sees_any(const attn_case& c, std::int64_t b, std::int64_t h, std::int64_t i) {
  for (std::int64_t j = 0; j < c.lk; ++j)
    if (c.visible(b, h, i, j)) return true;
  return false;
}

attn_case with_values(const attn_case& c, std::int64_t dv,
                      const std::function<double(std::int64_t b, std::int64_t j, std::int64_t g, std::int64_t e)>& v) {
  attn_case r = c;
  r.dv = dv;
  r.v = remake(c.type, {c.b, c.lk, c.hkv, dv}, c.layout,
               [&](auto b, auto j, auto g, auto e) { return encode(c.type, v(b, j, g, e)); });
  return r;
}

}  // namespace

void prepare_distribution(attn_case& c, const subject&) {
  // V = identity needs Dv = Lk; keep Lk small enough for a cheap case.
  constexpr std::int64_t max_lk = 24;
  if (c.lk > max_lk) {
    c.lk = max_lk;
    for (auto& n : c.key_len) n = std::min(n, max_lk);
    if (c.has_mask() && c.mask_shape[3] != 1) c.mask_shape[3] = max_lk;
  }
  c.dv = c.lk;
}

law_outcome weights_form_a_distribution(const subject& s, const attn_case& c) {
  law_outcome o;
  // With V = identity (Dv = Lk), output row i of head h IS the weight row P[b,h,i,:]:
  // each weight against the oracle's P within its bound, masked weights exactly 0, sums 1.
  const attn_case id = with_values(c, c.lk, [](auto, auto j, auto, auto e) { return j == e ? 1.0 : 0.0; });
  const auto out = s.attend(id);
  if (run_failed(out, o, "V = identity")) return o;
  const oracle_result ref = oracle_of(s, id);
  o.add("V = identity: each weight against the oracle's P", compare_with_reference(id, out, ref));
  comparison sums, zeros;
  bool any_row = false;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        double sum = 0, bound = 0;
        const bool any = row_sees_any(c, b, h, i);
        any_row = any_row || any;
        for (std::int64_t j = 0; j < c.lk; ++j) bound += ref.o_bound[ref.o_index(b, i, h, j)];
        // A non-finite visible input (NaN bound) or a possible overflow (+inf): the row may be anything non-finite.
        if (!std::isfinite(bound)) continue;
        for (std::int64_t j = 0; j < c.lk; ++j) {
          const double w = out.o.at(b, i, h, j);
          const auto where = o_where(b, i, h, j);
          if (std::isnan(w) || w < 0) zeros.fail("weight " + where + " = " + std::to_string(w) + " is negative or NaN");
          if (!c.visible(b, h, i, j)) zeros.element(where + " (key not visible: weight must be exactly 0)", 0.0, w, 0.0);
          sum += w;
        }
        sums.element("sum_j P[b=" + std::to_string(b) + ",h=" + std::to_string(h) + ",i=" + std::to_string(i) + ",:]",
                     any ? 1.0 : 0.0, sum, bound);
      }
  if (!any_row) o.nothing_to_judge("no row sees a key");
  o.add("V = identity: masked weights", zeros);
  o.add("V = identity: weights sum to 1", sums);
  // With V = ones every visible row is exactly 1 up to the bound.
  const attn_case ones = with_values(c, c.dv, [](auto, auto, auto, auto) { return 1.0; });
  const auto out1 = s.attend(ones);
  if (run_failed(out1, o, "V = ones")) return o;
  const oracle_result ref1 = fast_bound(s, ones);
  comparison one;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const double want = row_sees_any(c, b, h, i) ? 1.0 : 0.0;
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const auto k = ref1.o_index(b, i, h, e);
          if (std::isnan(ref1.o_bound[k]))
            one.without_bound(o_where(b, i, h, e), ref1.o[k], out1.o.at(b, i, h, e),
                              every_visible_score_is_minus_inf(ones, b, h, i) ? 0.0 : std::nan(""));
          else
            one.element(o_where(b, i, h, e), want, out1.o.at(b, i, h, e), ref1.o_bound[k]);
        }
      }
  o.add("V = ones", one);
  return o;
}

law_outcome output_in_convex_hull(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto out = s.attend(c);
  if (run_failed(out, o, "run")) return o;
  const oracle_result ref = fast_bound(s, c);
  comparison hull, single;
  hull.overflow_threshold = overflow_threshold(c.type);
  // Elements outside the bound's domain: NaN (a non-finite visible input) by
  // the NaN rule, +inf (a possible overflow) not judged.
  const auto outside_domain = [&](comparison& r, const attn_case& cc, const oracle_result& rr, const std::string& where,
                                  std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t e, double got) {
    const auto k = rr.o_index(b, i, h, e);
    if (std::isfinite(rr.o_bound[k]) && !std::isnan(rr.o[k])) return false;
    if (std::isinf(rr.o_bound[k])) ++r.unbounded;
    else r.without_bound(where, rr.o[k], got, every_visible_score_is_minus_inf(cc, b, h, i) ? 0.0 : std::nan(""));
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
            if (c.visible(b, h, i, j)) lo = std::min(lo, c.v.at(b, j, g, e)), hi = std::max(hi, c.v.at(b, j, g, e));
          const double bound = ref.o_bound[ref.o_index(b, i, h, e)];
          if (seen == 1) {  // p = exp(0) / exp(0) = 1 exactly: O is V, bit for bit in value
            single.element(where + " (one visible key: O must be V exactly)", c.v.at(b, last, g, e), got, 0.0);
          } else if (std::isnan(got)) {
            hull.fail("NaN at " + where);
          } else {
            hull.element(where + (got < lo ? " (below min visible V)" : got > hi ? " (above max visible V)" : ""),
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
            if (eq.visible(b, h, i, j)) sum += eq.v.at(b, j, eq.kv_head(h), e), ++n;
          if (n == 0) continue;
          if (outside_domain(mean, eq, refq, o_where(b, i, h, e), b, i, h, e, outq.o.at(b, i, h, e))) continue;
          // Exact enough: the double mean errs by ~n*2^-53 relative, far below any f32 bound.
          mean.element(o_where(b, i, h, e), sum / static_cast<double>(n), outq.o.at(b, i, h, e),
                       refq.o_bound[refq.o_index(b, i, h, e)]);
        }
  o.add("equal keys give mean(V)", mean);
  return o;
}

void prepare_fully_masked(attn_case& c, const subject& s) {
  if (s.has(ATTNCHECK_FEATURE_PADDING)) {
    if (c.key_len.empty()) c.key_len.assign(static_cast<std::size_t>(c.b), c.lk);
    c.key_len[static_cast<std::size_t>(c.seed % static_cast<std::uint64_t>(c.b))] = 0;  // an empty cache
  } else if (s.has(ATTNCHECK_FEATURE_CAUSAL)) {
    c.causal = true;
    c.lq = c.lk + 1 + static_cast<std::int64_t>(c.seed % 3);  // first rows precede every key
    if (c.has_mask() && c.mask_shape[2] != 1) c.mask_shape[2] = c.lq;
  } else if (s.has(ATTNCHECK_FEATURE_MASK)) {
    c.mask_shape = {c.b, c.hq, c.lq, c.lk};  // materialize draws some all-false rows
  }
}

law_outcome fully_masked_rows_are_zero(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto out = s.attend(c);
  if (run_failed(out, o, "run")) return o;
  comparison z;
  bool any_empty = false;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        if (row_sees_any(c, b, h, i)) continue;
        any_empty = true;
        for (std::int64_t e = 0; e < c.dv; ++e) z.element(o_where(b, i, h, e) + " (row sees no key)", 0.0, out.o.at(b, i, h, e), 0.0);
        const float l = lse_of(out, c, c.lq, b, h, i);
        if (!out.lse.empty() && !(std::isinf(l) && l < 0))
          z.fail(lse_where(b, h, i) + " = " + std::to_string(l) + " for a row that sees no key (must be -inf)");
      }
  if (!any_empty) o.nothing_to_judge("no row is fully masked");
  o.add("fully masked rows", z);
  return o;
}

}  // namespace attncheck::laws
