// The softmax laws: with V = identity the outputs are the weights, which form
// a distribution (>= 0, masked exactly 0, summing to 1); with V = ones a long,
// peaked row keeps its whole mass, the small weights' included.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
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

namespace {

// The weight t below which the law's small weights lie: e4m3's smallest
// subnormal / 2, 2^-10 (what an e4m3 cast of P without a pre-cast factor
// rounds to 0); for a subject that declares an fp8 P format with a factor,
// that format's smallest subnormal / 2 (what its cast without the factor drops).
double lost_below(const stage_profile& p) {
  if (p.p_eta >= smallest_subnormal(dtype::e5m2) && p.p_factor_log2 > 0) return p.p_eta / 2;
  return smallest_subnormal(dtype::e4m3) / 2;
}

}  // namespace

std::string keeps_small_weights(const subject& s) {
  // The bound of a full row (n = 4096 keys) of V = ones under the declared
  // stages (docs/bound.md "Stage-wise profiles"), to first order: F (u_P
  // (sum_j P_j |V_j| + |O|) + eta_pw (sum_j |V_j| + n |O|) + 2 gamma_n(u_pv)),
  // F = 2, eta_pw the loss allowed per weight (the format's smallest normal / 2
  // where intermediates are flushed), the factor divided out. Where it reaches
  // 0.5 no row the law builds (at most 70% of its mass in small weights) can
  // show a loss beyond it: e5m2's P (u_P 2^-3), an fp8 P without a pre-cast
  // factor, P V accumulated at 11 bits.
  const stage_profile& p = s.profile();
  constexpr double n = 4096;
  const double u_pv = p.pv_accum_u > 0 ? p.pv_accum_u : s.declared().u;
  const double gamma_pv = n * u_pv < 1 ? n * u_pv / (1 - n * u_pv) : std::numeric_limits<double>::infinity();
  double eta_pw = 0, theta = 0;
  if (p.p_u > 0) {
    const double floor = s.flushes(ATTNCHECK_FLUSH_INTERMEDIATES) ? p.p_eta / (2 * p.p_u) : p.p_eta / 2;
    eta_pw = std::ldexp(floor, -p.p_factor_log2);
    theta = p.p_u / (1 - p.p_u);
  }
  const double row_bound = 2 * (2 * theta + 2 * n * eta_pw + 2 * gamma_pv);
  if (row_bound >= 0.5) {
    char why[240];
    std::snprintf(why, sizeof why,
                  "the declared stages (P's unit %g, each weight below %g may round to 0, P V at %g) bound a long row of "
                  "V = ones within %g: no lost mass the law can build shows beyond it",
                  p.p_u, eta_pw, u_pv, row_bound);
    return why;
  }
  return {};
}

// Long decodes (Lk 3072 to 4096, D and Dv <= 4) whose every key is visible
// (no mask, no padding: the law is P's), the scale 1/sqrt(D): the law sets the scores.
void prepare_peaked(attn_case& c, const subject&) {
  law_rng rng(c, 0x9ea4ed);
  make_long_decode(c, rng, 3072 + rng.below(1025));
  c.mask_shape = {};
  c.key_len.clear();
  c.scale.reset();
}

law_outcome mass_kept_on_long_peaked_rows(const subject& s, const attn_case& c) {
  law_outcome o;
  // Each row: one key (the first visible one from a position drawn per row)
  // with score 0, the others with weights w 2^-r, w in [t 2^-1.3, t 2^-1] per
  // row and r in [0, 0.3) per key, t = lost_below: together 50-70% of a full
  // row's mass (Lk >= 3072), in weights a P cast without its factor (or a
  // flush, a top-k) drops. Q = e_0 and K_j0 = score / scale, rounded to the
  // case's type; V = ones, so O = 1.
  const double t = lost_below(s.profile()), scale = c.effective_scale();
  law_rng rng(c, 0x3a55);
  std::vector<std::int64_t> peak(static_cast<std::size_t>(c.b * c.hkv));
  std::vector<double> level(peak.size());
  for (std::size_t r = 0; r < peak.size(); ++r) {
    const std::int64_t b = static_cast<std::int64_t>(r) / c.hkv, g = static_cast<std::int64_t>(r) % c.hkv;
    const std::int64_t from = rng.below(c.lk);
    peak[r] = from;
    for (std::int64_t k = 0; k < c.lk; ++k)  // the query row of the KV head's first query head
      if (!c.hidden_by(b, g * (c.hq / c.hkv), 0, (from + k) % c.lk)) {
        peak[r] = (from + k) % c.lk;
        break;
      }
    level[r] = std::log(t) - std::log(2.0) * (1.0 + 0.3 * static_cast<double>(rng.below(1024)) / 1024);
  }
  std::vector<double> jitter(static_cast<std::size_t>(c.lk));
  for (double& r : jitter) r = std::log(2.0) * 0.3 * static_cast<double>(rng.below(1024)) / 1024;
  attn_case p = c;
  p.q = remake(c.type, {c.b, c.lq, c.hq, c.d}, c.layout,
               [&](auto, auto, auto, auto d) { return encode(c.type, d == 0 ? 1.0 : 0.0); });
  p.k = remake(c.type, {c.b, c.lk, c.hkv, c.d}, c.layout, [&](auto b, auto j, auto g, auto d) {
    const std::size_t r = static_cast<std::size_t>(b * c.hkv + g);
    return encode(c.type, d != 0 || j == peak[r] ? 0.0 : (level[r] - jitter[static_cast<std::size_t>(j)]) / scale);
  });
  p.v = remake(c.type, {c.b, c.lk, c.hkv, c.dv}, c.layout, [&](auto, auto, auto, auto) { return encode(c.type, 1.0); });
  const auto out = s.attend(p);
  if (run_failed(out, o, "V = ones on long, peaked rows")) return o;
  const std::optional<oracle_result> fast = fast_oracle_of(s, p);
  const oracle_result ref = fast ? *fast : oracle_of(s, p);
  o.add("V = ones on long, peaked rows: O = 1 and LSE against the oracle", compare_with_reference(p, out, ref));
  // Judged: a row whose mass in weights below t (from the exact scores, in
  // double) exceeds its O bound, so losing them would show.
  bool judged = false;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        double top = -std::numeric_limits<double>::infinity();
        std::vector<double> score(static_cast<std::size_t>(c.lk), -std::numeric_limits<double>::infinity());
        for (std::int64_t j = 0; j < c.lk; ++j)
          if (!p.hidden_by(b, h, i, j)) {
            score[static_cast<std::size_t>(j)] = static_cast<double>(scale) * p.k_value(b, j, c.kv_head(h), 0);
            top = std::max(top, score[static_cast<std::size_t>(j)]);
          }
        if (std::isinf(top)) continue;  // the row sees no key
        double mass = 0, small = 0;
        for (double x : score) {
          const double w = std::exp(x - top);
          mass += w;
          small += w < t ? w : 0;
        }
        const double bound = ref.o_bound[ref.o_index(b, i, h, 0)];
        judged = judged || (mass > 0 && std::isfinite(bound) && small / mass > bound);
      }
  if (!judged) o.nothing_to_judge("no row's mass below " + std::to_string(t) + " exceeds its bound");
  return o;
}

}  // namespace attncheck::laws
