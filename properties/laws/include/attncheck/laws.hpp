// The laws of attention, each a named check of a subject on one case.
// A law prepares a generated header (forcing what it needs, e.g. causal),
// then checks a materialized case. Replaying a saved case runs check() alone,
// so every perturbation a law makes is derived from the case itself.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/check.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {

/// pass; fail; skip (the subject cannot take the law); unjudged (it ran, but
/// judged fewer cases than the law's floor: not a pass).
enum class verdict : std::uint8_t { pass, fail, skip, unjudged };

/// The verdict as the gate's table and the HTML reports print it: pass, FAIL, skipped, UNJUDGED.
const char* verdict_name(verdict v);
/// The verdict as the gate's JSON writes it: pass, fail, skipped, unjudged.
const char* verdict_id(verdict v);

/// Elements of O and LSE by the kind of bound that judged them
/// (docs/bound.md, "The probabilistic bound"): a useful sound bound, the
/// probabilistic bound where the sound one is +inf or useless, or neither.
struct judged_shares {
  std::int64_t sound = 0, prob = 0, unjudged = 0;
  /// Elements with a finite sound bound, useful or not (what the sound verdict counts as judged).
  std::int64_t sound_finite = 0;
  void add(const judged_shares& o) { sound += o.sound, prob += o.prob, unjudged += o.unjudged, sound_finite += o.sound_finite; }
  std::int64_t total() const { return sound + prob + unjudged; }
};

/// The probabilistic verdict of a law: n/a when nothing was judged by the probabilistic bound.
enum class prob_verdict : std::uint8_t { na, pass, fail };
/// As the gate's table prints it: n/a, pass, FAIL(prob).
const char* prob_verdict_name(prob_verdict v);
/// As the gate's JSON writes it: na, pass, fail.
const char* prob_verdict_id(prob_verdict v);

struct law_outcome {
  verdict v = verdict::pass;
  std::string message;         ///< why it failed, or why it was skipped
  double max_ratio = 0;        ///< largest observed/bound among bounded comparisons
  worst_element worst;         ///< the element behind max_ratio or the failure
  std::int64_t compared = 0;   ///< elements judged by the comparisons folded in
  std::int64_t unbounded = 0;  ///< elements left unjudged: +inf bound, outside the bound's domain
  std::int64_t excused = 0;    ///< elements of rows the subject declares unspecified (comparison::excused)
  std::int64_t useless = 0;    ///< of `compared`, elements whose finite sound bound was useless
  // The probabilistic verdict (comparison::prob_*): its own, never part of v.
  std::int64_t prob_compared = 0;  ///< elements judged by the probabilistic bound
  std::string prob_failure;        ///< the first probabilistic failure; empty when none
  double prob_max_ratio = 0;
  worst_element prob_worst;
  /// Non-empty when the case was degenerate for this law (B = 1 for batch
  /// independence, no unused slot for masked slots, ...): it ran, but judged nothing.
  std::string vacuous;
  failure_kind kind = failure_kind::law;  ///< on failure: what failed (the first failure's kind)
  /// The contract 1.1 variants (ATTNCHECK_FEATURE3_* bits) this case judged:
  /// switching each off moves the oracle's output past the bound somewhere
  /// (docs/spec.md "Variants"; the differential law counts them). A variant
  /// the case carries but did not judge is counted as unjudged for it.
  std::uint32_t variants_judged = 0;
  /// The descales (bit 1 << k: fp8_inputs[k]'s, Q K V) this case judged: reading the
  /// input with a descale of 1 moves the oracle's output past the bound
  /// somewhere (docs/spec.md "fp8 storage"; the differential law counts them).
  std::uint32_t descales_judged = 0;

  static law_outcome skip(std::string why) {
    law_outcome o;
    o.v = verdict::skip;
    o.message = std::move(why);
    return o;
  }
  /// Folds a comparison in under a label ("V = ones", "threads 1 vs 3").
  void add(const std::string& label, const comparison& c);
  /// Fails with `why` (the first failure's message and kind are kept).
  void fail(const std::string& why, failure_kind k = failure_kind::law);
  /// Marks the case as one that could not test the law (keeps the first reason);
  /// returns the outcome, for a law's `if (...) return o.nothing_to_judge("why");`.
  law_outcome& nothing_to_judge(const std::string& why) {
    if (vacuous.empty()) vacuous = why;
    return *this;
  }
  /// The case judged something: an element was compared and the case was not degenerate.
  bool judged() const { return compared > 0 && vacuous.empty(); }
  prob_verdict prob() const {
    return !prob_failure.empty() ? prob_verdict::fail : (prob_compared > 0 ? prob_verdict::pass : prob_verdict::na);
  }
  /// The elements of the comparisons folded in, by the bound that judged them.
  judged_shares shares() const {
    const std::int64_t sound = compared - useless;
    return {sound, prob_compared, compared + unbounded - sound - prob_compared, compared};
  }
};

struct law {
  std::string name;     ///< group.law_name, e.g. "causal.future_keys_never_change_past_outputs"
  std::string summary;  ///< one line: what must hold
  /// Empty when the subject can take the law at all; else why it is skipped.
  std::function<std::string(const subject&)> applicable;
  /// Adjusts a generated header to what the law needs (never loosens it).
  std::function<void(attn_case&, const subject&)> prepare;
  /// Checks the law on a materialized case.
  std::function<law_outcome(const subject&, const attn_case&)> check;
  /// The documented floor of judged/run: a run that judged a smaller share of
  /// its cases is flagged (verdict unjudged), never passed in silence.
  double min_judged = 0.5;
  /// How fuzz/fuzz_laws.cpp fuzzes the law (it picks the law by its place in
  /// fuzzed_law_names()). bounded: the law compares within the bound, so the
  /// harness skips cases whose bound is not finite everywhere.
  struct fuzzing {
    bool bounded = false;
  } fuzz = {};
  /// Its generator also draws the contract 1.1 variants the subject declares
  /// (gen_options::variants); every other law judges contract 1.0 cases only.
  bool variants = false;
  /// Its generator also draws fp8 storage with descales for a subject that
  /// declares it (gen_options::fp8); every other law judges cases without fp8.
  bool fp8 = false;
  /// The share of the run's cases this law checks (budgeted by work: a law
  /// whose every case runs several calls takes a share of --cases, at least 1).
  double case_share = 1;
  /// The largest case work (case_work) the law's generator draws; 0: the run's max_work.
  std::int64_t max_work = 0;
  /// For a law that counts variants_judged: the floor of cases with a
  /// variant that judged it (per variant, over at least
  /// min_variant_cases cases carrying it); below it the law is unjudged.
  double variant_floor = 0;
  /// The law's prepare may enlarge a case into one the fast oracle tier
  /// answers cheaply (the differential law's long decodes): the work budget
  /// is charged the drawn work, and an enlarged case past the run's max_work
  /// (`--max-work`) runs as drawn instead.
  bool charged_as_drawn = false;
  /// A law of the backward group: its prepare cuts every case to a small
  /// work cap, so --stats counts its cases apart from the shape floors.
  bool backward = false;
};

/// Cases with a variant below which its judged share is not held to the floor.
inline constexpr int min_variant_cases = 20;

/// The cases a law runs when the run asks for `cases` per law (law::case_share).
int law_cases(const law& l, int cases);

/// Every law, in the order the gate runs and prints them.
const std::vector<law>& all_laws();
/// The law of that name; nullptr when there is none.
const law* find_law(const std::string& name);
/// Every law's name in the order fuzz_laws' law byte indexes them. Append
/// only: a saved input keeps selecting its law (docs/fuzz.md).
const std::vector<std::string>& fuzzed_law_names();

}  // namespace attncheck
