// Comparing a subject's output with the oracle under the bound of docs/bound.md.
// Order of checks, per element: NaN, then infinities, then the bound.
#pragma once

#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/failure_report.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {

/// An element of O[b,i,h,e] (e >= 0) or of LSE[b,h,i] (e = -1).
struct element_index {
  std::int64_t b = 0, h = 0, i = 0, e = -1;
  bool operator==(const element_index&) const = default;
};

/// The one printer of an element's position: "O[b=0,i=1,h=2,e=0]" or "LSE[b=0,h=1,i=3]".
std::string where_text(const element_index& at);

/// Where a compared element lies, as a law names it: the element of O or LSE
/// (none for a row sum and the like) and the text the reports print,
/// where_text(at) with the law's own words around it (operator+).
struct element_where {
  std::string text;
  std::optional<element_index> at;
  /// A label that names no element of O or LSE ("sum_j P[b=0,h=1,i=2,:]").
  element_where(std::string label) : text(std::move(label)) {}
  element_where(const char* label) : text(label) {}
  /// The element itself, printed by where_text.
  element_where(const element_index& e) : text(where_text(e)), at(e) {}
};
/// The same element with the law's words after (or before) its text.
element_where operator+(element_where w, std::string_view words);
element_where operator+(std::string_view words, element_where w);
/// The LSE of the row of an element of O: "LSE of " before its text.
element_where lse_of_row(element_where w);

/// The element that came closest to (or went past) its bound.
struct worst_element {
  std::string where;    ///< as the law named it (element_where::text), e.g. "O[b=0,i=1,h=2,e=0] (V scaled)"
  double expected = 0;  ///< the oracle's value (or the other run's, for metamorphic laws)
  double got = 0;
  double bound = 0;  ///< allowed |got - expected|
  double ratio = 0;  ///< |got - expected| / bound; inf for a NaN/inf mismatch
  /// The element of O or LSE that `where` names, structured (none for a row
  /// sum and the like): element_where::at of the comparison, read by heat maps
  /// and carried by the result codec.
  std::optional<element_index> at = std::nullopt;

  std::string describe() const;
};

/// Result of comparing many elements: pass/fail, the first hard failure
/// (NaN, inf, exact mismatch) if any, and the worst ratio.
struct comparison {
  bool pass = true;
  std::string failure;  ///< empty when pass
  worst_element worst;
  /// Elements actually judged (compared against a value and a finite bound,
  /// or bit for bit); 0 means the comparison judged nothing.
  std::int64_t compared = 0;
  /// Elements left unjudged because their bound is +inf (outside the bound's domain).
  std::int64_t unbounded = 0;
  /// Elements of rows whose value the subject declares unspecified (empty
  /// rows): neither judged nor unjudged. A case that compared nothing else is
  /// outside what the subject promises, and the law runner replaces it.
  std::int64_t excused = 0;
  /// Of `compared`, elements whose finite sound bound was useless (it accepts
  /// every value the hull allows: oracle_result::o_sound_useless).
  std::int64_t useless = 0;
  /// The probabilistic verdict (docs/bound.md, "The probabilistic bound"): its
  /// own, never folded into `pass`. Elements whose sound bound is +inf or
  /// useless and whose probabilistic bound is finite are judged by it here.
  std::int64_t prob_compared = 0;
  bool prob_pass = true;
  std::string prob_failure;  ///< the first probabilistic failure; empty when prob_pass
  worst_element prob_worst;  ///< the element behind prob_max_ratio or the failure
  double prob_max_ratio = 0;
  double max_ratio = 0;
  /// What the first failure was: the law's comparison, or the subject's error (runs_ok).
  failure_kind kind = failure_kind::law;
  /// Values at or past this magnitude round to +-inf in the output type
  /// (largest finite + half an ulp); inf disables the overflow rule.
  double overflow_threshold = std::numeric_limits<double>::infinity();

  /// Folds one element in. A NaN expected value or a NaN bound (a NaN or inf
  /// input in a visible slot) goes to without_bound(): docs/spec.md lets that row be
  /// non-finite, never finite garbage. An infinite bound ("the analysis says nothing here", e.g.
  /// scores that may overflow) judges nothing: the element counts in
  /// `unbounded`, not in `compared`. A got of
  /// +-inf for a finite expected passes only where expected + the bound (same
  /// sign) reaches overflow_threshold: the value may legitimately round to inf.
  void element(const element_where& where, double expected, double got, double bound);
  /// The same, and where sound_useless the probabilistic verdict on pbound
  /// (NaN or +inf pbound: the element stays unjudged by it).
  void element(const element_where& where, double expected, double got, double bound, double pbound, bool sound_useless);
  /// Folds one element into the probabilistic verdict alone (the rules of
  /// element(): NaN fails, +-inf only by the overflow rule, else |error| <= pbound).
  void probabilistic(const element_where& where, double expected, double got, double pbound);
  /// An element whose bound is NaN (a visible input is not finite) or whose
  /// truth is NaN: any non-finite got passes; a finite got fails where the
  /// truth is NaN or infinite, passes where it equals a finite truth, and is
  /// otherwise left unjudged (`unbounded`): no bound exists to judge it by.
  /// empty_value (not NaN): the row's every visible score is -inf, and the
  /// empty row's value (0 for O, -inf for LSE) passes too.
  void without_bound(const element_where& where, double expected, double got,
                     double empty_value = std::numeric_limits<double>::quiet_NaN());
  /// An element of O, or the LSE, of a row that sees no key and has no sink,
  /// judged by the subject's declared convention (docs/abi.md "Conventions"):
  /// the declared value exactly (NaN: any NaN); an unspecified value is
  /// excused: neither judged nor counted.
  void empty_row_o(const element_where& where, double got, const empty_row_convention& declared);
  void empty_row_lse(const element_where& where, double got, const empty_row_convention& declared);
  /// Requires identical bit patterns (bitwise laws); any two NaNs count as
  /// equal, since IEEE 754 does not specify a NaN result's sign or payload.
  void exact(const element_where& where, std::uint32_t expected_bits, std::uint32_t got_bits, double expected, double got);
  void fail(const std::string& why, failure_kind k = failure_kind::law);
  /// Fails (and returns false) when a run did not succeed: an error code or a write outside O/LSE.
  bool runs_ok(std::initializer_list<const subject_output*> runs);
  /// Two runs of a subject whose true value is `truth` (bound each): an
  /// infinity in either is fine exactly where the overflow rule allows it.
  /// Returns true when the element was decided here (skip the bound check).
  bool overflowed(const element_where& where, double truth, double bound, double x, double y);
  void merge(const comparison& other);
};

/// The elements O[b,i,h,e] and LSE[b,h,i].
element_where o_where(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t e);
element_where lse_where(std::int64_t b, std::int64_t h, std::int64_t i);

/// The rows whose O or LSE a subject declares unspecified and that give no
/// key and no sink any weight (row_has_no_mass): excused, so a bitwise
/// comparison of two runs counts nothing there.
class excused_rows {
 public:
  excused_rows(const attn_case& c, const empty_row_convention& declared);
  bool o(std::int64_t b, std::int64_t h, std::int64_t i) const;
  bool lse(std::int64_t b, std::int64_t h, std::int64_t i) const;

 private:
  const attn_case& c_;
  bool o_, lse_;
};

/// The value a row that sees no key holds under a declared convention: 0 or
/// NaN for O; -inf, +inf or 0 for LSE.
double empty_row_o_value(const empty_row_convention& declared);
double empty_row_lse_value(const empty_row_convention& declared);

/// Every element of O (and LSE when the subject gives it) against the oracle
/// within its bound, scaled by `slack` (1 for a direct comparison).
comparison compare_with_reference(const attn_case& c, const subject_output& out, const oracle_result& ref, double slack = 1.0);

/// Two outputs of the same shape, bit for bit (O and LSE).
comparison compare_bitwise(const attn_case& c, const subject_output& expected, const subject_output& got);

/// The magnitude from which round-to-nearest in t gives +-inf.
double overflow_threshold(dtype t);

/// Bound parameters of a subject for a case, and the oracle options that go with them.
oracle_options oracle_options_for(const subject& s, const attn_case& c, oracle_precision precision);

}  // namespace attncheck
