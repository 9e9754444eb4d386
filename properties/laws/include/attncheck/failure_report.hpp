// One failure, as a structured value: what kind of failure it is, the law, the
// case, the worst element, the saved file and the replay command. The gate,
// the repro command and the fuzzers fill one and print it with print_failure;
// the gate's JSON, JUnit, the HTML report and the mutation table read its
// kind, never the message text.
#pragma once

#include <cstdint>
#include <string>

namespace attncheck {

/// What failed. law: the law's own comparison; crash: the subject's process
/// died; hang: one call into the subject ran past its per-call watchdog limit
/// (or, in a replay, the process past its timeout); subject_error: the subject
/// returned an error or wrote outside its output; harness: attncheck could not
/// run the law (a case it cannot build, a rapidcheck error); timeout: the law
/// ran out of its own time (--law-timeout) with no call past its watchdog
/// limit, the gate's problem, not the subject's (docs/cli.md, "Hangs and timeouts").
enum class failure_kind : std::uint8_t { law, crash, hang, subject_error, harness, timeout };

/// "law", "crash", "hang", "subject_error", "harness", "timeout": the JSON field and the JUnit failure type.
const char* failure_kind_name(failure_kind k);
/// The kind of a failure_kind_name; law for anything else.
failure_kind failure_kind_of(const std::string& name);

/// One screen of a failure (or of a replay's verdict). Every line is printed
/// only when its field is set, in this order (the subject line when either
/// subject field is).
struct failure_report {
  failure_kind kind = failure_kind::law;
  std::string verdict = "FAIL";  ///< the first word: FAIL, or PASS for a replay that now passes
  std::string law;
  std::string tag;  ///< after the law on the first line, e.g. "(fuzz)"
  std::string subject_name, subject_spec;
  std::string case_line;  ///< the one-line form of the case
  std::string cases;      ///< "N run, M shrink steps"
  std::string run;        ///< the run that failed (a fuzzer's cache plan)
  std::string file;       ///< the case file replayed
  std::string message;    ///< why
  std::string worst;      ///< worst_element::describe()
  std::string judged;     ///< what a replay judged
  std::string saved_file;
  std::string replay;     ///< the command that replays saved_file
  std::string not_saved;  ///< why saving the case failed
  std::string reproduce;  ///< rapidcheck's reproduce string
};

/// The console screen of a failure: "FAIL law", then "  subject:  ..." and the other set fields.
std::string print_failure(const failure_report& r);

/// A subject spec as a saved case and a replay line record it, to load from
/// any folder: a plugin's path made absolute, and a Python subject's file
/// (python:path/to/k.py:fn) too, options kept; other specs unchanged.
std::string absolute_spec(const std::string& spec);

/// The command that replays a saved case, from any folder: the attncheck of
/// the running build (found from /proc/self/exe), the case file and the
/// subject's paths all absolute; never a hard-coded path.
std::string replay_command(const std::string& saved_file, const std::string& subject_spec);

}  // namespace attncheck
