// The report layer: a gate_result rendered for people and machines (the
// console table, JSON, JUnit XML), pure functions of the result; and the
// sinks that run_gates (attncheck/gate.hpp) hands each result to.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "attncheck/gate.hpp"

namespace attncheck {

/// How much the console prints.
struct console_options {
  /// Every failing law's full screen, each with its rapidcheck line; without
  /// it, one summary and one screen (print_failures).
  bool verbose = false;
};

/// One subject's console report: header (declaration, probabilistic bound,
/// watchdog), the failures (print_failures), the law table, the totals line and
/// the judged shares (and the distribution with run.stats).
void print_gate(const gate_result& g, std::ostream& out, const console_options& how = {});

/// The failures of a gate, one bug one screen: with several failing laws, one
/// summary line ("8 laws fail on ATTN(...)"), the full screen of the most
/// informative (the differential law's when it fails, else the first), and
/// one line per other law. The rapidcheck reproduce string is in the saved
/// case file and the JSON; the screen shows it only when verbose.
void print_failures(const gate_result& g, std::ostream& out, const console_options& how = {});

/// The elements of O and LSE the gate judged, per dtype, by sound bound,
/// probabilistic bound or neither: all laws together, and per law when per_law.
void print_judged_shares(const gate_result& g, bool per_law, std::ostream& out);

/// The realized distribution of the cases the gate ran (all laws together):
/// each share of docs/distribution.md with its floor.
void print_stats(const gate_result& g, std::ostream& out);

/// The gate's header line of what the subject declared: its bound numbers and size hints.
void print_declaration(const gate_result& g, std::ostream& out);

/// Writes JUnit XML for a gate run (its subject_name and run.seed name the suite; the run string is a property).
void write_junit(const std::string& path, const gate_result& r);

/// Writes a gate run as JSON: attncheck (version, contract, oracle), subject, seed, seconds, failed, and per law its
/// name, verdict (pass/fail/skipped/unjudged/timeout), cases, shrink_steps, seconds
/// (the law's own), max_ratio (null when not finite); on failure also kind
/// (failure_kind_name: law, crash, hang, subject_error, harness), message, worst,
/// reproduce, counterexample (the one-line form) and shape {b, hq, hkv, lq, lk, d, dv};
/// a timeout has kind timeout, message, and the case it was checking as `case`
/// (with its shape). At the top: failed (timeouts not counted), timed_out, and
/// run: the minimal string that reproduces the run (run_string).
void write_json(const std::string& path, const gate_result& r);

/// run_gates's console: print_gate of each subject, a blank line between subjects.
class console_sink final : public gate_sink {
 public:
  explicit console_sink(std::ostream& out, const console_options& how = {}) : out_(out), how_(how) {}
  void take(const gate_result& g, std::size_t index) override;

 private:
  std::ostream& out_;
  console_options how_;
};

/// run_gates's files: the JUnit XML and the JSON each subject's configuration
/// names (run.junit, run.json; none where empty).
class result_files_sink final : public gate_sink {
 public:
  void take(const gate_result& g, std::size_t index) override;
};

}  // namespace attncheck
