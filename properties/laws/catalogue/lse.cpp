// The LSE law: attention over two halves of the keys, merged by their LSE,
// equals attention over all of them (the split-KV / ring-attention identity).
#include <algorithm>
#include <cmath>
#include <limits>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

// The positional variants (window, chunk, ALiBi, bias) need each part at
// the whole case's positions: the parts are then the whole case with a
// boolean mask over one side of the split, so only a subject with masks
// keeps them; softcap and sinks travel with sliced parts too.
constexpr std::uint32_t positional =
    ATTNCHECK_FEATURE3_WINDOW | ATTNCHECK_FEATURE3_CHUNK | ATTNCHECK_FEATURE3_ALIBI | ATTNCHECK_FEATURE3_BIAS;

void prepare_split(attn_case& c, const subject& s) {
  c.causal = false;
  c.mask_shape = {};
  c.mask.clear();
  c.key_len.clear();
  if (c.lk < 2) c.lk = 2;
  if (c.variants.has_bias() && c.variants.bias_shape[3] != 1) c.variants.bias_shape[3] = c.lk;
  if (!s.has(ATTNCHECK_FEATURE_MASK)) c = without_variant(c, positional);
}

law_outcome lse_merges_split_keys(const subject& s, const attn_case& c) {
  law_outcome o;
  const bool masked_parts = (variants_of(c) & positional) != 0;
  if (c.lk < 2 || c.causal || c.has_mask() || c.has_padding() || (masked_parts && !s.has(ATTNCHECK_FEATURE_MASK))) {
    o.fail("case does not fit this law (needs lk >= 2, no masks, positional variants only with a mask): " + to_line(c));
    return o;
  }
  law_rng rng(c, 0x15e);
  const std::int64_t split = 1 + rng.below(c.lk - 1);
  // The sink joins the denominator once: the first part carries it, the second not.
  auto part = [&](std::int64_t from, std::int64_t n) {
    attn_case p = from == 0 ? c : without_variant(c, ATTNCHECK_FEATURE3_SINKS);
    if (masked_parts) {  // the whole case, keys of the other side hidden by the mask
      p.mask_shape = {1, 1, 1, c.lk};
      p.mask.assign(static_cast<std::size_t>(c.lk), 0);
      for (std::int64_t j = from; j < from + n; ++j) p.mask[static_cast<std::size_t>(j)] = 1;
      return p;
    }
    p.lk = n;
    p.k = remake(c.type, {c.b, n, c.hkv, c.d}, c.layout,
                 [&](auto b, auto j, auto g, auto x) { return c.k.bits_at(b, from + j, g, x); });
    p.v = remake(c.type, {c.b, n, c.hkv, c.dv}, c.layout,
                 [&](auto b, auto j, auto g, auto x) { return c.v.bits_at(b, from + j, g, x); });
    return p;
  };
  const attn_case a = part(0, split), b = part(split, c.lk - split);
  const auto whole = s.attend(c), oa = s.attend(a), ob = s.attend(b);
  if (run_failed(whole, o, "all keys") || run_failed(oa, o, "first keys") || run_failed(ob, o, "last keys")) return o;
  const oracle_result rw = fast_bound(s, c), ra = fast_bound(s, a), rb = fast_bound(s, b);
  comparison r, rl;
  r.overflow_threshold = overflow_threshold(c.type);
  rl.overflow_threshold = overflow_threshold(dtype::f32);  // LSE is f32 whatever O's type
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const double la = lse_of(oa, c, c.lq, bi, h, i), lb = lse_of(ob, c, c.lq, bi, h, i);
        const double m = std::max(la, lb);
        constexpr double minus_inf = -std::numeric_limits<double>::infinity();
        if (ra.lse[ra.lse_index(bi, h, i)] == minus_inf && rb.lse[rb.lse_index(bi, h, i)] == minus_inf &&
            (m == minus_inf || !whole.empty_rows.is_default())) {
          // Neither part sees a key (a window, chunk or -inf bias): nor does the whole, which holds the
          // empty row's values exactly (the contract's, or those the subject declares).
          if (!whole.empty_rows.is_default()) {
            for (std::int64_t e = 0; e < c.dv; ++e)
              r.empty_row_o(o_where(bi, i, h, e) + " (no part sees a key)", whole.o.at(bi, i, h, e), whole.empty_rows);
            rl.empty_row_lse(lse_where(bi, h, i) + " (no part sees a key)", lse_of(whole, c, c.lq, bi, h, i), whole.empty_rows);
            continue;
          }
          rl.element(lse_where(bi, h, i) + " (no part sees a key)", m, lse_of(whole, c, c.lq, bi, h, i), 0.0);
          for (std::int64_t e = 0; e < c.dv; ++e)
            r.element(o_where(bi, i, h, e) + " (no part sees a key)", 0.0, whole.o.at(bi, i, h, e), 0.0);
          continue;
        }
        const double ea = std::exp(la - m), eb = std::exp(lb - m);
        const double wa = ea / (ea + eb), wb = eb / (ea + eb);
        const double dla = ra.lse_bound[ra.lse_index(bi, h, i)], dlb = rb.lse_bound[rb.lse_index(bi, h, i)];
        const double merged_lse = m + std::log(ea + eb);
        // The parts' LSE errors, |dLa| <= dla and |dLb| <= dlb, move the merged
        // LSE by log(wa e^-dLa + wb e^-dLb), at most log(wa e^dla + wb e^dlb)
        // in size (convexity; wa*dla + wb*dlb is only its first order, and
        // LSE's f32 storage alone makes dla about 1 once |LSE| nears 2^24).
        // The law's own binary64 merge adds a few ulps of the result.
        const double dmax = std::max(dla, dlb);
        const double lbound = dmax + std::log(wa * std::exp(dla - dmax) + wb * std::exp(dlb - dmax)) +
                              rw.lse_bound[rw.lse_index(bi, h, i)] + 0x1p-50 * (std::fabs(merged_lse) + 1);
        // The weights themselves move by at most wa*wb*(dla+dlb)*e^(dla+dlb)
        // (the logistic's slope changes by at most e^|t| over a step t), and never by more than 1.
        const double dw = std::min(1.0, wa * wb * (dla + dlb) * std::exp(dla + dlb));
        // A non-finite visible input (NaN bound) or a possible overflow (+inf):
        // the parts say nothing about the whole there.
        if (!std::isfinite(dla) || !std::isfinite(dlb) || !std::isfinite(lbound)) {
          rl.unbounded += 1 + c.dv;
          continue;
        }
        rl.element(lse_where(bi, h, i) + " merged from keys [0," + std::to_string(split) + ") and [" + std::to_string(split) +
                       "," + std::to_string(c.lk) + ")",
                   lse_of(whole, c, c.lq, bi, h, i), merged_lse, lbound);
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const double xa = oa.o.at(bi, i, h, e), xb = ob.o.at(bi, i, h, e);
          // A part that rounded to +-inf where its truth may: the merge says nothing there.
          if (r.overflowed(o_where(bi, i, h, e) + " (first keys)", ra.o[ra.o_index(bi, i, h, e)],
                           ra.o_bound[ra.o_index(bi, i, h, e)], xa, xa) ||
              r.overflowed(o_where(bi, i, h, e) + " (last keys)", rb.o[rb.o_index(bi, i, h, e)],
                           rb.o_bound[rb.o_index(bi, i, h, e)], xb, xb) ||
              r.overflowed(o_where(bi, i, h, e), rw.o[rw.o_index(bi, i, h, e)], rw.o_bound[rw.o_index(bi, i, h, e)],
                           whole.o.at(bi, i, h, e), whole.o.at(bi, i, h, e)))
            continue;
          if (!std::isfinite(ra.o_bound[ra.o_index(bi, i, h, e)] + rb.o_bound[rb.o_index(bi, i, h, e)] +
                             rw.o_bound[rw.o_index(bi, i, h, e)])) {
            ++r.unbounded;
            continue;
          }
          const double merged = wa * xa + wb * xb;
          // merged - whole = wa*errA + wb*errB + (weight error)*(Oa - Ob), and
          // |Oa - Ob| <= |xa - xb| + the parts' bounds.
          const double ba = ra.o_bound[ra.o_index(bi, i, h, e)], bb = rb.o_bound[rb.o_index(bi, i, h, e)];
          const double bound = wa * ba + wb * bb + dw * (std::fabs(xa - xb) + ba + bb) + rw.o_bound[rw.o_index(bi, i, h, e)];
          r.element(o_where(bi, i, h, e) + " merged", whole.o.at(bi, i, h, e), merged, bound);
        }
      }
  r.merge(rl);
  o.add("merge by LSE of a split at key " + std::to_string(split), r);
  return o;
}

}  // namespace attncheck::laws
