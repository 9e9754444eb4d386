// attncheck mutation: proves the gate kills every deliberate bug of the
// bundled kernel (impl/src/mutation.hpp, built into plugins/libattnimpl_mutant.so).
//
// For each mutant and seed it gates the mutation plugin in this process
// (subject PLUGIN:mutant=NAME,q_tile=..,k_tile=..,split_keys=..): one
// gate_subjects schedule of every (mutant, seed), each law in its own child as
// the gate runs it (each instance sets the kernel's mutant switch at every
// entry, so mutants share a schedule). Per run it saves the counterexamples and
// writes the gate's log and JSON under --out, and it prints one table row: killed on every seed?, by which laws, cases until the
// first failure, the shrunk shape, seconds to kill. The first seed runs every
// law (all killing laws are listed); later seeds run only the laws expected to
// kill the mutant (--all-laws runs every law on every seed). A control run with
// no mutant must pass, or the kills would mean nothing. Exit 0 only when every
// mutant is killed on every seed by one of its expected laws.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "attncheck/case.hpp"
#include "attncheck/failure_report.hpp"
#include "attncheck/mutant_catalogue.hpp"
#include "attncheck/report.hpp"
#include "attncheck/report_html.hpp"
#include "cli_state.hpp"
#include "commands.hpp"

namespace attncheck::cli {

namespace {

struct options {
  std::string plugin;
  std::vector<std::uint64_t> seeds{1, 2, 3, 4};
  int cases = run_default::cases;                          ///< the gate's
  double law_timeout = run_default::mutation_law_timeout;  ///< a hang is a kill: shorter than the gate's
  std::vector<std::string> mutants;                        ///< empty: all
  std::string out = "mutation-out";
  std::string markdown;
  std::string html;
  bool quick = false;
  bool all_laws = false;
  bool expected_only = false;  ///< every seed runs only each mutant's expected laws
  int jobs = 1;
  std::string tiles = "2,3,6";  ///< q_tile,k_tile,split_keys; 0 = production
} opt;

std::int64_t tile[3] = {2, 3, 6};

std::string tile_options() {
  return "q_tile=" + std::to_string(tile[0]) + ",k_tile=" + std::to_string(tile[1]) + ",split_keys=" + std::to_string(tile[2]);
}

void parse_tiles() {
  std::istringstream in(opt.tiles);
  std::string part;
  int n = 0;
  while (std::getline(in, part, ',')) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (n >= 3 || used != part.size() || v < 0 || v > 65536)
      throw input_error("--tiles", "'" + opt.tiles + "': expected q_tile,k_tile,split_keys, each in [0, 65536] (0: production)");
    tile[n++] = v;
  }
  if (n != 3) throw input_error("--tiles", "'" + opt.tiles + "': expected three numbers q_tile,k_tile,split_keys");
}

struct run_result {
  bool ran = false;       // the gate produced its JSON
  bool killed = false;    // some law failed
  bool expected = false;  // one of the expected laws failed
  std::vector<std::string> killers;
  int cases = -1;                // cases of the first expected law that failed
  double seconds = 0;            // that law's seconds (cases + shrinking)
  double wall = 0;               // seconds: the control's gate call; a run's laws together
  std::string shape, line, how;  // shrunk shape, its case line, crash/hang note
  std::string first_expected;    // the expected law those figures are from
};

std::string self_path() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("attncheck") : p.string();
}

// The run every (mutant, seed) job shares: the table's mutation defaults with
// this command's --cases, --law-timeout and --jobs.
run_config mutation_run() {
  run_config run = run_defaults(entry_point::mutation);
  run.cases = opt.cases;
  run.law_timeout = opt.law_timeout;
  // Laws at once in the whole schedule: the gate's default (the CPUs, at most 8) per gate run of --jobs.
  run.jobs = resolved_jobs(0) * std::max(1, opt.jobs);
  run.progress = isatty(STDERR_FILENO) != 0;
  return run;
}

// The job of one (mutant, seed): every law, or only the mutant's expected laws.
subject_job gate_of(const mutant_spec& m, std::uint64_t seed, bool every_law) {
  const std::string tag = std::string(m.name) + "-seed" + std::to_string(seed);
  const auto base = std::filesystem::path(opt.out) / tag;
  subject_job g;
  g.subject = opt.plugin + ":mutant=" + m.name + "," + tile_options();
  g.seed = seed;
  g.json = base.string() + ".json";
  g.out_dir = base.string();
  if (!every_law) g.only = m.laws;
  return g;
}

// Saves a run's counterexamples, writes its log (the gate's console report)
// and JSON, and reads its row's figures from the result.
run_result result_of(const mutant_spec& m, gate_result& g) {
  run_result r;
  save_counterexamples(g);
  std::ofstream log(g.run.out_dir + ".log");
  print_gate(g, log, {.verbose = true});  // the log keeps every screen
  write_json(g.run.json, g);
  r.ran = true;
  for (const auto& l : g.reports) {
    r.wall += l.seconds;
    // A timeout is the gate's problem, not a kill.
    if (l.v != verdict::fail || timed_out(l)) continue;
    r.killed = true;
    r.killers.push_back(l.law);
    const bool exp = std::find(m.laws.begin(), m.laws.end(), l.law) != m.laws.end();
    if (exp && !r.expected) {
      r.expected = true;
      r.first_expected = l.law;
      r.cases = l.cases;
      r.seconds = l.seconds;
      if (l.failure.kind == failure_kind::hang)
        r.how = "hang";
      else if (l.failure.kind == failure_kind::crash)
        r.how = "crash";
      if (l.counterexample) {
        const attn_case& c = *l.counterexample;
        std::ostringstream o;
        o << c.b << "," << c.hq << "," << c.hkv << "," << c.lq << "," << c.lk << "," << c.d << "," << c.dv;
        r.shape = o.str();
        r.line = to_line(c);
      }
    }
  }
  return r;
}

/// The mutants the plugin offers; they must be exactly the ones in the table.
std::vector<std::string> plugin_mutants() {
  void* h = dlopen(opt.plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw input_error("--plugin", std::string("cannot load: ") + dlerror());
  using list_fn = const char* const* (*)();
  auto fn = reinterpret_cast<list_fn>(dlsym(h, "attnimpl_mutants"));
  if (!fn) throw input_error("--plugin", opt.plugin + " exports no attnimpl_mutants (not the mutation plugin?)");
  std::vector<std::string> v;
  for (const char* const* p = fn(); *p; ++p) v.emplace_back(*p);
  return v;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string o;
  for (const auto& s : v) o += (o.empty() ? "" : sep) + s;
  return o;
}

int run_mutation() {
  if (opt.plugin.empty()) {
    // Next to the binary (a build tree), or in lib/attncheck/plugins of an install.
    const auto bin = std::filesystem::path(self_path()).parent_path();
    opt.plugin = (bin / "plugins" / "libattnimpl_mutant.so").string();
    const auto installed = bin.parent_path() / "lib" / "attncheck" / "plugins" / "libattnimpl_mutant.so";
    if (!std::filesystem::exists(opt.plugin) && std::filesystem::exists(installed)) opt.plugin = installed.string();
  }
  if (opt.quick) opt.seeds.resize(1);
  parse_tiles();
  // Every mutant the plugin offers has a row, and every row a mutant.
  const auto offered = plugin_mutants();
  std::set<std::string> known;
  for (const auto& m : mutant_specs()) known.insert(m.name);
  for (const auto& n : offered)
    if (!known.count(n))
      throw input_error("mutation",
                        "the plugin's mutant '" + n + "' is not in the mutant list (impl/include/attnimpl/mutants.hpp)");
  if (offered.size() != known.size())
    throw input_error(
        "mutation",
        "the mutant list (impl/include/attnimpl/mutants.hpp) names mutants the plugin lacks: plugin and attncheck come from different builds");
  std::vector<const mutant_spec*> chosen;
  for (const auto& m : mutant_specs()) {
    const bool named = std::find(opt.mutants.begin(), opt.mutants.end(), m.name) != opt.mutants.end();
    if (opt.mutants.empty() || named) chosen.push_back(&m);
  }
  for (const auto& n : opt.mutants)
    if (!known.count(n)) throw input_error("--mutant", "'" + n + "' is not a mutant");
  std::filesystem::create_directories(opt.out);
  std::cout << "attncheck mutation: " << chosen.size() << " mutants of " << opt.plugin << ", seeds";
  for (auto s : opt.seeds) std::cout << " " << s;
  std::cout << ", tiles " << tile_options() << " (0: production), " << opt.cases << " cases per law, law timeout "
            << opt.law_timeout << " s\n"
            << std::flush;

  // The control: the mutation build with no mutant passes the laws used here.
  {
    mutant_spec none{"none", {}, ""};
    std::set<std::string> laws;
    for (const auto* m : chosen) laws.insert(m->laws.begin(), m->laws.end());
    none.laws.assign(laws.begin(), laws.end());
    const auto control_start = std::chrono::steady_clock::now();
    auto control = gate_subjects(mutation_run(), {gate_of(none, opt.seeds[0], !opt.quick)});
    run_result c = result_of(none, control.at(0));
    c.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - control_start).count();
    if (!c.ran || c.killed) {
      std::cout << "control FAILED: the mutation build without a mutant fails " << join(c.killers, ", ") << c.how << " (see "
                << opt.out << "/none-seed" << opt.seeds[0] << ".log)\n";
      return 1;
    }
    std::cout << "control: no mutant, " << (opt.quick ? "expected laws" : "every law") << " pass (" << std::fixed
              << std::setprecision(0) << c.wall << " s)\n"
              << std::flush;
  }

  // (mutant, seed) tasks; the first seed runs every law unless --quick.
  struct task {
    std::size_t m, s;
  };
  std::vector<task> tasks;
  for (std::size_t m = 0; m < chosen.size(); ++m)
    for (std::size_t s = 0; s < opt.seeds.size(); ++s) tasks.push_back({m, s});
  std::vector<std::vector<run_result>> results(chosen.size(), std::vector<run_result>(opt.seeds.size()));
  const auto start = std::chrono::steady_clock::now();
  // One schedule of every (mutant, seed): the gate's progress lines on standard error while it runs.
  std::vector<subject_job> gates;
  for (const auto& t : tasks) {
    const bool every = opt.all_laws || (t.s == 0 && !opt.quick && !opt.expected_only);
    gates.push_back(gate_of(*chosen[t.m], opt.seeds[t.s], every));
  }
  auto gated = gate_subjects(mutation_run(), gates);
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const std::size_t m = tasks[t].m, s = tasks[t].s;
    results[m][s] = result_of(*chosen[m], gated[t]);
    const auto& r = results[m][s];
    std::cerr << "  " << chosen[m]->name << " seed " << opt.seeds[s] << ": "
              << (r.expected ? "killed by " + law_alias(r.first_expected)
                  : r.killed ? "killed, not by an expected law"
                             : "SURVIVED")
              << " (" << std::fixed << std::setprecision(0) << r.wall << " s in its laws) [" << t + 1 << "/" << tasks.size()
              << " runs]\n";
  }

  // The table.
  std::ostringstream tab;
  tab << "| mutant | killed (seeds) | killing laws (seed " << opt.seeds[0]
      << ") | cases to kill | shrunk B,Hq,Hkv,Lq,Lk,D,Dv | smallest shape | s to kill |\n";
  tab << "|---|---|---|---|---|---|---|\n";
  int all_killed = 0;
  std::vector<double> cases_all;
  std::vector<std::string> survivors;
  html::mutation_report report;
  for (std::size_t m = 0; m < chosen.size(); ++m) {
    const auto& rs = results[m];
    int k = 0;
    std::vector<std::string> cs;
    html::mutant_row row{chosen[m]->name,      0,         static_cast<int>(rs.size()),          {}, {}, rs[0].shape,
                         chosen[m]->min_shape, rs[0].how, rs[0].expected ? rs[0].seconds : -1.0};
    for (const auto& r : rs) {
      k += r.expected;
      cs.push_back(r.expected ? std::to_string(r.cases) : "-");
      row.cases_to_kill.push_back(r.expected ? r.cases : -1);
      if (r.expected) cases_all.push_back(r.cases);
    }
    row.killed_seeds = k;
    for (const auto& l : rs[0].killers)
      row.killers.emplace_back(law_alias(l),
                               std::find(chosen[m]->laws.begin(), chosen[m]->laws.end(), l) != chosen[m]->laws.end());
    report.rows.push_back(std::move(row));
    if (k == static_cast<int>(rs.size()))
      ++all_killed;
    else
      survivors.push_back(chosen[m]->name);
    std::vector<std::string> killers;
    for (const auto& l : rs[0].killers) {
      const bool exp = std::find(chosen[m]->laws.begin(), chosen[m]->laws.end(), l) != chosen[m]->laws.end();
      killers.push_back(exp ? "**" + law_alias(l) + "**" : law_alias(l));
    }
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", rs[0].seconds);
    tab << "| " << chosen[m]->name << " | " << (k == static_cast<int>(rs.size()) ? "yes" : "NO") << " " << k << "/" << rs.size()
        << " | " << (killers.empty() ? "none" : join(killers, ", ")) << (rs[0].how.empty() ? "" : " (" + rs[0].how + ")") << " | "
        << join(cs, " ") << " | " << (rs[0].shape.empty() ? "-" : rs[0].shape) << " | " << chosen[m]->min_shape << " | "
        << (rs[0].expected ? secs : "-") << " |\n";
  }
  char summary[320];
  std::snprintf(summary, sizeof summary,
                "\nkill rate: %d/%zu mutants killed on every seed by an expected law (%.0f%%); median cases to kill: %g; "
                "%zu gate runs in %.0f s\n",
                all_killed, chosen.size(), chosen.empty() ? 100.0 : 100.0 * all_killed / static_cast<double>(chosen.size()),
                median(cases_all), tasks.size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  std::cout << "\n" << tab.str() << summary;
  std::cout << "(bold: a law expected to kill it; cases to kill: one per seed, the first expected law that failed)\n";
  if (!survivors.empty()) std::cout << "SURVIVED (or killed only by an unexpected law): " << join(survivors, ", ") << "\n";
  if (!opt.html.empty()) {
    report.plugin = opt.plugin, report.tiles = tile_options(), report.seeds = opt.seeds, report.cases = opt.cases;
    report.summary = std::string(summary).substr(1);
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    html::write_mutation_html(opt.html, report);
    std::cout << "report: " << opt.html << "\n";
  }
  if (!opt.markdown.empty()) {
    std::ofstream md(opt.markdown);
    md << tab.str() << summary;
    if (!md) throw input_error("--markdown", "cannot write '" + opt.markdown + "'");
  }
  return survivors.empty() ? 0 : 1;
}

}  // namespace

void add_mutation(CLI::App& app) {
  auto* m = app.add_subcommand("mutation", "Gate every mutant of the bundled kernel; exit 1 if any survives a seed");
  m->add_option("--plugin", opt.plugin, "the mutation plugin (default: plugins/libattnimpl_mutant.so next to attncheck)");
  m->add_option("--seeds", opt.seeds, "seeds; the first runs every law, the others the expected laws (default 1 2 3 4)");
  m->add_option("--cases", opt.cases, "cases per law (default " + std::to_string(run_default::cases) + ", the gate's)")
      ->check(number_in(1, run_default::max_cases));
  m->add_option("--law-timeout", opt.law_timeout,
                "seconds before a law's child is a hang: a kill (default " +
                    std::to_string(static_cast<int>(run_default::mutation_law_timeout)) + ")")
      ->check(number_in(0.1, 86400.0));
  m->add_option("--mutant", opt.mutants, "run only these mutants (repeatable)");
  m->add_option("--out", opt.out, "gate logs, JSON and counterexamples land here (default mutation-out)");
  m->add_option("--markdown", opt.markdown, "also write the table here");
  m->add_option("--html", opt.html, "write a self-contained HTML report here (the kill table, cases to kill per mutant)");
  m->add_option("--jobs", opt.jobs, "gate runs' worth of laws at once: --jobs x the CPUs (at most 8) laws (default 1)")
      ->check(number_in(1, 64));
  m->add_option("--tiles", opt.tiles,
                "q_tile,k_tile,split_keys of the mutated kernel; 0 = the production value (default 2,3,6: tiny tiles)");
  m->add_flag("--quick", opt.quick, "for CI: the first seed only, and only each mutant's expected laws");
  m->add_flag("--all-laws", opt.all_laws, "run every law on every seed (slow)");
  m->add_flag("--expected-only", opt.expected_only,
              "every seed runs only each mutant's expected laws (the killing-laws column then lists those)");
  register_runner(m, run_mutation);
}

}  // namespace attncheck::cli
