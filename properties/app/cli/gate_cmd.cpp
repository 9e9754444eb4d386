// attncheck gate / repro / laws / case.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <iostream>

#include "attncheck/case_file.hpp"
#include "attncheck/gate.hpp"
#include "attncheck/report.hpp"
#include "attncheck/report_html.hpp"
#include "cli_state.hpp"
#include "commands.hpp"

namespace attncheck::cli {

namespace {

gate_options gate_args;
std::uint64_t gate_seed = 1;
int gate_cases = default_gate_cases();
int gate_jobs = 0;                       // 0: the number of CPUs, at most 8
std::vector<std::string> gate_subjects;  // repeatable --subject: each gated in turn
std::string gate_html;                   // one report for every subject

// A default as the help text prints it: 120, 0.5.
std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

int run_gate_cmd() {
  gate_args.run.seed = gate_seed;
  gate_args.run.cases = gate_cases;
  gate_args.progress = isatty(STDERR_FILENO) != 0;
  gate_args.jobs = gate_jobs > 0 ? gate_jobs : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8);
  if (gate_subjects.empty()) gate_subjects.push_back("builtin");
  std::vector<gate_options> all;
  for (std::size_t k = 0; k < gate_subjects.size(); ++k) {
    gate_options opt = gate_args;
    opt.subject = gate_subjects[k];
    if (gate_subjects.size() > 1) {
      // One JUnit/JSON file and one counterexample folder per subject.
      // gate.xml -> gate.1.xml, gate.2.xml, ...
      const auto tagged = [k](const std::string& path) {
        const auto slash = path.find_last_of('/');
        const auto dot = path.find_last_of('.');
        const bool ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
        const std::string tag = "." + std::to_string(k + 1);
        return ext ? path.substr(0, dot) + tag + path.substr(dot) : path + tag;
      };
      if (!opt.junit.empty()) opt.junit = tagged(opt.junit);
      if (!opt.json.empty()) opt.json = tagged(opt.json);
      opt.out_dir += "/" + std::to_string(k + 1);
    }
    all.push_back(opt);
  }
  // 1 when a law failed or judged too little (or, with --prob-fails-gate, failed its probabilistic verdict); else 4 when a law ran out of its
  // own time (a gate problem: raise --law-timeout); 0 when every law passed or was skipped.
  int status = 0;
  const auto results = run_gates(all, std::cout);
  for (const gate_result& r : results)
    if (r.failed() - r.timed_out() > 0 || r.unjudged() || (r.options.prob_fails_gate && r.prob_failed()))
      status = 1;
    else if (r.timed_out() && status == 0)
      status = 4;
  if (!gate_html.empty()) {
    html::write_gate_html(gate_html, results);
    std::cout << "report: " << gate_html << "\n";
  }
  return status;
}

struct repro_args {
  std::string file, subject = "builtin", law, html;
  double timeout = 120;
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

int default_gate_cases() { return 1000; }

void add_gate(CLI::App& app) {
  auto* g = app.add_subcommand("gate",
                               "Check a subject against every law; exit 0 when every law passes, 1 when a law fails "
                               "(or judges too little), 4 when none failed but a law ran out of its --law-timeout "
                               "(a gate problem, not the subject's), 2 on bad input");
  g->add_option(
      "--subject", gate_subjects,
      "NAME|PATH[:key=value,...]: builtin (default), builtin:k_tile=64, builtin:tiles=tiny, naive, a plugin .so[:options], or python:MODULE:CALLABLE[?options] (docs/python.md); "
      "repeatable: the subjects are gated together, files get .N before their extension");
  g->add_option("--cases", gate_cases, "cases per law (default " + std::to_string(default_gate_cases()) + ")")
      ->check(CLI::Range(1, 10'000'000));
  g->add_option("--seed", gate_seed, "rapidcheck seed; the same seed gives the same cases and verdicts");
  g->add_option("--only", gate_args.only, "run only these laws or groups (repeatable), e.g. --only cache --only gqa");
  g->add_option("--junit", gate_args.junit, "write JUnit XML here");
  g->add_option("--json", gate_args.json, "write per-law results as JSON here (verdict, cases, shrink steps, counterexample)");
  g->add_option("--html", gate_html,
                "write one self-contained HTML report here (every subject: laws, failure cards with heat maps, "
                "histograms of observed/bound)");
  g->add_option("--progress-seconds", gate_args.progress_seconds,
                "seconds between plain progress lines when standard error is not a terminal (default 10)")
      ->check(CLI::Range(0.1, 3600.0));
  g->add_option("--out", gate_args.out_dir, "save shrunk counterexamples here (default attncheck-out)");
  g->add_option("--reproduce", gate_args.run.reproduce, "an RC_PARAMS reproduce string from an earlier failure");
  g->add_option("--law-timeout", gate_args.law_timeout,
                "seconds one law may run, shrinking included; a law still running then is a timeout (exit 4 when "
                "nothing failed), not a hang (default " +
                    number_text(gate_options{}.law_timeout) + ")")
      ->check(CLI::Range(0.1, 86400.0));
  g->add_option("--watchdog-floor", gate_args.watchdog.floor_s,
                "seconds one call into the subject may always run before it is declared hung (default " +
                    number_text(watchdog_limits{}.floor_s) + "; the limit is max(floor, factor x the call's expected time))")
      ->check(CLI::Range(0.01, 86400.0));
  g->add_option("--watchdog-factor", gate_args.watchdog.factor,
                "a call is hung past this multiple of its expected time (its work times the seconds per work of the "
                "law's calls so far), if that exceeds the floor (default " +
                    number_text(watchdog_limits{}.factor) + ")")
      ->check(CLI::Range(1.0, 1e6));
  g->add_flag("!--no-isolate", gate_args.isolate, "run laws in this process (a crashing subject then takes the gate down)");
  g->add_option("--max-work", gate_args.run.gen.max_work,
                "largest B*Hq*Lq*Lk*(D+Dv) of a generated case while a law's work budget lasts (default " +
                    std::to_string(gen_options{}.max_work) + ")")
      ->check(CLI::Range(std::int64_t{16}, max_work_limit));
  g->add_option("--law-work", gate_args.run.gen.law_work,
                "each law's budget of multiply-adds on large cases; after it, cases stay small (default " +
                    std::to_string(gen_options{}.law_work) + ")")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 50));
  g->add_option("--jobs", gate_jobs, "laws checked at once, each in its own process (default: the number of CPUs, at most 8)")
      ->check(CLI::Range(1, 64));
  g->add_flag("--stats", gate_args.stats, "print the realized distribution of the cases run, with each share's floor");
  g->add_flag("--strict", gate_args.strict, "refuse a subject that declares u > 2^-24 (compute coarser than f32)");
  g->add_flag("--prob-fails-gate", gate_args.prob_fails_gate,
              "a FAIL(prob) of the probabilistic verdict fails the gate too (default: reported, never gating; docs/bound.md)");
  register_runner(g, run_gate_cmd);
}

void add_repro(CLI::App& app) {
  auto* r = app.add_subcommand("repro", "Replay a saved counterexample; exit 1 while it still fails");
  r->add_option("file", rargs.file, "case file saved by the gate or the fuzzers")->required();
  r->add_option(
      "--subject", rargs.subject,
      "NAME|PATH[:key=value,...]: builtin (default), builtin:k_tile=64, builtin:tiles=tiny, naive, a plugin .so[:options], or python:MODULE:CALLABLE[?options]");
  r->add_option("--law", rargs.law, "law to replay (default: the law named in the file)");
  r->add_option("--html", rargs.html, "write a self-contained HTML report here (the case, its worst elements, the heat map)");
  r->add_option("--timeout", rargs.timeout, "seconds before the subject is declared hung (default 120)")
      ->check(CLI::Range(0.1, 86400.0));
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
