// One run configuration: the settings of a gate run (or of one law run), the
// one table of their defaults, and the one key=value codec that the CLI
// (`attncheck gate --run`), the gtest macro (ATTNCHECK_LAW_*), the Python
// module's gate() and the library read them with.
//
// The text form is "key=value key=value" (commas or spaces between fields;
// `only` may repeat). minimal_string() writes only what differs from
// `attncheck gate`'s defaults, so the string a report header prints after
// "run:" reproduces the run: `attncheck gate --subject S --run 'STRING'`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attncheck/isolate.hpp"

namespace attncheck {

/// The one table of defaults. Each value is what `attncheck gate` runs
/// with when no option is given; an entry point that differs on purpose is
/// stated here, with the value it uses (run_defaults applies them).
namespace run_default {
inline constexpr std::uint64_t seed = 1;                    ///< rapidcheck seed: the same seed gives the same cases
inline constexpr int cases = 1000;                          ///< cases per law: `attncheck gate`, `attncheck mutation`
inline constexpr int quick_cases = 100;                     ///< ...the quick entry points: run_law (run_options), the library's
                                                            ///< gate (entry_point::library), ATTNCHECK_GATE_TESTS, Python gate()
inline constexpr int max_cases = 10'000'000;                ///< the largest cases value the codec takes
inline constexpr int max_size = 100;                        ///< rapidcheck's size ceiling
inline constexpr std::int64_t max_work = 8'000'000;         ///< largest B*Hq*Lq*Lk*(D+Dv) while a law's budget lasts
inline constexpr std::int64_t max_work_limit = 20'000'000;  ///< largest max_work: ~10 s of the MPFR oracle for one case
inline constexpr std::int64_t small_work = 100'000;         ///< largest case once the law's budget is spent
inline constexpr std::int64_t variant_max_work = 400'000;   ///< largest case with a contract 1.1 variant: the fast
                                                            ///< tier does not cover them, so MPFR does (~0.2 s)
inline constexpr std::int64_t law_work = 150'000'000;       ///< each law's budget of multiply-adds on large cases
inline constexpr std::int64_t gtest_law_work = 20'000'000;  ///< ...ATTNCHECK_GATE_TESTS, ctest law properties: a fifth
inline constexpr int jobs = 0;                              ///< laws at once; 0: the number of CPUs, at most 8 (`attncheck gate`)
inline constexpr int library_jobs = 2;                      ///< ...the library's gate (entry_point::library), Python gate();
                                                            ///< `attncheck mutation`: the CPUs, at most 8, times its --jobs
inline constexpr double law_timeout = 600;          ///< seconds one law may run in its child (docs/cli.md "Hangs and timeouts")
inline constexpr double python_law_timeout = 120;   ///< ...Python gate()
inline constexpr double mutation_law_timeout = 60;  ///< ...`attncheck mutation` (its --law-timeout)
inline constexpr double repro_timeout = 120;        ///< seconds `attncheck repro`'s child may replay a case before it is hung
inline constexpr double progress_seconds = 10;      ///< seconds between plain progress lines (not a terminal)
inline constexpr const char* out_dir = "attncheck-out";  ///< where counterexamples are saved
// watchdog: watchdog_limits{} (isolate.hpp): floor 30 s, factor 50.
// isolate true, strict false, prob_fails_gate false, strict_declines false, stats false; only, reproduce, json, junit empty.
}  // namespace run_default

/// The settings of one run. Its member initializers are `attncheck gate`'s
/// defaults (the table above); run_defaults(entry) gives another entry point's.
struct run_config {
  std::uint64_t seed = run_default::seed;
  int cases = run_default::cases;
  int max_size = run_default::max_size;
  std::int64_t max_work = run_default::max_work;
  std::int64_t small_work = run_default::small_work;
  std::int64_t law_work = run_default::law_work;
  std::string reproduce;          ///< RC_PARAMS reproduce string of an earlier failure
  std::vector<std::string> only;  ///< law names or group prefixes; empty: every law
  int jobs = run_default::jobs;
  double law_timeout = run_default::law_timeout;
  watchdog_limits watchdog{};
  bool isolate = true;           ///< each law in a child process
  bool strict = false;           ///< refuse subjects that declare u > 2^-24
  bool prob_fails_gate = false;  ///< a FAIL(prob) fails the gate too (docs/bound.md)
  bool strict_declines = false;  ///< a case the subject declines fails the law (docs/abi.md "Return status: declined")
  // Outputs: where results go and how progress is shown; not part of the
  // run_string (they change no verdict).
  std::string out_dir = run_default::out_dir;
  std::string json;   ///< per-law results as JSON; empty: none
  std::string junit;  ///< JUnit XML; empty: none
  double progress_seconds = run_default::progress_seconds;
  bool stats = false;     ///< print the realized distribution of the cases
  bool progress = false;  ///< a live progress line (a terminal); set by the caller, not a key

  bool operator==(const run_config&) const;
};

/// The entry points whose defaults differ from `attncheck gate`'s (see run_default).
enum class entry_point { gate_cli, library, gtest, python, mutation };

/// The defaults of a run started from `e`.
run_config run_defaults(entry_point e = entry_point::gate_cli);

/// The jobs a run uses: `jobs`, or for 0 the number of CPUs, at most 8.
int resolved_jobs(int jobs);

/// Sets one field from its text; throws input_error(source, ...) naming the
/// key and its limit on an unknown key or a bad value. `only` appends.
void set_run_field(run_config& c, std::string_view key, std::string_view value, const std::string& source);

/// Applies "key=value key=value" (or comma separated) to `base`; throws as set_run_field.
run_config parse_run_config(std::string_view text, run_config base, const std::string& source);

/// Every field of `c` that differs from `base`, as "key=value key=value" in
/// table order (empty when none): parse_run_config(minimal_string(c), base) == c.
std::string minimal_string(const run_config& c, const run_config& base = run_config{});

/// The string that reproduces a run: minimal_string of the fields that decide
/// verdicts (not jobs, files or progress), against `attncheck gate`'s defaults.
std::string run_string(const run_config& c);

/// Copies one field (by key) from `from` to `to` (the CLI: a flag given beside --run wins).
void copy_run_field(run_config& to, const run_config& from, std::string_view key);

/// The keys, in table order, with their one-line meaning.
struct run_key {
  const char* key;
  const char* what;
  bool verdict;  ///< part of run_string
};
const std::vector<run_key>& run_keys();

}  // namespace attncheck
