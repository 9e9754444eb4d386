// Runs a law as a rapidcheck property on a subject: generate, shrink, report.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "attncheck/element_log.hpp"
#include "attncheck/failure_report.hpp"
#include "attncheck/generators.hpp"
#include "attncheck/isolate.hpp"
#include "attncheck/laws.hpp"
#include "attncheck/ratio_bins.hpp"
#include "attncheck/run_config.hpp"

namespace attncheck {

struct law_report;

/// One law's run: the law-level part of a run_config (run_options_of) and
/// the gate's hooks. Defaults: run_default's quick entry points (100 cases).
struct run_options {
  int cases = run_default::quick_cases;    ///< successful cases before a law passes
  std::uint64_t seed = run_default::seed;  ///< rapidcheck seed; printed with every verdict
  int max_size = run_default::max_size;    ///< rapidcheck size ceiling
  gen_options gen{};
  std::string reproduce;         ///< RC_PARAMS reproduce string of an earlier failure (optional)
  bool strict_declines = false;  ///< a declined case fails the law instead of being replaced
  /// Called with each prepared, materialized case just before the law checks
  /// it (the gate records it, so a case that kills the process is known).
  std::function<void(const attn_case&)> on_case;
  /// Called when the law enters a phase: checking (before its first case),
  /// shrinking (at its first failure, before the shrink steps).
  std::function<void(law_phase)> on_phase;
  /// Called after every case and shrink step with the report so far (cases,
  /// judged, stats, and the smallest failing case yet): the gate publishes it,
  /// so a law whose process dies still counts what it ran.
  std::function<void(const law_report&)> on_progress;
};

struct law_report {
  std::string law;
  verdict v = verdict::pass;
  int cases = 0;             ///< cases run before the verdict (shrink steps not counted)
  int judged = 0;            ///< of those, cases where the law compared something (law_outcome::judged)
  std::string unjudged_why;  ///< the most frequent reason a case judged nothing
  /// Cases the subject declined (case_declined), by reason key; each was
  /// replaced by another draw and is not in `cases` (shrink steps not counted).
  std::map<std::string, std::int64_t> declines;
  double min_judged = 0;  ///< the law's floor of judged/run
  case_stats stats;       ///< the realized distribution of the cases run
  int shrink_steps = 0;
  std::string skip_reason;
  double max_ratio = 0;        ///< largest observed/bound over the passing cases (and the failure)
  std::string max_ratio_case;  ///< one-line form of the case behind max_ratio
  /// Each case's largest observed/bound, binned as the campaign's histogram
  /// (ratio_bin: exact 0, one bin per campaign_edges, > 1); shrink steps not counted.
  std::array<std::int64_t, ratio_bins> ratio_histogram{};
  double seconds = 0;
  /// The elements of the cases run (shrink steps not counted) by the bound
  /// that judged them, per case dtype (index: dtype's value: f32, f16, bf16).
  std::array<judged_shares, 3> shares{};
  /// The probabilistic verdict over the cases run (law_outcome::prob): n/a
  /// when no case judged an element by the probabilistic bound.
  prob_verdict prob = prob_verdict::na;
  std::int64_t prob_cases = 0;  ///< cases that judged an element by the probabilistic bound
  double prob_max_ratio = 0;
  std::string prob_failure;       ///< the first case's probabilistic failure, with its element
  std::string prob_failure_case;  ///< one-line form of that case (not shrunk)
  // On failure:
  std::optional<attn_case> counterexample;  ///< shrunk, materialized
  law_outcome failure;                      ///< the law's outcome on the shrunk case
  std::string reproduce;                    ///< RC_PARAMS reproduce string
  /// |error|/bound over the worst (batch, head), kept from the replay of the
  /// shrunk case that produced `failure` (no heat map when the subject's process died).
  std::optional<heat_map> heat;
};

/// How many cases a subject may decline per case a law runs before the law
/// stops drawing (rapidcheck's discard ratio): past it the law is UNJUDGED.
inline constexpr int declines_per_case = 3;

/// "12 declined: head size > 256 (8), bias must be f16 (4)", most frequent
/// first; empty without declines.
std::string declines_text(const std::map<std::string, std::int64_t>& declines);
/// The note every report prints under a law that ran with declines:
/// declines_text and "(replaced by other draws)"; empty without declines, and
/// for an UNJUDGED law, whose unjudged_why lists them already.
std::string replaced_declines_note(const law_report& r);

/// Runs one law. Never throws for a failing subject; harness errors (a case
/// the law cannot materialize) are reported as failures naming the harness.
law_report run_law(const law& l, const subject& s, const run_options& opt);

/// The law-level settings of a run: cases, seed, size, work budgets, reproduce.
run_options run_options_of(const run_config& c);

/// Checks one law on one saved case (the repro path). A case the subject
/// declines is skipped, or under strict_declines a failure.
law_outcome replay(const law& l, const subject& s, const attn_case& c, bool strict_declines = false);

/// The failure of a law report as one structured value (failure_report.hpp):
/// law, case line, cases run, worst element, saved file and replay command.
failure_report failure_report_of(const law_report& r, const subject& s, const std::string& saved_file);
/// The same for a subject known by its name and spec (a gate result's).
failure_report failure_report_of(const law_report& r, const std::string& subject_name, const std::string& subject_spec,
                                 const std::string& saved_file);

/// The one-screen verdict of a failure: print_failure(failure_report_of(...)).
std::string failure_screen(const law_report& r, const subject& s, const std::string& saved_file);

}  // namespace attncheck
