// The gate: every law against one or more subjects, scheduled in child
// processes, and its result model (gate_result); run_gates hands each
// result to sinks, and printing and files are the report layer's sinks
// (attncheck/report.hpp). The CLI exits 0 only when no law
// failed or timed out (1: a failure, 4: only timeouts).
#pragma once

#include <cstdio>
#include <iosfwd>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "attncheck/runner.hpp"

namespace attncheck {

namespace gate_detail {
inline std::string number_text(double x, const char* fmt = "%.6g") {
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}
}  // namespace gate_detail

/// One subject's job in a gate run: the subject and what is truly its own.
/// Everything else is the run's (run_config, given once to gate_subjects).
struct subject_job {
  std::string subject = "builtin";  ///< the spec: a registered kind or a plugin path, with options
  /// A subject made by the caller (the Python module's gate on a callable);
  /// when set it is gated instead of loading `subject`, which then only names it.
  std::shared_ptr<attncheck::subject> instance;
  // Per job where a run gates one subject several ways (`attncheck mutation`:
  // each (mutant, seed)) or several subjects (the CLI: one file each):
  std::optional<std::uint64_t> seed;             ///< unset: the run's
  std::optional<std::vector<std::string>> only;  ///< unset: the run's
  std::string out_dir, json, junit;              ///< empty: the run's
};

/// The configuration one subject runs under: the run with its job's own fields.
run_config job_config(const run_config& run, const subject_job& job);

struct gate_result {
  std::vector<law_report> reports;
  std::vector<std::string> saved;                      ///< counterexample files, one per failing law
  std::vector<std::string> saved_at;                   ///< per report: its counterexample file, or empty
  run_config run;                                      ///< what was asked (job_config: seed, cases, budget, files)
  std::string subject_name;                            ///< the name the subject gives itself
  std::string subject_spec;                            ///< the spec it was loaded from (the replay command's --subject)
  std::uint32_t dtypes = 0, features = 0, claims = 0;  ///< its declared ATTNCHECK_FEATURE_* and ATTNCHECK_CLAIM_* bits
  double seconds = 0;
  /// What the subject declared about itself: the bound's numbers and its size
  /// hints (printed in the header, written to JSON and JUnit).
  declared_numbers declared;
  attncheck_size_hints hints{};
  unsigned abi = 0;
  bool default_hints = false;
  int failed() const;       ///< laws that failed, timeouts included (a law cut short never passes)
  int timed_out() const;    ///< of those, laws that ran out of their own time with no call overdue (kind timeout)
  int unjudged() const;     ///< laws that ran but judged fewer cases than their floor (the gate fails)
  int prob_failed() const;  ///< laws whose probabilistic verdict failed (the gate fails; docs/bound.md)
};

/// The gate header's line on the probabilistic bound and its confidence.
std::string probabilistic_statement();

/// What produced a result, for every file the gate writes: attncheck's
/// version, the contract version, and the oracle the laws use.
std::string provenance_line();

/// A law cut short by its own time limit (kind timeout): not a failure of the subject.
bool timed_out(const law_report& r);

/// Runs the laws of every subject job in one schedule of child processes,
/// run.jobs at once (each law under run.law_timeout and run.watchdog); nothing
/// is printed or written (report.hpp prints and writes a result;
/// save_counterexamples saves).
std::vector<gate_result> gate_subjects(const run_config& run, const std::vector<subject_job>& jobs);

/// Writes each failing law's shrunk counterexample (not a timeout's case) as
/// a case file under run.out_dir, filling saved and saved_at.
void save_counterexamples(gate_result& g);

/// Where run_gates hands each subject's result: the report layer's console,
/// JSON, JUnit and HTML sinks (attncheck/report.hpp), or a caller's own.
class gate_sink {
 public:
  virtual ~gate_sink() = default;
  /// The result of the index-th job (from 0), its counterexamples saved.
  virtual void take(const gate_result& g, std::size_t index) = 0;
  /// Every result, after each was taken.
  virtual void finish(const std::vector<gate_result>& results) { (void)results; }
};

/// The gate as `attncheck gate` runs it: gate_subjects, then per subject in
/// order save_counterexamples and each sink's take, in the sinks' order;
/// then each sink's finish.
std::vector<gate_result> run_gates(const run_config& run, const std::vector<subject_job>& jobs,
                                   const std::vector<gate_sink*>& sinks);
/// The same for one subject.
gate_result run_gate(const run_config& run, const subject_job& job, const std::vector<gate_sink*>& sinks);

/// Replays a saved case file on a subject (in a child process when isolate,
/// so a crash or hang is reported, not suffered); prints one screen; returns 0
/// when it now passes, 1 while it still fails, 3 when the law or case is
/// skipped for this subject (nothing was replayed).
/// What a repro replayed, for its report (write_repro_html).
struct repro_result {
  std::string file, law, subject_name, subject_spec;
  attn_case c;
  law_outcome outcome;
  std::optional<heat_map> heat;  ///< from the replay itself; none when the process died
  int status = 0;                ///< what repro_case_file returned
};

int repro_case_file(const std::string& file, const std::string& subject_spec, const std::string& law_override, std::ostream& out,
                    bool isolate = true, double timeout_s = run_default::repro_timeout, repro_result* result = nullptr);

}  // namespace attncheck
