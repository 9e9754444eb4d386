#include "attncheck/check.hpp"

#include "attncheck/element_log.hpp"

#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace attncheck {

namespace {

// Keeps the element, its ratio and what the subject wrote there, for a report
// when the runner has a log open (the replay of a shrunk failure).
void note(const element_where& where, double ratio, double got) {
  if (auto* log = element_log::current()) log->note(where, ratio, got);
}

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

// An oracle_result made without the probabilistic bound (hand-built in a test) has none.
double pbound_at(const std::vector<double>& pb, std::size_t k) {
  return k < pb.size() ? pb[k] : std::numeric_limits<double>::quiet_NaN();
}
bool useless_at(const std::vector<std::uint8_t>& u, std::size_t k) { return k < u.size() && u[k] != 0; }

// An element of a row the oracle gives LSE = -inf (no visible key, no sink)
// says so: its expected 0 (or -inf) is the contract's empty row.
element_where row_words(element_where where, double oracle_lse) {
  if (oracle_lse == -std::numeric_limits<double>::infinity()) return std::move(where) + " (row sees no key)";
  return where;
}

}  // namespace

std::string worst_element::describe() const {
  std::ostringstream s;
  s << where << ": expected " << num(expected) << ", got " << num(got) << ", |error| " << num(std::fabs(got - expected))
    << ", bound " << num(bound) << ", error/bound " << num(ratio);
  return s.str();
}

std::string where_text(const element_index& at) {
  if (at.e < 0) return "LSE[b=" + std::to_string(at.b) + ",h=" + std::to_string(at.h) + ",i=" + std::to_string(at.i) + "]";
  return "O[b=" + std::to_string(at.b) + ",i=" + std::to_string(at.i) + ",h=" + std::to_string(at.h) +
         ",e=" + std::to_string(at.e) + "]";
}

element_where operator+(element_where w, std::string_view words) {
  w.text += words;
  return w;
}

element_where operator+(std::string_view words, element_where w) {
  w.text.insert(0, words);
  return w;
}

element_where lse_of_row(element_where w) {
  if (w.at) w.at->e = -1;
  return "LSE of " + std::move(w);
}

element_where o_where(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t e) { return element_index{b, h, i, e}; }

element_where lse_where(std::int64_t b, std::int64_t h, std::int64_t i) { return element_index{b, h, i, -1}; }

void comparison::fail(const std::string& why, failure_kind k) {
  if (pass) failure = why, kind = k;
  pass = false;
}

void comparison::without_bound(const element_where& where, double expected, double got, double empty_value) {
  // A row whose every visible score is exactly -inf: -inf scores drop their
  // keys (the oracle's own value where only some are -inf), so the empty row's
  // value (O = 0, LSE = -inf) is as right as the oracle's 0/0 = NaN.
  if (!std::isnan(empty_value) && got == empty_value) {
    ++compared;
    note(where, 0.0, got);
    return;
  }
  if (!std::isfinite(got)) {
    ++compared;  // a non-finite answer is always allowed here
    note(where, 0.0, got);
    return;
  }
  if (std::isnan(expected) || std::isinf(expected)) {
    ++compared;
    worst_element w{where.text, expected, got, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                    where.at};
    fail("finite value where the true value is " + std::string(std::isnan(expected) ? "NaN" : "infinite") +
         " (a visible input is not finite: the row must be non-finite) at " + w.describe());
    if (max_ratio != std::numeric_limits<double>::infinity()) max_ratio = w.ratio, worst = w;
    note(where, w.ratio, got);
    return;
  }
  // A finite truth beside a non-finite visible input (a score of exactly
  // -inf drops its key): the oracle's value itself is judged and passes; any
  // other finite value has no bound to be judged by.
  if (got == expected)
    ++compared;
  else
    ++unbounded;
  note(where, got == expected ? 0.0 : std::numeric_limits<double>::quiet_NaN(), got);
}

void comparison::element(const element_where& where, double expected, double got, double bound) {
  // A NaN bound (a visible input is not finite) or a NaN truth: docs/spec.md lets such
  // a row be non-finite, never finite garbage; other rows are judged on their own.
  if (std::isnan(expected) || std::isnan(bound)) {
    without_bound(where, expected, got);
    return;
  }
  // +inf: outside the bound's domain (a score, partial dot product or
  // accumulator may overflow): nothing can be judged here. Counted, never
  // passed as judged: a law whose cases judge nothing is flagged (unjudged).
  if (bound == std::numeric_limits<double>::infinity()) {
    ++unbounded;
    note(where, std::numeric_limits<double>::quiet_NaN(), got);
    return;
  }
  ++compared;
  worst_element w{where.text, expected, got, bound, 0.0, where.at};
  if (std::isnan(got)) {
    w.ratio = std::numeric_limits<double>::infinity();
    fail("NaN at " + w.describe());
  } else if (std::isinf(got) && std::isfinite(expected) && std::isfinite(bound) &&
             std::copysign(1.0, got) * expected + bound >= overflow_threshold) {
    // The bound reaches the overflow threshold on got's side (of either sign of
    // the truth where the bound exceeds it): rounding to that infinity was allowed.
    w.ratio = (overflow_threshold - std::copysign(1.0, got) * expected) / bound;  // <= 1
  } else if (std::isinf(expected) || std::isinf(got)) {
    if (got != expected) {
      w.ratio = std::numeric_limits<double>::infinity();
      fail("infinity mismatch at " + w.describe());
    }
  } else if (!std::isfinite(bound) || bound < 0) {
    w.ratio = std::numeric_limits<double>::infinity();
    fail("the bound is not finite at " + w.describe() + " (a caller error, never a pass)");
  } else {
    const double err = std::fabs(got - expected);
    w.ratio = err == 0 ? 0.0 : (bound == 0 ? std::numeric_limits<double>::infinity() : err / bound);
    if (err > bound) fail("bound exceeded at " + w.describe());
  }
  note(where, w.ratio, got);
  if (w.ratio > max_ratio || worst.where.empty()) {
    if (w.ratio >= max_ratio) {
      max_ratio = w.ratio;
      worst = w;
    }
  }
}

void comparison::element(const element_where& where, double expected, double got, double bound, double pbound,
                         bool sound_useless) {
  element(where, expected, got, bound);
  if (!sound_useless || std::isnan(bound)) return;
  if (std::isfinite(bound)) ++useless;
  probabilistic(where, expected, got, pbound);
}

void comparison::probabilistic(const element_where& where, double expected, double got, double pbound) {
  if (!(pbound >= 0 && std::isfinite(pbound)) || std::isnan(expected)) return;  // no probabilistic bound: unjudged
  ++prob_compared;
  worst_element w{where.text, expected, got, pbound, 0.0, where.at};
  std::string why;
  if (std::isnan(got)) {
    w.ratio = std::numeric_limits<double>::infinity();
    why = "NaN at ";
  } else if (std::isinf(got) && std::isfinite(expected) && std::copysign(1.0, got) * expected + pbound >= overflow_threshold) {
    w.ratio = (overflow_threshold - std::copysign(1.0, got) * expected) / pbound;
  } else if (std::isinf(expected) || std::isinf(got)) {
    if (got != expected) w.ratio = std::numeric_limits<double>::infinity(), why = "infinity mismatch at ";
  } else {
    const double err = std::fabs(got - expected);
    w.ratio = err == 0 ? 0.0 : (pbound == 0 ? std::numeric_limits<double>::infinity() : err / pbound);
    if (err > pbound) why = "probabilistic bound exceeded at ";
  }
  if (!why.empty() && prob_pass) {
    prob_pass = false;
    prob_failure = why + w.describe();
  }
  if (w.ratio >= prob_max_ratio || prob_worst.where.empty()) {
    prob_max_ratio = std::max(prob_max_ratio, w.ratio);
    prob_worst = w;
  }
}

void comparison::exact(const element_where& where, std::uint32_t expected_bits, std::uint32_t got_bits, double expected,
                       double got) {
  ++compared;
  // IEEE 754 leaves the sign and payload of a NaN result unspecified (x86's
  // default NaN is negative): bit for bit means every NaN equals every NaN.
  if (expected_bits == got_bits || (std::isnan(expected) && std::isnan(got))) {
    note(where, 0.0, got);
    return;
  }
  note(where, std::numeric_limits<double>::infinity(), got);
  worst_element w{where.text, expected, got, 0.0, std::numeric_limits<double>::infinity(), where.at};
  char bits[80];
  std::snprintf(bits, sizeof bits, " (bits 0x%x vs 0x%x)", expected_bits, got_bits);
  fail("bits differ at " + w.describe() + bits);
  if (max_ratio != std::numeric_limits<double>::infinity()) {
    max_ratio = w.ratio;
    worst = w;
  }
}

bool comparison::overflowed(const element_where& where, double truth, double bound, double x, double y) {
  if (!std::isinf(x) && !std::isinf(y)) return false;
  if (std::isnan(truth) || std::isnan(bound)) return true;  // a non-finite visible input: no judgement
  // An infinite bound is the bound's "may overflow" (an accumulator past the
  // compute type's range, whose partial sums may take either sign): either infinity.
  const bool anywhere = std::isfinite(truth) && std::isinf(bound);
  const bool allowed = std::isfinite(truth) && std::isfinite(bound) && std::fabs(truth) + bound >= overflow_threshold;
  for (double v : {x, y})
    if (std::isinf(v) && !anywhere && (!allowed || (v > 0) != (truth > 0)))
      fail("infinity at " + where.text + " where the true value " + num(truth) + " (bound " + num(bound) +
           ") cannot round to it");
  return true;
}

bool comparison::runs_ok(std::initializer_list<const subject_output*> runs) {
  for (const auto* o : runs)
    if (!o->ok()) {
      fail(o->status ? "subject returned " + std::to_string(o->status) + ": " + o->error
                     : "subject wrote outside its output: " + o->guard_report,
           failure_kind::subject_error);
      return false;
    }
  return true;
}

void comparison::merge(const comparison& other) {
  if (!other.pass) fail(other.failure, other.kind);
  compared += other.compared;
  unbounded += other.unbounded;
  excused += other.excused;
  useless += other.useless;
  prob_compared += other.prob_compared;
  if (!other.prob_pass && prob_pass) prob_pass = false, prob_failure = other.prob_failure;
  if (other.prob_max_ratio > prob_max_ratio || (prob_worst.where.empty() && !other.prob_worst.where.empty())) {
    prob_max_ratio = std::max(prob_max_ratio, other.prob_max_ratio);
    prob_worst = other.prob_worst;
  }
  if (other.max_ratio > max_ratio || (worst.where.empty() && !other.worst.where.empty())) {
    max_ratio = std::max(max_ratio, other.max_ratio);
    worst = other.worst;
  }
}

double overflow_threshold(dtype t) {
  // largest finite + half its ulp: 65520 (f16), 2^128 - 2^103 (f32), 2^128 - 2^119 (bf16).
  return largest_finite(t) + std::ldexp(unit_roundoff(t), std::ilogb(largest_finite(t)));
}

excused_rows::excused_rows(const attn_case& c, const empty_row_convention& declared)
    : c_(c),
      o_(declared.o == empty_row_convention::o_kind::unspecified),
      lse_(declared.lse == empty_row_convention::lse_kind::unspecified) {}

bool excused_rows::o(std::int64_t b, std::int64_t h, std::int64_t i) const {
  return o_ && i < c_.lq && row_has_no_mass(c_, b, h, i);
}

bool excused_rows::lse(std::int64_t b, std::int64_t h, std::int64_t i) const {
  return lse_ && i < c_.lq && row_has_no_mass(c_, b, h, i);
}

double empty_row_o_value(const empty_row_convention& declared) {
  // An unspecified value is read as the contract's 0 (read_unspecified_as_contract).
  return declared.o == empty_row_convention::o_kind::nan ? std::nan("") : 0.0;
}

double empty_row_lse_value(const empty_row_convention& declared) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  switch (declared.lse) {
    case empty_row_convention::lse_kind::plus_inf: return inf;
    case empty_row_convention::lse_kind::zero: return 0.0;
    case empty_row_convention::lse_kind::minus_inf:
    case empty_row_convention::lse_kind::unspecified: break;  // read as the contract's -inf
  }
  return -inf;
}

void comparison::empty_row_o(const element_where& where, double got, const empty_row_convention& declared) {
  if (declared.o == empty_row_convention::o_kind::unspecified) {  // excused: nothing to judge
    ++excused;
    return;
  }
  if (declared.o == empty_row_convention::o_kind::zero) {
    element(where + " (row sees no key)", 0.0, got, 0.0);
    return;
  }
  const element_where w = where + " (row sees no key; declared NaN)";
  ++compared;
  note(w, std::isnan(got) ? 0.0 : std::numeric_limits<double>::infinity(), got);
  if (!std::isnan(got))
    fail(w.text + " = " + num(got) + ": the subject declares NaN in a row that sees no key (conventions.empty_row_o)");
}

void comparison::empty_row_lse(const element_where& where, double got, const empty_row_convention& declared) {
  if (declared.lse == empty_row_convention::lse_kind::unspecified) {  // excused: nothing to judge
    ++excused;
    return;
  }
  const double want = empty_row_lse_value(declared);
  static constexpr const char* names[] = {"-inf", "+inf", "0"};
  const element_where w =
      where + (declared.is_default() ? std::string(" (row sees no key)")
                                     : std::string(" (row sees no key; declared ") + names[static_cast<int>(declared.lse)] + ")");
  if (got == want) {
    element(w, want, got, 0.0);
    return;
  }
  ++compared;
  note(w, std::numeric_limits<double>::infinity(), got);
  fail(w.text + " = " + num(got) + ": the subject declares " + names[static_cast<int>(declared.lse)] +
       " for a row that sees no key (conventions.empty_row_lse)");
}

comparison compare_with_reference(const attn_case& c, const subject_output& out, const oracle_result& ref, double slack) {
  comparison r, rl;
  r.overflow_threshold = overflow_threshold(c.type);
  rl.overflow_threshold = overflow_threshold(dtype::f32);  // LSE is f32 whatever O's type
  if (!r.runs_ok({&out})) return r;
  const std::int64_t lq = out.o.shape[1];
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t i = 0; i < lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t e = 0; e < c.dv; ++e) {
          const auto k = ref.o_index(b, i, h, e);
          if (std::isnan(ref.o[k]) || std::isnan(ref.o_bound[k])) {
            r.without_bound(o_where(b, i, h, e), ref.o[k], out.o.at(b, i, h, e),
                            every_visible_score_is_minus_inf(c, b, h, i) ? empty_row_o_value(out.empty_rows) : std::nan(""));
            continue;
          }
          // A row with no visible key and no sink, where the subject declares its own values.
          if (!out.empty_rows.is_default() && ref.lse[ref.lse_index(b, h, i)] == -std::numeric_limits<double>::infinity()) {
            r.empty_row_o(o_where(b, i, h, e), out.o.at(b, i, h, e), out.empty_rows);
            continue;
          }
          r.element(row_words(o_where(b, i, h, e), ref.lse[ref.lse_index(b, h, i)]), ref.o[k], out.o.at(b, i, h, e),
                    ref.o_bound[k] * slack, pbound_at(ref.o_pbound, k) * slack, useless_at(ref.o_sound_useless, k));
        }
  if (!out.lse.empty())
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t i = 0; i < lq; ++i) {
          const auto k = ref.lse_index(b, h, i);
          if (std::isnan(ref.lse[k]) || std::isnan(ref.lse_bound[k])) {
            rl.without_bound(lse_where(b, h, i), ref.lse[k], out.lse[static_cast<std::size_t>((b * c.hq + h) * lq + i)],
                             every_visible_score_is_minus_inf(c, b, h, i) ? empty_row_lse_value(out.empty_rows) : std::nan(""));
            continue;
          }
          if (!out.empty_rows.is_default() && ref.lse[k] == -std::numeric_limits<double>::infinity()) {
            rl.empty_row_lse(lse_where(b, h, i), out.lse[static_cast<std::size_t>((b * c.hq + h) * lq + i)], out.empty_rows);
            continue;
          }
          rl.element(row_words(lse_where(b, h, i), ref.lse[k]), ref.lse[k],
                     out.lse[static_cast<std::size_t>((b * c.hq + h) * lq + i)], ref.lse_bound[k] * slack,
                     pbound_at(ref.lse_pbound, k) * slack, useless_at(ref.lse_sound_useless, k));
        }
  r.merge(rl);
  return r;
}

comparison compare_bitwise(const attn_case& c, const subject_output& expected, const subject_output& got) {
  comparison r;
  if (!r.runs_ok({&expected, &got})) return r;
  const std::int64_t lq = expected.o.shape[1];
  const excused_rows excused(c, expected.empty_rows);
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t i = 0; i < lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h) {
        if (excused.o(b, h, i)) {
          r.excused += c.dv;
          continue;
        }
        for (std::int64_t e = 0; e < c.dv; ++e)
          r.exact(o_where(b, i, h, e), expected.o.bits_at(b, i, h, e), got.o.bits_at(b, i, h, e), expected.o.at(b, i, h, e),
                  got.o.at(b, i, h, e));
      }
  if (!expected.lse.empty() && !got.lse.empty())
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t i = 0; i < lq; ++i) {
          if (excused.lse(b, h, i)) {
            ++r.excused;
            continue;
          }
          const auto k = static_cast<std::size_t>((b * c.hq + h) * lq + i);
          r.exact(lse_where(b, h, i), std::bit_cast<std::uint32_t>(expected.lse[k]), std::bit_cast<std::uint32_t>(got.lse[k]),
                  expected.lse[k], got.lse[k]);
        }
  return r;
}

oracle_options oracle_options_for(const subject& s, const attn_case& c, oracle_precision precision) {
  oracle_options o;
  o.precision = precision;
  o.out_type = c.type;
  o.bound.u_compute = s.desc().compute_unit_roundoff;
  o.bound.exp_ulps = s.exp_ulps();
  o.bound.tanh_ulps = s.tanh_ulps();
  o.bound.profile = s.profile();
  o.bound.key_blocks = s.key_blocks(c);
  o.bound.flush_intermediates = s.flushes(ATTNCHECK_FLUSH_INTERMEDIATES);
  o.bound.flush_outputs = s.flushes(ATTNCHECK_FLUSH_OUTPUTS);
  o.bound.flush_inputs = s.flushes(ATTNCHECK_FLUSH_INPUTS);
  return o;
}

}  // namespace attncheck
