// attncheck gate / repro / laws / case.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "attncheck/case_file.hpp"
#include "attncheck/gate.hpp"
#include "attncheck/report.hpp"
#include "attncheck/report_html.hpp"
#include "cli_state.hpp"
#include "commands.hpp"

namespace attncheck::cli {

namespace {

// What `attncheck gate` parses into: the run (run_config, starting from the
// table's defaults), its subjects and the HTML report. One per add_gate,
// owned by its runner.
struct gate_cmd {
  run_config run;
  std::string run_text;                                     // --run: key=value,... (flags given beside it win)
  std::vector<std::string> subjects;                        // repeatable --subject: each gated in turn
  std::string html;                                         // one report for every subject
  console_options console;                                  // --verbose: every failure's full screen
  std::vector<std::pair<CLI::Option*, const char*>> flags;  // each run flag and its key
};

// A default as the help text prints it: 120, 0.5 (gate.hpp's one number printer).
std::string number_text(double x) { return gate_detail::number_text(x, "%g"); }

std::string run_key_names() {
  std::string s;
  for (const auto& k : run_keys()) s += (s.empty() ? "" : ", ") + std::string(k.key);
  return s;
}

// Every output path is checked before any law runs: a report that cannot be
// written is one line and exit 2 at once, not a verdict followed minutes later
// by the error. Nothing is created here: a file's folder must exist (the
// writers do not make it) and take writes, as must an existing file; the
// counterexample folder, made when a law fails, needs its nearest existing
// ancestor to be a folder that takes writes.
void check_output_path(const std::string& path, const char* flag, bool folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p = fs::absolute(path, ec);
  const auto refuse = [&](const std::string& why) {
    throw input_error(flag, "cannot write '" + path + "': " + why + " (checked before any law runs)");
  };
  if (!folder && fs::is_directory(p, ec)) refuse("it is a folder");
  if (fs::exists(p, ec)) {
    if (folder && !fs::is_directory(p, ec)) refuse("it exists and is not a folder");
    if (access(p.c_str(), W_OK) != 0) refuse("it is not writable");
    return;
  }
  fs::path up = p.parent_path();
  if (folder)
    while (!up.empty() && !fs::exists(up, ec) && up != up.parent_path()) up = up.parent_path();
  if (!fs::is_directory(up, ec)) refuse("its folder '" + up.string() + "' does not exist or is not a folder");
  if (access(up.c_str(), W_OK) != 0) refuse("its folder '" + up.string() + "' is not writable");
}

int run_gate_cmd(gate_cmd& cmd) {
  run_config run = cmd.run;
  if (!cmd.run_text.empty()) {
    run = parse_run_config(cmd.run_text, run_config{}, "--run");
    for (const auto& [flag, key] : cmd.flags)
      if (flag->count() > 0) copy_run_field(run, cmd.run, key);
  }
  run.progress = isatty(STDERR_FILENO) != 0;
  if (cmd.subjects.empty()) cmd.subjects.push_back("builtin");
  std::vector<subject_job> jobs;
  for (std::size_t k = 0; k < cmd.subjects.size(); ++k) {
    subject_job job;
    job.subject = cmd.subjects[k];
    if (cmd.subjects.size() > 1) {
      // One JUnit/JSON file and one counterexample folder per subject.
      // gate.xml -> gate.1.xml, gate.2.xml, ...
      const auto tagged = [k](const std::string& path) {
        const auto slash = path.find_last_of('/');
        const auto dot = path.find_last_of('.');
        const bool ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
        const std::string tag = "." + std::to_string(k + 1);
        return ext ? path.substr(0, dot) + tag + path.substr(dot) : path + tag;
      };
      if (!run.junit.empty()) job.junit = tagged(run.junit);
      if (!run.json.empty()) job.json = tagged(run.json);
      job.out_dir = run.out_dir + "/" + std::to_string(k + 1);
    }
    jobs.push_back(job);
  }
  if (!cmd.html.empty()) check_output_path(cmd.html, "--html", false);
  for (const subject_job& job : jobs) {
    const std::string& junit = job.junit.empty() ? run.junit : job.junit;
    const std::string& json = job.json.empty() ? run.json : job.json;
    if (!junit.empty()) check_output_path(junit, "--junit", false);
    if (!json.empty()) check_output_path(json, "--json", false);
    check_output_path(job.out_dir.empty() ? run.out_dir : job.out_dir, "--out", true);
  }
  // 1 when a law failed or judged too little (or, with --prob-fails-gate, failed its probabilistic verdict); else 4 when a law ran out of its
  // own time (a gate problem: raise --law-timeout); 0 when every law passed or was skipped.
  int status = 0;
  console_sink console(std::cout, cmd.console);
  result_files_sink files;
  std::optional<html::gate_html_sink> report;
  std::vector<gate_sink*> sinks{&console, &files};
  if (!cmd.html.empty()) sinks.push_back(&report.emplace(cmd.html, std::cout));
  int failing = 0, timing_out = 0;
  const std::vector<gate_result> results = run_gates(run, jobs, sinks);
  for (const gate_result& r : results)
    if (r.failed() - r.timed_out() > 0 || r.unjudged() || (r.run.prob_fails_gate && r.prob_failed()))
      status = 1, ++failing;
    else if (r.timed_out())
      status = status == 0 ? 4 : status, ++timing_out;
  // Several subjects: one combined verdict after their reports.
  if (results.size() > 1)
    std::cout << "\nall " << results.size() << " subjects: " << results.size() - failing - timing_out << " PASS, " << failing
              << " FAIL" << (timing_out ? ", " + std::to_string(timing_out) + " TIMEOUT" : "") << "  -> "
              << (status == 0   ? "PASS"
                  : status == 4 ? "TIMEOUT"
                                : "FAIL")
              << "\n";
  return status;
}

struct repro_args {
  std::string file, subject, law, html;  // subject empty: the one the file records
  double timeout = run_default::repro_timeout;
} rargs;

int run_repro() {
  repro_result r;
  const int status = repro_case_file(rargs.file, rargs.subject, rargs.law, std::cout, true, rargs.timeout, &r);
  if (!rargs.html.empty()) {
    html::write_repro_html(rargs.html, r);
    std::cout << "report: " << rargs.html << "\n";
  }
  return status;
}

int run_laws() {
  for (const auto& l : all_laws()) std::cout << l.name << "\n    " << l.summary << "\n";
  return 0;
}

struct case_args {
  std::string line, out;
} cargs;

int run_case() {
  attn_case c = parse_line(cargs.line);
  materialize(c);
  case_record rec{c, {}, {}, "made by attncheck case"};
  if (cargs.out.empty() || cargs.out == "-") {
    std::cout << format_case_file(rec);
  } else {
    write_case_file(cargs.out, rec);
    std::cerr << "wrote " << cargs.out << "\n";
  }
  return 0;
}

}  // namespace

void add_gate(CLI::App& app) {
  auto cmd = std::make_shared<gate_cmd>();
  run_config& run = cmd->run;
  // A run flag: its option, remembered with its key so that it wins over --run.
  const auto flag = [&cmd](CLI::Option* o, const char* key) {
    cmd->flags.emplace_back(o, key);
    return o;
  };
  auto* g = app.add_subcommand("gate",
                               "Check a subject against every law; exit 0 when every law passes, 1 when a law fails "
                               "(or judges too little), 4 when none failed but a law ran out of its --law-timeout "
                               "(a gate problem, not the subject's), 2 on bad input");
  g->add_option(
      "--subject", cmd->subjects,
      "NAME|PATH[:key=value,...]: builtin (default), builtin:k_tile=64, builtin:tiles=tiny, naive, a plugin .so[:options], or python:MODULE:CALLABLE[:options] (docs/python.md); "
      "repeatable: the subjects are gated together, files get .N before their extension");
  flag(g->add_option("--cases", run.cases, "cases per law (default " + std::to_string(run_default::cases) + ")"), "cases")
      ->check(number_in(1, 10'000'000));
  flag(g->add_option("--seed", run.seed, "rapidcheck seed; the same seed gives the same cases and verdicts"), "seed");
  flag(g->add_option("--only", run.only, "run only these laws or groups (repeatable), e.g. --only cache --only gqa"), "only");
  flag(g->add_option("--junit", run.junit, "write JUnit XML here"), "junit");
  flag(g->add_option("--json", run.json, "write per-law results as JSON here (verdict, cases, shrink steps, counterexample)"),
       "json");
  g->add_option("--html", cmd->html,
                "write one self-contained HTML report here (every subject: laws, failure cards with heat maps, "
                "histograms of observed/bound)");
  flag(g->add_option("--progress-seconds", run.progress_seconds,
                     "seconds between plain progress lines when standard error is not a terminal (default " +
                         number_text(run_default::progress_seconds) + ")"),
       "progress_seconds")
      ->check(number_in(0.1, 3600.0));
  flag(
      g->add_option("--out", run.out_dir, std::string("save shrunk counterexamples here (default ") + run_default::out_dir + ")"),
      "out");
  flag(g->add_option("--reproduce", run.reproduce, "an RC_PARAMS reproduce string from an earlier failure"), "reproduce");
  flag(g->add_option("--law-timeout", run.law_timeout,
                     "seconds one law may run, shrinking included; a law still running then is a timeout (exit 4 when "
                     "nothing failed), not a hang (default " +
                         number_text(run_default::law_timeout) + ")"),
       "law_timeout")
      ->check(number_in(0.1, 86400.0));
  flag(
      g->add_option("--watchdog-floor", run.watchdog.floor_s,
                    "seconds one call into the subject may always run before it is declared hung (default " +
                        number_text(watchdog_limits{}.floor_s) + "; the limit is max(floor, factor x the call's expected time))"),
      "watchdog_floor")
      ->check(number_in(0.01, 86400.0));
  flag(g->add_option("--watchdog-factor", run.watchdog.factor,
                     "a call is hung past this multiple of its expected time (its work times the seconds per work of the "
                     "law's calls so far), if that exceeds the floor (default " +
                         number_text(watchdog_limits{}.factor) + ")"),
       "watchdog_factor")
      ->check(number_in(1.0, 1e6));
  flag(g->add_flag("!--no-isolate", run.isolate, "run laws in this process (a crashing subject then takes the gate down)"),
       "isolate");
  flag(g->add_option("--max-work", run.max_work,
                     "largest B*Hq*Lq*Lk*(D+Dv) of a generated case while a law's work budget lasts (default " +
                         std::to_string(run_default::max_work) + ")"),
       "max_work")
      ->check(number_in(std::int64_t{16}, run_default::max_work_limit));
  flag(g->add_option("--law-work", run.law_work,
                     "each law's budget of multiply-adds on large cases; after it, cases stay small (default " +
                         std::to_string(run_default::law_work) + ")"),
       "law_work")
      ->check(number_in(std::int64_t{0}, std::int64_t{1} << 50));
  flag(g->add_option(
           "--jobs", run.jobs,
           "laws checked at once, each in its own process (0, the default: the number of CPUs, at most 8; as --run jobs=)"),
       "jobs")
      ->check(number_in(0, 64));
  g->add_flag("--verbose", cmd->console.verbose,
              "print every failing law's full screen with its rapidcheck reproduce string (default: one summary, the "
              "most informative screen, one line per other law)");
  flag(g->add_flag("--stats", run.stats, "print the realized distribution of the cases run, with each share's floor"), "stats");
  flag(g->add_flag("--strict", run.strict, "refuse a subject that declares u > 2^-24 (compute coarser than f32)"), "strict");
  flag(g->add_flag(
           "--prob-fails-gate", run.prob_fails_gate,
           "a FAIL(prob) of the probabilistic verdict fails the gate too (default: reported, never gating; docs/bound.md)"),
       "prob_fails_gate");
  flag(g->add_flag("--strict-declines", run.strict_declines,
                   "a case the subject declines (a version 4 subject's ATTNCHECK_DECLINED) fails the law (default: "
                   "counted with its reason and replaced by another case)"),
       "strict_declines");
  g->add_option("--run", cmd->run_text,
                "the run's settings as key=value,... (the string the report prints after 'run:' and the JSON as \"run\"; "
                "keys: " +
                    run_key_names() + "); a flag given beside it wins");
  register_runner(g, [cmd] { return run_gate_cmd(*cmd); });
}

void add_repro(CLI::App& app) {
  auto* r = app.add_subcommand("repro", "Replay a saved counterexample; exit 1 while it still fails");
  r->add_option("file", rargs.file, "case file saved by the gate or the fuzzers")->required();
  r->add_option(
      "--subject", rargs.subject,
      "NAME|PATH[:key=value,...]: the subject to replay on (default: the one the file records), e.g. builtin, builtin:k_tile=64, naive, a plugin .so[:options], or python:MODULE:CALLABLE[:options]");
  r->add_option("--law", rargs.law, "law to replay (default: the law named in the file)");
  r->add_option("--html", rargs.html, "write a self-contained HTML report here (the case, its worst elements, the heat map)");
  r->add_option("--timeout", rargs.timeout,
                "seconds before the subject is declared hung (default " + number_text(run_default::repro_timeout) + ")")
      ->check(number_in(0.1, 86400.0));
  register_runner(r, run_repro);
}

void add_laws(CLI::App& app) {
  auto* l = app.add_subcommand("laws", "List the laws the gate checks");
  register_runner(l, run_laws);
}

void add_case(CLI::App& app) {
  auto* c = app.add_subcommand(
      "case", "Write the case file of a one-line form, e.g. 'ATTN(b=2,hq=6,hkv=2,lq=1,lk=3,d=3,dv=3,causal,seed=7)'");
  c->add_option("line", cargs.line, "the one-line form")->required();
  c->add_option("-o,--out", cargs.out, "output file (default: standard output)");
  register_runner(c, run_case);
}

}  // namespace attncheck::cli
