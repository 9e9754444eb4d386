// The softmax law: with V = identity the outputs are the weights, which form
// a distribution (>= 0, masked exactly 0, summing to 1).
#include <algorithm>
#include <bit>
#include <limits>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

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
        // A row that sees no key, where the subject declares its own values: judged against the oracle above.
        if (!any && !out.empty_rows.is_default()) continue;
        for (std::int64_t j = 0; j < c.lk; ++j) bound += ref.o_bound[ref.o_index(b, i, h, j)];
        // A non-finite visible input (NaN bound) or a possible overflow (+inf): the row may be anything non-finite.
        if (!std::isfinite(bound)) continue;
        for (std::int64_t j = 0; j < c.lk; ++j) {
          const double w = out.o.at(b, i, h, j);
          const auto where = o_where(b, i, h, j);
          if (std::isnan(w) || w < 0) zeros.fail("weight " + where.text + " = " + std::to_string(w) + " is negative or NaN");
          if (const char* hidden = c.hidden_by(b, h, i, j))
            zeros.element(where + " (key " + std::to_string(j) + " " + hidden + ": its weight must be exactly 0)", 0.0, w, 0.0);
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
        const bool any = row_sees_any(c, b, h, i);
        const double want = any ? 1.0 : 0.0;
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const auto k = ref1.o_index(b, i, h, e);
          if (!any && !out1.empty_rows.is_default())
            one.empty_row_o(o_where(b, i, h, e), out1.o.at(b, i, h, e), out1.empty_rows);
          else if (std::isnan(ref1.o_bound[k]))
            one.without_bound(
                o_where(b, i, h, e), ref1.o[k], out1.o.at(b, i, h, e),
                every_visible_score_is_minus_inf(ones, b, h, i) ? empty_row_o_value(out1.empty_rows) : std::nan(""));
          else
            one.element(o_where(b, i, h, e), want, out1.o.at(b, i, h, e), ref1.o_bound[k]);
        }
      }
  o.add("V = ones", one);
  return o;
}

}  // namespace attncheck::laws
