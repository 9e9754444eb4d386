#include "law_support.hpp"

#include "attncheck/features.hpp"

#include "attncheck/enum_names.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <limits>

namespace attncheck {

namespace {

// The verdicts as the table and the HTML reports print them, and as the JSON writes them.
constexpr name_table<verdict, 4> verdict_names{
    {{verdict::pass, "pass"}, {verdict::fail, "FAIL"}, {verdict::skip, "skipped"}, {verdict::unjudged, "UNJUDGED"}}};
constexpr name_table<verdict, 4> verdict_ids{
    {{verdict::pass, "pass"}, {verdict::fail, "fail"}, {verdict::skip, "skipped"}, {verdict::unjudged, "unjudged"}}};
constexpr name_table<prob_verdict, 3> prob_verdict_names{
    {{prob_verdict::na, "n/a"}, {prob_verdict::pass, "pass"}, {prob_verdict::fail, "FAIL(prob)"}}};
constexpr name_table<prob_verdict, 3> prob_verdict_ids{
    {{prob_verdict::na, "na"}, {prob_verdict::pass, "pass"}, {prob_verdict::fail, "fail"}}};

}  // namespace

// The tables' names are string literals: data() is NUL-terminated.
const char* verdict_name(verdict v) { return name_in(verdict_names, v).data(); }
const char* verdict_id(verdict v) { return name_in(verdict_ids, v).data(); }
const char* prob_verdict_name(prob_verdict v) { return name_in(prob_verdict_names, v).data(); }
const char* prob_verdict_id(prob_verdict v) { return name_in(prob_verdict_ids, v).data(); }

void law_outcome::fail(const std::string& why, failure_kind k) {
  if (v != verdict::fail) message = why, kind = k;
  v = verdict::fail;
}

void law_outcome::add(const std::string& label, const comparison& c) {
  if (!c.pass) fail(label + ": " + c.failure, c.kind);
  compared += c.compared;
  unbounded += c.unbounded;
  excused += c.excused;
  useless += c.useless;
  prob_compared += c.prob_compared;
  if (!c.prob_pass && prob_failure.empty()) prob_failure = label + ": " + c.prob_failure;
  if (c.prob_max_ratio > prob_max_ratio || (prob_worst.where.empty() && !c.prob_worst.where.empty())) {
    prob_max_ratio = std::max(prob_max_ratio, c.prob_max_ratio);
    prob_worst = c.prob_worst;
  }
  if (c.max_ratio > max_ratio || (worst.where.empty() && !c.worst.where.empty())) {
    if (c.max_ratio >= max_ratio) {
      max_ratio = c.max_ratio;
      worst = c.worst;
    }
  }
}

namespace laws {

oracle_result fast_bound(const subject& s, const attn_case& c) {
  return reference(c, oracle_options_for(s, c, oracle_precision::binary64));
}

std::optional<oracle_result> fast_oracle_of(const subject& s, const attn_case& c) {
  return fast_oracle(c, oracle_options_for(s, c, law_oracle));
}

oracle_result oracle_of(const subject& s, const attn_case& c) { return reference(c, oracle_options_for(s, c, law_oracle)); }

attn_case header_only(const attn_case& c) {
  attn_case h;
  h.b = c.b, h.hq = c.hq, h.hkv = c.hkv, h.lq = c.lq, h.lk = c.lk, h.d = c.d, h.dv = c.dv;
  h.scale = c.scale;
  h.causal = c.causal;
  h.key_len = c.key_len;
  h.mask_shape = c.mask_shape;
  h.type = c.type;
  h.values = c.values, h.layout = c.layout, h.poison = c.poison, h.seed = c.seed;
  return h;
}

tensor remake(dtype t, dims4 shape, layout_kind layout,
              const std::function<std::uint32_t(std::int64_t, std::int64_t, std::int64_t, std::int64_t)>& bits_of) {
  tensor x = make_tensor(t, shape, layout);
  for (std::int64_t a = 0; a < shape[0]; ++a)
    for (std::int64_t b = 0; b < shape[1]; ++b)
      for (std::int64_t c = 0; c < shape[2]; ++c)
        for (std::int64_t d = 0; d < shape[3]; ++d) x.set_bits(a, b, c, d, bits_of(a, b, c, d));
  return x;
}

tensor scaled(const tensor& t, int a, layout_kind layout) {
  return remake(t.type, t.shape, layout,
                [&](auto i0, auto i1, auto i2, auto i3) { return encode(t.type, std::ldexp(t.at(i0, i1, i2, i3), a)); });
}

attn_case repeated_kv(const attn_case& c) {
  attn_case mha = c;
  mha.hkv = c.hq;
  mha.k = remake(c.type, {c.b, c.lk, c.hq, c.d}, c.layout,
                 [&](auto b, auto j, auto h, auto x) { return c.k.bits_at(b, j, c.kv_head(h), x); });
  mha.v = remake(c.type, {c.b, c.lk, c.hq, c.dv}, c.layout,
                 [&](auto b, auto j, auto h, auto x) { return c.v.bits_at(b, j, c.kv_head(h), x); });
  return mha;
}

attn_case relayout(const attn_case& c, layout_kind layout) {
  attn_case r = c;
  r.layout = layout;
  for (auto* t : {&r.q, &r.k, &r.v}) {
    const tensor src = *t;
    *t = remake(src.type, src.shape, layout, [&](auto a, auto b, auto cc, auto d) { return src.bits_at(a, b, cc, d); });
  }
  return r;
}

comparison compare_within_bounds(const attn_case& c, const subject_output& a, const oracle_result& ra, const subject_output& b,
                                 const oracle_result& rb) {
  return compare_within_bounds(c, a, ra, b, rb, within_bounds_options{});
}

comparison compare_within_bounds(const attn_case& c, const subject_output& a, const oracle_result& ra, const subject_output& b,
                                 const oracle_result& rb, const within_bounds_options& opt) {
  comparison r, rl;
  r.overflow_threshold = overflow_threshold(c.type);
  rl.overflow_threshold = overflow_threshold(dtype::f32);  // LSE is f32 whatever O's type
  if (!r.runs_ok({&a, &b})) return r;
  const std::int64_t lq = a.o.shape[1];
  // A NaN truth or bound (a visible input is not finite): each run on its own
  // must be non-finite there (or its truth); nothing relates the two runs.
  const auto no_bound = [&c](comparison& cmp, const element_where& where, double ta, double ba, double x, double tb, double bb,
                             double y, std::int64_t bi, std::int64_t h, std::int64_t i, double empty) {
    if (!(std::isnan(ta) || std::isnan(ba) || std::isnan(tb) || std::isnan(bb))) return false;
    if (!every_visible_score_is_minus_inf(c, bi, h, i)) empty = std::nan("");
    cmp.without_bound(where + " (first run)", ta, x, empty);
    cmp.without_bound(where + " (second run)", tb, y, empty);
    return true;
  };
  constexpr double minus_inf = -std::numeric_limits<double>::infinity();
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t i = 0; i < lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h) {
        if (opt.keep && !opt.keep(bi, h, i)) continue;
        // A row with no visible key and no sink in both runs, where the subject declares its own
        // values: each run holds them (docs/abi.md "Conventions"); nothing relates the two.
        if (!a.empty_rows.is_default() && ra.lse[ra.lse_index(bi, h, i)] == minus_inf &&
            rb.lse[rb.lse_index(bi, h, i)] == minus_inf) {
          const auto k = static_cast<std::size_t>((bi * c.hq + h) * lq + i);
          for (std::int64_t e = 0; e < c.dv; ++e) {
            r.empty_row_o(o_where(bi, i, h, e) + " (first run)", a.o.at(bi, i, h, e), a.empty_rows);
            r.empty_row_o(o_where(bi, i, h, e) + " (second run)", b.o.at(bi, i, h, e), b.empty_rows);
          }
          if (opt.lse && !a.lse.empty() && !b.lse.empty()) {
            rl.empty_row_lse(lse_where(bi, h, i) + " (first run)", a.lse[k], a.empty_rows);
            rl.empty_row_lse(lse_where(bi, h, i) + " (second run)", b.lse[k], b.empty_rows);
          }
          continue;
        }
        const double o_gap = opt.o_gap ? opt.o_gap(bi, h, i) : 0.0;
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const auto ka = ra.o_index(bi, i, h, e), kb = rb.o_index(bi, i, h, e);
          const double x = a.o.at(bi, i, h, e), y = b.o.at(bi, i, h, e);
          const element_where where = o_where(bi, i, h, e);
          if (no_bound(r, where, ra.o[ka], ra.o_bound[ka], x, rb.o[kb], rb.o_bound[kb], y, bi, h, i,
                       empty_row_o_value(a.empty_rows)))
            continue;
          // An infinite bound (a score or accumulator may overflow): nothing to judge, NaN included.
          const double bound = ra.o_bound[ka] + rb.o_bound[kb] + o_gap;
          const bool bounded = std::isfinite(bound);
          if (bounded && std::isnan(x)) r.fail("NaN in the first run at " + where.text);
          if (bounded && r.overflowed(where, ra.o[ka], bound, x, y)) continue;
          r.element(where, x, y, bound);
        }
        if (opt.lse && !a.lse.empty() && !b.lse.empty()) {
          const auto ka = ra.lse_index(bi, h, i), kb = rb.lse_index(bi, h, i);
          const auto k = static_cast<std::size_t>((bi * c.hq + h) * lq + i);
          const element_where where = lse_where(bi, h, i);
          const double shift = opt.lse_offset ? opt.lse_offset(bi, h, i) : 0.0;
          const double y = static_cast<double>(b.lse[k]) - shift;
          if (no_bound(rl, where, ra.lse[ka], ra.lse_bound[ka], a.lse[k], rb.lse[kb], rb.lse_bound[kb], b.lse[k], bi, h, i,
                       empty_row_lse_value(a.empty_rows)))
            continue;
          // The shift's own subtraction in binary64: a few ulps of the result.
          const double bound = ra.lse_bound[ka] + rb.lse_bound[kb] + (opt.lse_gap ? opt.lse_gap(bi, h, i) : 0.0) +
                               (shift != 0 ? 0x1p-50 * (std::fabs(y) + std::fabs(shift)) : 0.0);
          const bool bounded = std::isfinite(bound);
          if (bounded && std::isnan(a.lse[k])) rl.fail("NaN in the first run at " + where.text);
          if (bounded && std::isfinite(ra.lse[ka]) && rl.overflowed(where, ra.lse[ka], bound, a.lse[k], y)) continue;
          rl.element(shift != 0 ? where + " (second run's LSE minus its shift)" : where, a.lse[k], y, bound);
        }
      }
  r.merge(rl);
  return r;
}

comparison compare_within_own_bounds(const subject& s, const attn_case& a, const subject_output& x, const attn_case& b,
                                     const subject_output& y, const within_bounds_options& opt) {
  return compare_within_bounds(a, x, fast_bound(s, a), y, fast_bound(s, b), opt);
}

void add_runs_within_bounds(law_outcome& o, const subject& s, const attn_case& a, const std::string& a_run, const attn_case& b,
                            const std::string& b_run, const std::string& what, const within_bounds_options& opt) {
  const auto x = s.attend(a), y = s.attend(b);
  if (run_failed(x, o, a_run) || run_failed(y, o, b_run)) return;
  o.add(what, compare_within_own_bounds(s, a, x, b, y, opt));
}

double max_abs_finite(const tensor& t) {
  double m = 0;
  for (std::int64_t i0 = 0; i0 < t.shape[0]; ++i0)
    for (std::int64_t i1 = 0; i1 < t.shape[1]; ++i1)
      for (std::int64_t i2 = 0; i2 < t.shape[2]; ++i2)
        for (std::int64_t i3 = 0; i3 < t.shape[3]; ++i3)
          if (const double x = std::fabs(t.at(i0, i1, i2, i3)); std::isfinite(x)) m = std::max(m, x);
  return m;
}

std::uint32_t variants_of(const attn_case& c) { return variant_bits(c); }

attn_case without_variant(const attn_case& c, std::uint32_t bit) {
  attn_case r = c;
  for (const contract_feature& f : contract_features())
    if (f.kind == feature_kind::variant && (bit & f.bit)) f.clear(r);
  return r;
}

comparison compare_claimed(const subject& s, std::uint32_t claim, const attn_case& c, const subject_output& a,
                           const subject_output& b) {
  if (s.claims(claim)) return compare_bitwise(c, a, b);
  const oracle_result ref = fast_bound(s, c);
  return compare_within_bounds(c, a, ref, b, ref);
}

std::uint32_t nan_bits(dtype t) { return t == dtype::f32 ? 0x7fc00001u : (t == dtype::f16 ? 0x7e01u : 0x7fc1u); }

bool row_sees_any(const attn_case& c, std::int64_t b, std::int64_t h, std::int64_t i) {
  for (std::int64_t j = 0; j < c.lk; ++j)
    if (c.visible(b, h, i, j)) return true;
  return false;
}

bool empty_rows_are_zero(const attn_case& c, const subject_output& out, comparison& z) {
  bool any_empty = false;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        if (!c.row_in_problem(b, i) || row_sees_any(c, b, h, i)) continue;
        any_empty = true;
        if (!out.empty_rows.is_default() && !std::isfinite(c.sink_of(h))) {  // the subject's declared values
          for (std::int64_t e = 0; e < c.dv; ++e) z.empty_row_o(o_where(b, i, h, e), out.o.at(b, i, h, e), out.empty_rows);
          if (!out.lse.empty()) z.empty_row_lse(lse_where(b, h, i), lse_of(out, c, c.lq, b, h, i), out.empty_rows);
          continue;
        }
        for (std::int64_t e = 0; e < c.dv; ++e)
          z.element(o_where(b, i, h, e) + " (row sees no key)", 0.0, out.o.at(b, i, h, e), 0.0);
        const float l = lse_of(out, c, c.lq, b, h, i);
        if (!out.lse.empty() && !std::isfinite(c.sink_of(h)) && !(std::isinf(l) && l < 0))
          z.fail(lse_where(b, h, i).text + " = " + std::to_string(l) + " for a row that sees no key (must be -inf)");
      }
  return any_empty;
}

comparison rows_claimed(const subject& s, const attn_case& c, const subject_output& a, const subject_output& b,
                        const std::function<bool(std::int64_t, std::int64_t, std::int64_t)>& keep) {
  if (s.claims(ATTNCHECK_CLAIM_DETERMINISTIC)) return rows_bitwise(c, a, b, keep);
  const oracle_result ref = fast_bound(s, c);
  within_bounds_options rows;
  rows.keep = keep;
  return compare_within_bounds(c, a, ref, b, ref, rows);
}

comparison rows_bitwise(const attn_case& c, const subject_output& a, const subject_output& b,
                        const std::function<bool(std::int64_t, std::int64_t, std::int64_t)>& keep) {
  comparison r;
  const excused_rows excused(c, a.empty_rows);
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        if (!keep(bi, h, i)) continue;
        const bool o_excused = excused.o(bi, h, i);
        if (o_excused) r.excused += c.dv;
        for (std::int64_t e = 0; e < c.dv && !o_excused; ++e)
          r.exact(o_where(bi, i, h, e), a.o.bits_at(bi, i, h, e), b.o.bits_at(bi, i, h, e), a.o.at(bi, i, h, e),
                  b.o.at(bi, i, h, e));
        if (a.lse.empty()) continue;
        if (excused.lse(bi, h, i)) {
          ++r.excused;
        } else {
          const float x = lse_of(a, c, c.lq, bi, h, i), y = lse_of(b, c, c.lq, bi, h, i);
          r.exact(lse_where(bi, h, i), std::bit_cast<std::uint32_t>(x), std::bit_cast<std::uint32_t>(y), x, y);
        }
      }
  return r;
}

comparison require_changes(const subject& s, const attn_case& ca, const subject_output& a, const attn_case& cb,
                           const subject_output& b, const std::string& what,
                           const std::function<bool(std::int64_t, std::int64_t, std::int64_t)>& keep) {
  comparison r;
  const auto t0 = fast_oracle_of(s, ca);
  const auto t1 = t0 ? fast_oracle_of(s, cb) : std::nullopt;
  for (std::int64_t bi = 0; bi < ca.b; ++bi)
    for (std::int64_t i = 0; i < ca.lq; ++i)
      for (std::int64_t h = 0; h < ca.hq; ++h) {
        if (!keep(bi, h, i)) continue;
        for (std::int64_t e = 0; e < ca.dv; ++e) {
          const auto k = t0 ? t0->o_index(bi, i, h, e) : 0;
          if (!t1 || !proves_change(t0->o[k], t0->o_bound[k], t1->o[k], t1->o_bound[k])) {
            ++r.unbounded;
            continue;
          }
          ++r.compared;
          const double x = a.o.at(bi, i, h, e), y = b.o.at(bi, i, h, e);
          if (!(x == y || (std::isnan(x) && std::isnan(y)))) continue;
          // The element's name is made only for a failure: this loop runs over every perturbed element.
          const element_where where = o_where(bi, i, h, e);
          char buf[256];
          std::snprintf(buf, sizeof buf, " at %.9g, though the true value moves from %.9g to %.9g (bounds %.3g and %.3g)", x,
                        t0->o[k], t1->o[k], t0->o_bound[k], t1->o_bound[k]);
          r.fail(what + " left " + where.text + buf);
          if (r.max_ratio != std::numeric_limits<double>::infinity()) {
            r.worst = {where.text, t1->o[k], y, t1->o_bound[k], std::numeric_limits<double>::infinity(), where.at};
            r.max_ratio = std::numeric_limits<double>::infinity();
          }
        }
      }
  return r;
}

std::int64_t sequence_length(std::int64_t lk, law_rng& rng) {
  switch (rng.below(4)) {
    case 0: return 0;   // an empty sequence: its whole table row is unspecified
    case 1: return 1;   // one key
    case 2: return lk;  // the longest
    default: return rng.below(lk + 1);
  }
}

void make_long_decode(attn_case& c, law_rng& rng, std::int64_t lk) {
  constexpr int powers[] = {12, 13, 15, 16, 17};
  if (lk <= 0) lk = (std::int64_t{1} << powers[rng.below(5)]) + rng.below(3) - 1;
  const std::int64_t b = 1 + rng.below(2);
  // Each full dim of the mask and the bias follows the new shape.
  const std::array<std::int64_t, 4> to = {b, 1, 1, lk};
  for (int k = 0; k < 4; ++k) {
    if (c.has_mask() && c.mask_shape[static_cast<std::size_t>(k)] != 1) c.mask_shape[static_cast<std::size_t>(k)] = to[k];
    if (c.variants.has_bias() && c.variants.bias_shape[static_cast<std::size_t>(k)] != 1)
      c.variants.bias_shape[static_cast<std::size_t>(k)] = to[k];
  }
  c.b = b, c.lq = 1, c.lk = lk, c.hq = c.hkv = 1;
  c.d = std::min<std::int64_t>(c.d, 4), c.dv = std::min<std::int64_t>(c.dv, 4);
  if (!c.key_len.empty()) {
    c.key_len.clear();
    for (std::int64_t i = 0; i < b; ++i) c.key_len.push_back(i == 0 ? lk : sequence_length(lk, rng));
  }
}

}  // namespace laws
}  // namespace attncheck
