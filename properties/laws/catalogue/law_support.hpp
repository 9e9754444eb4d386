// Shared pieces of the law implementations: running, bounds, case surgery.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "attncheck/check.hpp"
#include "attncheck/laws.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/run_config.hpp"

namespace attncheck::laws {

/// The precision every law's judged comparison with the oracle uses: the fast
/// binary64 tier wherever its own error bound is at most 2^-20 of the
/// subject's bound on every element (that error is added to the bound), else
/// MPFR (docs/oracle.md, "Tiers"). A request for P always runs MPFR.
inline constexpr oracle_precision law_oracle = oracle_precision::auto_tier;

/// The oracle's values and bounds for the subject on this case.
oracle_result oracle_of(const subject& s, const attn_case& c);

/// The oracle's fast tier alone for the subject on this case (its own error
/// inside the bounds); nullopt where only MPFR could answer. The required-effect
/// checks use it: a case it declines is left unjudged there, not paid for in MPFR.
std::optional<oracle_result> fast_oracle_of(const subject& s, const attn_case& c);

/// The bound of the subject on this case from a binary64 run of the oracle's
/// loops: the bound is an a-priori estimate, and double's relative error in it
/// (~1e-16) is negligible next to f32 rounding. Never used as the oracle.
oracle_result fast_bound(const subject& s, const attn_case& c);

/// A tensor of a new shape in layout `layout` whose element (a,b,c,d) has the bits bits_of(a,b,c,d).
tensor remake(dtype t, dims4 shape, layout_kind layout,
              const std::function<std::uint32_t(std::int64_t, std::int64_t, std::int64_t, std::int64_t)>& bits_of);

/// t with every element times 2^a, rounded to its type, in layout `layout`.
tensor scaled(const tensor& t, int a, layout_kind layout);

/// The same case (same values) stored in another layout.
attn_case relayout(const attn_case& c, layout_kind layout);

/// The MHA case of a GQA case: K and V repeated in place (repeat_interleave),
/// Hkv = Hq, KV head h holding c's KV head h / G; everything else unchanged.
attn_case repeated_kv(const attn_case& c);

/// A deterministic stream of numbers for a law, from the case's seed and a salt.
struct law_rng {
  std::uint64_t state;
  law_rng(const attn_case& c, std::uint64_t salt) : state(c.seed * 0x9e3779b97f4a7c15ull ^ salt ^ 0xd1b54a32d192ed03ull) {}
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n), n >= 1.
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }
};

/// O and LSE rows of two outputs that must agree elementwise within
/// bound_a + bound_b (each output within its own bound of its own truth, and
/// the truths equal by the law).
comparison compare_within_bounds(const attn_case& c, const subject_output& a, const oracle_result& ra, const subject_output& b,
                                 const oracle_result& rb);

/// What a comparison of two runs within their bounds looks at, beyond O and LSE everywhere.
struct within_bounds_options {
  /// Rows compared; empty: every row.
  std::function<bool(std::int64_t b, std::int64_t h, std::int64_t i)> keep;
  /// How far the two truths may lie apart on a row's O elements and on its
  /// LSE (a law whose two cases differ by a rounding the oracle bounds); empty: 0.
  std::function<double(std::int64_t b, std::int64_t h, std::int64_t i)> o_gap, lse_gap;
  /// The second run's LSE minus this is compared (its scores were shifted by it).
  std::function<double(std::int64_t b, std::int64_t h, std::int64_t i)> lse_offset;
  bool lse = true;  ///< compare LSE at all
};
comparison compare_within_bounds(const attn_case& c, const subject_output& a, const oracle_result& ra, const subject_output& b,
                                 const oracle_result& rb, const within_bounds_options& opt);
/// The same for run x on case a and run y on case b, each within its own
/// case's bound (fast_bound).
comparison compare_within_own_bounds(const subject& s, const attn_case& a, const subject_output& x, const attn_case& b,
                                     const subject_output& y, const within_bounds_options& opt = {});
/// Runs the subject on cases a and b, whose true outputs agree (up to opt's
/// gaps): a run that fails fails o under its label (a_run, b_run), else the
/// two compared within their own bounds are added to o as `what`.
void add_runs_within_bounds(law_outcome& o, const subject& s, const attn_case& a, const std::string& a_run, const attn_case& b,
                            const std::string& b_run, const std::string& what, const within_bounds_options& opt = {});

/// The same case with one contract 1.1 variant (an ATTNCHECK_FEATURE3_* bit) switched off, its values dropped.
attn_case without_variant(const attn_case& c, std::uint32_t bit);

/// The largest finite |x| over a tensor's view (0 when none).
double max_abs_finite(const tensor& t);
/// The largest finite |V| of the case (0 when none): with max_j |dS_j| it
/// bounds how far O moves when scores move (|dO_e| <= 2 max|V| max_j |dS_j|).
inline double max_abs_v(const attn_case& c) { return max_abs_finite(c.v); }

/// The bits of the variants a case carries (ATTNCHECK_FEATURE3_*).
std::uint32_t variants_of(const attn_case& c);

/// Applicable only to subjects that declare the variant `bit` (named `what`).
inline std::function<std::string(const subject&)> declares(std::uint32_t bit, const char* what) {
  return [bit, what](const subject& s) -> std::string {
    return (s.features_v3() & bit) ? "" : std::string("subject does not declare ") + what;
  };
}

/// Comparison for an invariance: bitwise when the subject claims it, else within two bounds.
comparison compare_claimed(const subject& s, std::uint32_t claim, const attn_case& c, const subject_output& a,
                           const subject_output& b);

/// A key count of a sequence in a batch of a form law or a long decode:
/// none, one, Lk or any in [0, Lk].
std::int64_t sequence_length(std::int64_t lk, law_rng& rng);
/// A long-context decode: Lk at 2^12, 2^13, 2^15, 2^16 or 2^17 (+-1), one
/// query, one head, D and Dv at most 4, one or two sequences (the second's
/// key count drawn as sequence_length; the mask and bias dims follow). The
/// fast oracle tier answers it (binary64, no MPFR).
/// `lk` > 0 sets Lk instead of drawing it (the paged law's page-index crossings).
void make_long_decode(attn_case& c, law_rng& rng, std::int64_t lk = 0);
/// The header of a case with no tensors or mask (cheap to copy and edit).
attn_case header_only(const attn_case& c);

/// True when the oracle proves that two correct runs differ at an element: the
/// true values t0 and t1 (each with its bound b0, b1, the oracle's own error
/// inside) are further apart than both bounds together, every term finite.
/// Then no pair of outputs within their bounds can be equal.
inline bool proves_change(double t0, double b0, double t1, double b1) {
  return std::isfinite(t0) && std::isfinite(t1) && std::isfinite(b0) && std::isfinite(b1) && std::fabs(t1 - t0) > b0 + b1;
}

/// The one rule of every law that demands an effect (a perturbation must move
/// O, another scale must change it, ...), on every O element of two runs a and
/// b (cases ca and cb of one shape) whose row keep(b, h, i) holds: the elements
/// must differ in value only where proves_change(t0, b0, t1, b1), with the
/// truths and bounds of the oracle's fast tier; there the element is judged and
/// fails when the two are equal (or both NaN). Everywhere else (the fast tier
/// declines either case, an infinite or NaN bound, an overflowed product, an
/// underflowed exponent, a change smaller than the bounds, a signed zero) the
/// element is unjudged and counted in `unbounded`. `what` says what should have moved it.
comparison require_changes(const subject& s, const attn_case& ca, const subject_output& a, const attn_case& cb,
                           const subject_output& b, const std::string& what,
                           const std::function<bool(std::int64_t, std::int64_t, std::int64_t)>& keep);

/// Fails with the subject's error or guard report when a run did not succeed
/// (a forward subject_output or a backward_output: status, error, guard_report).
template <class Output>
bool run_failed(const Output& out, law_outcome& o, const std::string& label) {
  if (out.ok()) return false;
  o.fail(label + ": " +
             (out.status ? "subject returned " + std::to_string(out.status) + ": " + out.error
                         : "subject wrote outside its output: " + out.guard_report),
         failure_kind::subject_error);
  return true;
}

/// Lse of output row (b, h, i); NaN when the subject has no LSE.
inline float lse_of(const subject_output& out, const attn_case& c, std::int64_t lq, std::int64_t b, std::int64_t h,
                    std::int64_t i) {
  if (out.lse.empty()) return std::nanf("");
  return out.lse[static_cast<std::size_t>((b * c.hq + h) * lq + i)];
}

/// The differential check: O and LSE against the oracle, plus an exp edge
/// probe on f32 subjects (the differential law; the extreme law reuses it).
law_outcome output_within_bound(const subject& s, const attn_case& c);

/// A quiet NaN of type t with a nonzero payload (poison for unused slots).
std::uint32_t nan_bits(dtype t);

/// True when row (b, h, i) sees at least one key.
bool row_sees_any(const attn_case& c, std::int64_t b, std::int64_t h, std::int64_t i);

/// Every row of the problem that sees no key must give O = 0 exactly and,
/// without a finite sink for its head, LSE = -inf (docs/spec.md); into z.
/// Returns whether the case has such a row.
bool empty_rows_are_zero(const attn_case& c, const subject_output& out, comparison& z);

/// Compares the O rows (and LSE) for which keep(b, h, i) holds, bit for bit.
comparison rows_bitwise(const attn_case& c, const subject_output& a, const subject_output& b,
                        const std::function<bool(std::int64_t, std::int64_t, std::int64_t)>& keep);
/// Two calls whose kept rows have one truth (the case c's): bit for bit when
/// the subject claims determinism (ATTNCHECK_CLAIM_DETERMINISTIC: the same
/// inputs to a row give the same bits), else each within c's bound of that
/// truth. Without the claim two calls may round differently (split-KV with
/// atomics), and the contract demands only the bound (docs/spec.md
/// "Which comparisons are bit for bit").
comparison rows_claimed(const subject& s, const attn_case& c, const subject_output& a, const subject_output& b,
                        const std::function<bool(std::int64_t, std::int64_t, std::int64_t)>& keep);

/// Applicable only to subjects that hide keys somehow (causal, padding or a
/// mask): without any, every row sees every key and there is nothing to hide.
inline std::string takes_a_mask(const subject& s) {
  return s.has(ATTNCHECK_FEATURE_PADDING) || s.has(ATTNCHECK_FEATURE_CAUSAL) || s.has(ATTNCHECK_FEATURE_MASK)
             ? ""
             : "subject takes no mask";
}

/// A law that applies to every subject, and one that takes the generated case as it is.
inline std::string always(const subject&) { return {}; }
inline void as_generated(attn_case&, const subject&) {}

/// A law as its group's file registers it: the name, the check, the judged
/// floor and the one-line claim (what must hold), then only what differs from
/// the common law (it applies to every subject, takes the case as generated
/// and is fuzzed within the bound), e.g.
/// law_entry("g.name", check, 0.9, "claim").prepared_by(prepare_g).
class law_entry {
 public:
  law_entry(std::string name, decltype(law::check) check, double min_judged, std::string summary)
      : l_{std::move(name), std::move(summary), always, as_generated, std::move(check), min_judged, {.bounded = true}} {}
  /// Only for the subjects `applicable` accepts (it says why it skips the others).
  law_entry&& applies_when(decltype(law::applicable) applicable) && { return set(&law::applicable, std::move(applicable)); }
  /// Adjusts each generated case with `prepare`.
  law_entry&& prepared_by(decltype(law::prepare) prepare) && { return set(&law::prepare, std::move(prepare)); }
  /// The law does not compare within the bound: the fuzz harness keeps cases whose bound is not finite.
  law_entry&& fuzzed_unbounded() && { return set(&law::fuzz, law::fuzzing{.bounded = false}); }
  /// The law holds for the contract 1.1 variants too: its cases draw those the subject declares.
  law_entry&& with_variants() && { return set(&law::variants, true); }
  /// The law holds for fp8 inputs with descales too: its cases draw them for a subject that declares them.
  law_entry&& with_fp8() && { return set(&law::fp8, true); }
  /// The law checks this share of --cases (at least one): budgeted by work.
  law_entry&& sampled(double share) && { return set(&law::case_share, share); }
  /// Its cases stay at or below this work (case_work), whatever the run's max_work.
  law_entry&& capped(std::int64_t work) && { return set(&law::max_work, work); }
  /// A law of the contract 1.1 variants: it draws them, checks a tenth of
  /// --cases (each case runs the subject and the bound twice or more) on cases
  /// of at most run_default::variant_max_work, so the gate's time stays budgeted.
  law_entry&& variant_identity() && {
    return std::move(*this).with_variants().sampled(0.1).capped(run_default::variant_max_work);
  }
  /// A law of the contract 1.2 input forms (paged, ragged): it draws the
  /// variants the subject declares, checks a tenth of --cases (each case runs
  /// the dense and the other form) on cases of at most variant_max_work. Six
  /// such laws at a fifth took 6-7 s of CPU per builtin subject in the
  /// default gate, which then ran 62-68 s against its 60 s.
  law_entry&& input_form() && { return std::move(*this).with_variants().sampled(0.1).capped(run_default::variant_max_work); }
  /// The law counts variants_judged, each held to this floor (law::variant_floor).
  law_entry&& judges_variants(double floor) && { return set(&law::variant_floor, floor); }
  /// Its enlarged cases are charged to the work budget as drawn, and kept within --max-work (law::charged_as_drawn).
  law_entry&& charged_as_drawn() && { return set(&law::charged_as_drawn, true); }
  /// A law of the backward group (law::backward).
  law_entry&& backward_group() && { return set(&law::backward, true); }
  operator law() && { return std::move(l_); }

 private:
  template <class T>
  law_entry&& set(T law::*field, T value) {
    l_.*field = std::move(value);
    return std::move(*this);
  }
  law l_;
};

}  // namespace attncheck::laws
