#include "attncheck/gate.hpp"

#include <bit>
#include <cmath>
#include <chrono>
#include <memory>
#include <optional>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <sys/mman.h>

#include "attncheck/case_file.hpp"
#include "attncheck/isolate.hpp"
#include "attncheck/version.hpp"

namespace attncheck {

namespace {

bool selected(const std::string& law, const std::vector<std::string>& only) {
  if (only.empty()) return true;
  for (const auto& o : only)
    if (law == o || law.rfind(o + ".", 0) == 0 || (!o.empty() && o.back() == '.' && law.rfind(o, 0) == 0)) return true;
  return false;
}

std::string verdict_name(verdict v) {
  switch (v) {
    case verdict::pass: return "pass";
    case verdict::fail: return "FAIL";
    case verdict::skip: return "skipped";
    case verdict::unjudged: return "UNJUDGED";
  }
  return "?";
}

std::string json_verdict(verdict v) {
  switch (v) {
    case verdict::pass: return "pass";
    case verdict::fail: return "fail";
    case verdict::skip: return "skipped";
    case verdict::unjudged: return "unjudged";
  }
  return "?";
}

std::string judged_text(const law_report& r) {
  if (r.v == verdict::skip) return "-";
  return std::to_string(r.judged) + "/" + std::to_string(r.cases);
}

std::string number_text(double x, const char* fmt = "%.6g") {
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') o += ' ';
        else o += ch;
    }
  }
  return o;
}

std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", r);
  return buf;
}

// law_report and law_outcome travel from a child process to the gate as JSON.
nlohmann::json outcome_to_json(const law_outcome& o) {
  return {{"v", static_cast<int>(o.v)},
          {"kind", static_cast<int>(o.kind)},
          {"message", o.message},
          {"compared", o.compared},
          {"unbounded", o.unbounded},
          {"vacuous", o.vacuous},
          {"max_ratio", o.max_ratio},
          {"worst", {{"where", o.worst.where}, {"expected", o.worst.expected}, {"got", o.worst.got},
                     {"bound", o.worst.bound}, {"ratio", o.worst.ratio}}}};
}

// JSON numbers cannot hold inf or NaN: doubles travel as their bit patterns.
nlohmann::json bits_of(double x) { return std::bit_cast<std::uint64_t>(x); }
double double_of(const nlohmann::json& j) { return std::bit_cast<double>(j.get<std::uint64_t>()); }

nlohmann::json outcome_json(const law_outcome& o) {
  auto j = outcome_to_json(o);
  j["max_ratio"] = bits_of(o.max_ratio);
  for (const char* k : {"expected", "got", "bound", "ratio"}) j["worst"][k] = bits_of(j["worst"][k].get<double>());
  return j;
}

law_outcome outcome_from(const nlohmann::json& j) {
  law_outcome o;
  o.v = static_cast<verdict>(j.at("v").get<int>());
  o.message = j.at("message").get<std::string>();
  o.kind = static_cast<failure_kind>(j.value("kind", 0));
  o.compared = j.value("compared", std::int64_t{0});
  o.unbounded = j.value("unbounded", std::int64_t{0});
  o.vacuous = j.value("vacuous", std::string());
  o.max_ratio = double_of(j.at("max_ratio"));
  const auto& w = j.at("worst");
  o.worst = {w.at("where").get<std::string>(), double_of(w.at("expected")), double_of(w.at("got")),
             double_of(w.at("bound")), double_of(w.at("ratio"))};
  return o;
}

nlohmann::json heat_json(const heat_map& m) {
  nlohmann::json ratio = nlohmann::json::array();
  for (double x : m.ratio) ratio.push_back(bits_of(x));
  return {{"b", m.b}, {"h", m.h}, {"rows", m.rows}, {"cols", m.cols}, {"row0", m.row0}, {"col0", m.col0},
          {"all_rows", m.all_rows}, {"all_cols", m.all_cols}, {"lse", m.lse_column}, {"ratio", ratio},
          {"worst_row", m.worst_row}, {"worst_col", m.worst_col}, {"worst_where", m.worst_where},
          {"worst_ratio", bits_of(m.worst_ratio)}};
}

heat_map heat_from(const nlohmann::json& j) {
  heat_map m;
  m.b = j.at("b"), m.h = j.at("h"), m.rows = j.at("rows"), m.cols = j.at("cols"), m.row0 = j.at("row0"), m.col0 = j.at("col0");
  m.all_rows = j.at("all_rows"), m.all_cols = j.at("all_cols"), m.lse_column = j.at("lse");
  for (const auto& x : j.at("ratio")) m.ratio.push_back(double_of(x));
  m.worst_row = j.at("worst_row"), m.worst_col = j.at("worst_col");
  m.worst_where = j.at("worst_where").get<std::string>();
  m.worst_ratio = double_of(j.at("worst_ratio"));
  return m;
}

std::string report_to_payload(const law_report& r) {
  nlohmann::json j = {{"law", r.law},
                      {"v", static_cast<int>(r.v)},
                      {"cases", r.cases},
                      {"judged", r.judged},
                      {"unjudged_why", r.unjudged_why},
                      {"min_judged", r.min_judged},
                      {"stats", r.stats.counts},
                      {"stats_n", r.stats.n},
                      {"shrink_steps", r.shrink_steps},
                      {"skip_reason", r.skip_reason},
                      {"max_ratio", bits_of(r.max_ratio)},
                      {"max_ratio_case", r.max_ratio_case},
                      {"ratio_histogram", r.ratio_histogram},
                      {"seconds", bits_of(r.seconds)},
                      {"failure", outcome_json(r.failure)},
                      {"reproduce", r.reproduce}};
  if (r.counterexample) j["counterexample"] = format_case_file({*r.counterexample, r.law, {}, {}});
  if (r.heat) j["heat"] = heat_json(*r.heat);
  return j.dump();
}

law_report report_from_payload(const std::string& payload) {
  const auto j = nlohmann::json::parse(payload);
  law_report r;
  r.law = j.at("law").get<std::string>();
  r.v = static_cast<verdict>(j.at("v").get<int>());
  r.cases = j.at("cases").get<int>();
  r.judged = j.at("judged").get<int>();
  r.unjudged_why = j.at("unjudged_why").get<std::string>();
  r.min_judged = j.at("min_judged").get<double>();
  r.stats.counts = j.at("stats").get<std::map<std::string, std::int64_t>>();
  r.stats.n = j.at("stats_n").get<std::int64_t>();
  r.shrink_steps = j.at("shrink_steps").get<int>();
  r.skip_reason = j.at("skip_reason").get<std::string>();
  r.max_ratio = double_of(j.at("max_ratio"));
  r.max_ratio_case = j.at("max_ratio_case").get<std::string>();
  r.ratio_histogram = j.at("ratio_histogram").get<decltype(r.ratio_histogram)>();
  r.seconds = double_of(j.at("seconds"));
  r.failure = outcome_from(j.at("failure"));
  r.reproduce = j.at("reproduce").get<std::string>();
  if (j.contains("counterexample")) r.counterexample = parse_case_file(j.at("counterexample").get<std::string>()).c;
  if (j.contains("heat")) r.heat = heat_from(j.at("heat"));
  return r;
}

// The case a dead child was running, rebuilt from its one-line form.
std::optional<attn_case> case_of_line(const std::string& line) {
  if (line.empty()) return std::nullopt;
  try {
    attn_case c = parse_line(line);
    materialize(c);
    return c;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Why a child process did not complete: a hang (stopped at the timeout) or a crash.
std::string process_message(const child_outcome& co, double timeout_s) {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%.0f", timeout_s);
  return "the subject's process was " + (co.timed_out ? std::string("stopped after ") + limit + " s (a hang)" : co.describe());
}

// The report of a law whose child completed, crashed or hung.
law_report report_of_child(const law& l, const child_outcome& co, const shared_note& note, const gate_options& opt, double seconds) {
  if (co.completed) return report_from_payload(co.payload);
  law_report r;
  r.law = l.name;
  r.v = verdict::fail;
  const std::string line = note.read();
  r.counterexample = case_of_line(line);
  r.failure.fail(process_message(co, opt.law_timeout) + (line.empty() ? std::string(" before the first case") : " while checking " + line),
                 co.timed_out ? failure_kind::hang : failure_kind::crash);
  r.seconds = seconds;
  return r;
}

// Counters shared with forked children: cases each law's child has started.
class shared_counts {
 public:
  explicit shared_counts(std::size_t n) : n_(std::max<std::size_t>(n, 1)) {
    void* p = mmap(nullptr, n_ * sizeof(std::int64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<std::int64_t*>(p);
    for (std::size_t i = 0; i < n_; ++i) data_[i] = 0;
  }
  ~shared_counts() { munmap(data_, n_ * sizeof(std::int64_t)); }
  shared_counts(const shared_counts&) = delete;
  shared_counts& operator=(const shared_counts&) = delete;
  void bump(std::size_t i) { __atomic_add_fetch(&data_[i], 1, __ATOMIC_RELAXED); }
  std::int64_t get(std::size_t i) const { return __atomic_load_n(&data_[i], __ATOMIC_RELAXED); }

 private:
  std::size_t n_;
  std::int64_t* data_;
};

// Progress of the whole schedule on standard error: cases done of laws x
// cases (a finished law counts in full, shrink steps never), rate, ETA and the
// laws running. In place every second on a terminal; a plain line every
// progress_seconds otherwise, so a short run prints none.
class gate_progress {
 public:
  gate_progress(const std::vector<const law*>& laws, const std::vector<const gate_options*>& options, const shared_counts& counts)
      : laws_(laws), options_(options), counts_(counts), start_(std::chrono::steady_clock::now()), last_(start_) {
    for (const auto* o : options) total_ += o->run.cases;
    tty_ = !options.empty() && options.front()->progress;
    every_ = tty_ ? 1.0 : options.empty() ? 10.0 : options.front()->progress_seconds;
  }
  ~gate_progress() {
    if (tty_ && printed_) std::cerr << "\r\033[K" << std::flush;
  }
  void tick(const std::vector<std::size_t>& running, std::size_t finished) {
    const auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - last_).count() < every_) return;
    last_ = now;
    std::vector<bool> live(laws_.size(), false);
    for (auto i : running) live[i] = true;
    // The schedule starts laws in order: the first `spawned` have started, and those not running have finished.
    const std::size_t spawned = finished + running.size();
    std::int64_t done = 0;
    for (std::size_t i = 0; i < spawned && i < laws_.size(); ++i) {
      const std::int64_t cases = options_[i]->run.cases;
      done += live[i] ? std::min(counts_.get(i), cases) : cases;
    }
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    char head[160];
    std::snprintf(head, sizeof head, "gate: %lld/%lld cases (%.1f%%), %.0f cases/s, ETA %.0f s", static_cast<long long>(done),
                  static_cast<long long>(total_), total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0, rate,
                  rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0);
    std::string line = head;
    if (!running.empty()) {
      line += "; running";
      for (auto i : running) line += " " + laws_[i]->name;
    }
    if (tty_ && line.size() > 160) line = line.substr(0, 157) + "...";
    std::cerr << (tty_ ? "\r\033[K" : "") << line << (tty_ ? "" : "\n") << std::flush;
    printed_ = true;
  }

 private:
  const std::vector<const law*>& laws_;
  const std::vector<const gate_options*>& options_;
  const shared_counts& counts_;
  std::chrono::steady_clock::time_point start_, last_;
  std::int64_t total_ = 0;
  bool tty_ = false, printed_ = false;
  double every_ = 10;
};

// Runs the laws, each in its own child process, `jobs` at once (results in order).
std::vector<law_report> run_laws_isolated(const std::vector<const law*>& laws, const std::vector<const subject*>& subjects,
                                          const std::vector<const gate_options*>& options, int jobs) {
  std::vector<std::unique_ptr<shared_note>> notes;
  std::vector<std::function<std::string()>> tasks;
  shared_counts counts(laws.size());
  for (std::size_t i = 0; i < laws.size(); ++i) {
    notes.push_back(std::make_unique<shared_note>());
    shared_note* note = notes.back().get();
    const law* l = laws[i];
    const subject* s = subjects[i];
    const gate_options* opt = options[i];
    shared_counts* cases = &counts;
    tasks.push_back([l, s, opt, note, cases, i] {
      run_options ro = opt->run;
      ro.on_case = [note, cases, i](const attn_case& c) {
        note->write(to_line(c));
        cases->bump(i);
      };
      return report_to_payload(run_law(*l, *s, ro));
    });
  }
  const auto start = std::chrono::steady_clock::now();
  gate_progress progress(laws, options, counts);
  // Each law's own limit (the options of its subject; the first decides).
  const auto outcomes = run_isolated_all(tasks, options.empty() ? 120.0 : options.front()->law_timeout, jobs,
                                         [&progress](const std::vector<std::size_t>& running, std::size_t finished) {
                                           progress.tick(running, finished);
                                         });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<law_report> reports;
  for (std::size_t i = 0; i < laws.size(); ++i)
    reports.push_back(report_of_child(*laws[i], outcomes[i], *notes[i], *options[i], seconds));
  return reports;
}

}  // namespace

int gate_result::failed() const {
  int n = 0;
  for (const auto& r : reports) n += r.v == verdict::fail;
  return n;
}

int gate_result::unjudged() const {
  int n = 0;
  for (const auto& r : reports) n += r.v == verdict::unjudged;
  return n;
}

void print_stats(const gate_result& g, std::ostream& out) {
  case_stats all;
  for (const auto& r : g.reports) all.merge(r.stats);
  out << "\ndistribution of the " << all.n << " cases run (all laws; docs/distribution.md):\n";
  for (const auto& f : distribution_floors()) {
    const double share = all.share(f.key);
    const bool low = share < f.floor;
    out << "  " << std::left << std::setw(20) << f.key << std::right << std::setw(7) << number_text(100 * share, "%.1f") << "%   floor "
        << std::setw(4) << number_text(100 * f.floor, "%.0f") << "%" << (f.needs_all ? " (subjects taking every dtype and mask)" : "")
        << (low ? "   BELOW" : "") << "   " << f.what << "\n";
  }
}

void print_declaration(const subject& s, std::ostream& out) {
  const declared_numbers d = s.declared();
  out << "  declared: ABI v" << s.abi() << ", u = 2^" << number_text(std::log2(d.u), "%.4g") << ", exp " << number_text(d.exp_ulps)
      << " ulps, key blocks nb";
  for (const auto& [lk, nb] : d.nb_at) out << " " << nb << " at Lk=" << lk << (lk == d.nb_at.back().first ? "" : ",");
  out << "\n";
  const auto& h = s.hints();
  out << "  size hints" << (s.default_hints() ? " (none declared; common production sizes)" : "") << ":";
  if (h.q_tile) out << " q_tile " << h.q_tile;
  if (h.k_tile) out << " k_tile " << h.k_tile;
  if (h.split_keys) out << " split_keys " << h.split_keys;
  std::string lengths, dims;
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS && h.lengths[i]; ++i) lengths += (lengths.empty() ? "" : ",") + std::to_string(h.lengths[i]);
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS && h.head_dims[i]; ++i) dims += (dims.empty() ? "" : ",") + std::to_string(h.head_dims[i]);
  if (!lengths.empty()) out << " lengths " << lengths;
  if (!dims.empty()) out << " head dims " << dims;
  out << "\n";
}

namespace {

// One subject's part of a gate run: its instance and the laws it runs.
struct gate_plan {
  const gate_options* opt;
  std::shared_ptr<subject> subj;
  std::vector<const law*> chosen;
};

gate_plan plan_gate(const gate_options& opt) {
  gate_plan p{&opt, opt.instance ? opt.instance : subject::load(opt.subject), {}};
  for (const auto& name : opt.only)
    if (!find_law(name)) {
      bool prefix = false;
      for (const auto& l : all_laws()) prefix = prefix || selected(l.name, {name});
      if (!prefix) throw input_error("--only", "'" + name + "' names no law or group (see `attncheck laws`)");
    }
  if (opt.strict && !(p.subj->desc().compute_unit_roundoff <= 0x1p-24))
    throw input_error("subject.compute_unit_roundoff", "--strict requires u <= 2^-24 (f32 compute); " + p.subj->name() +
                                                           " declares u = " + number_text(p.subj->desc().compute_unit_roundoff));
  for (const auto& l : all_laws())
    if (selected(l.name, opt.only)) p.chosen.push_back(&l);
  return p;
}

// Prints one subject's header, failure screens and table; saves its counterexamples.
gate_result finish_gate(const gate_plan& p, std::vector<law_report> reports, double seconds, std::ostream& out);

}  // namespace

gate_result run_gate(const gate_options& opt, std::ostream& out) { return run_gates({opt}, out).front(); }

std::vector<gate_result> run_gates(const std::vector<gate_options>& opts, std::ostream& out) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<gate_plan> plans;
  for (const auto& o : opts) plans.push_back(plan_gate(o));
  // Every (subject, law) pair in one schedule, so no core idles while a slow
  // law of one subject finishes; reports come back in order.
  std::vector<std::vector<law_report>> reports(plans.size());
  if (!opts.empty() && opts.front().isolate) {
    std::vector<const law*> laws;
    std::vector<const subject*> subjects;
    std::vector<const gate_options*> options;
    for (const auto& p : plans)
      for (const law* l : p.chosen) laws.push_back(l), subjects.push_back(p.subj.get()), options.push_back(p.opt);
    auto all = run_laws_isolated(laws, subjects, options, opts.front().jobs);
    std::size_t k = 0;
    for (std::size_t i = 0; i < plans.size(); ++i)
      for (std::size_t n = 0; n < plans[i].chosen.size(); ++n) reports[i].push_back(std::move(all[k++]));
  } else {
    for (std::size_t i = 0; i < plans.size(); ++i)
      for (const law* l : plans[i].chosen) reports[i].push_back(run_law(*l, *plans[i].subj, plans[i].opt->run));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<gate_result> results;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (i > 0) out << "\n";
    results.push_back(finish_gate(plans[i], std::move(reports[i]), seconds, out));
  }
  return results;
}

namespace {

gate_result finish_gate(const gate_plan& p, std::vector<law_report> reports, double seconds, std::ostream& out) {
  const gate_options& opt = *p.opt;
  const auto& subj = p.subj;
  gate_result g;
  out << "attncheck gate: subject " << subj->name() << " (" << opt.subject << "), seed " << opt.run.seed << ", "
      << opt.run.cases << " cases per law" << (opt.strict ? ", strict" : "") << "\n";
  print_declaration(*subj, out);
  g.options = opt;
  g.options.run.on_case = nullptr;
  g.subject_name = subj->name();
  g.dtypes = subj->desc().dtypes, g.features = subj->desc().features, g.claims = subj->desc().invariances;
  g.declared = subj->declared();
  g.hints = subj->hints();
  g.abi = subj->abi();
  g.default_hints = subj->default_hints();
  for (std::size_t k = 0; k < p.chosen.size(); ++k) {
    const law& l = *p.chosen[k];
    law_report r = std::move(reports[k]);
    std::string saved;
    if (r.v == verdict::fail) {
      if (r.counterexample && !opt.out_dir.empty()) {
        std::filesystem::create_directories(opt.out_dir);
        char name[64];
        std::snprintf(name, sizeof name, "-%016llx.json", static_cast<unsigned long long>(fingerprint(*r.counterexample)));
        saved = (std::filesystem::path(opt.out_dir) / (l.name + name)).string();
        case_record rec{*r.counterexample, l.name, subj->name(), r.failure.message.substr(0, 2000)};
        write_case_file(saved, rec);
        g.saved.push_back(saved);
      }
      out << failure_screen(r, *subj, saved);
    }
    g.saved_at.push_back(saved);
    g.reports.push_back(std::move(r));
  }
  g.seconds = seconds;
  // The table.
  std::size_t w = 4;
  for (const auto& r : g.reports) w = std::max(w, r.law.size());
  out << "\n" << std::left << std::setw(static_cast<int>(w)) << "law" << "  " << std::right << std::setw(11) << "judged/run"
      << "  " << std::setw(10) << "max obs/bd" << "  " << std::setw(8) << "verdict" << "  " << std::setw(7) << "seconds" << "\n";
  int passed = 0, failed = 0, skipped = 0, unjudged = 0;
  for (const auto& r : g.reports) {
    passed += r.v == verdict::pass, failed += r.v == verdict::fail, skipped += r.v == verdict::skip;
    unjudged += r.v == verdict::unjudged;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", r.seconds);
    out << std::left << std::setw(static_cast<int>(w)) << r.law << "  " << std::right << std::setw(11) << judged_text(r) << "  "
        << std::setw(10) << ratio_text(r.max_ratio) << "  " << std::setw(8) << verdict_name(r.v) << "  " << std::setw(7) << secs
        << "\n";
    if (r.v == verdict::skip) out << "    skipped: " << r.skip_reason << "\n";
    if (r.v == verdict::unjudged)
      out << "    judged " << r.judged << " of " << r.cases << " cases, below the law's floor of " << number_text(100 * r.min_judged, "%.0f")
          << "%; most common reason: " << r.unjudged_why << "\n";
  }
  char total[64];
  std::snprintf(total, sizeof total, "%.1f", g.seconds);
  out << "\ngate: " << passed << " passed, " << failed << " failed, " << unjudged << " unjudged, " << skipped << " skipped in "
      << total << " s";
  out << (failed || unjudged ? "  -> FAIL" : "  -> PASS") << "\n";
  if (opt.stats) print_stats(g, out);
  if (!opt.junit.empty()) write_junit(opt.junit, g, subj->name(), opt.run.seed);
  if (!opt.json.empty()) write_json(opt.json, g, subj->name(), opt.run.seed);
  return g;
}

}  // namespace

std::string provenance_line() {
  return std::string("attncheck ") + version_string + ", contract " + contract_version +
         ", oracle auto_tier (binary64 where its own error is at most 2^-20 of the bound, else " + oracle_precision_description + ")";
}

void write_json(const std::string& path, const gate_result& r, const std::string& subject_name, std::uint64_t seed) {
  // inf and NaN are not JSON numbers: a non-finite ratio is written as null.
  const auto number = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  nlohmann::json laws = nlohmann::json::array();
  for (const auto& l : r.reports) {
    nlohmann::json j = {{"name", l.law},
                        {"verdict", json_verdict(l.v)},
                        {"cases", l.cases},
                        {"judged", l.judged},
                        {"min_judged", l.min_judged},
                        {"shrink_steps", l.shrink_steps},
                        {"seconds", l.seconds},
                        {"max_ratio", number(l.max_ratio)}};
    if (l.v == verdict::skip) j["skip_reason"] = l.skip_reason;
    if (!l.unjudged_why.empty()) j["unjudged_why"] = l.unjudged_why;
    if (l.v == verdict::fail) {
      j["kind"] = failure_kind_name(l.failure.kind);
      j["message"] = l.failure.message;
      if (!l.failure.worst.where.empty()) j["worst"] = l.failure.worst.describe();
      j["reproduce"] = l.reproduce;
      if (l.counterexample) {
        const attn_case& c = *l.counterexample;
        j["counterexample"] = to_line(c);
        j["shape"] = {{"b", c.b}, {"hq", c.hq}, {"hkv", c.hkv}, {"lq", c.lq}, {"lk", c.lk}, {"d", c.d}, {"dv", c.dv}};
      }
    }
    laws.push_back(std::move(j));
  }
  nlohmann::json nb = nlohmann::json::array();
  for (const auto& [lk, n] : r.declared.nb_at) nb.push_back({{"lk", lk}, {"nb", n}});
  std::vector<std::int64_t> lengths, dims;
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS; ++i) {
    if (r.hints.lengths[i]) lengths.push_back(r.hints.lengths[i]);
    if (r.hints.head_dims[i]) dims.push_back(r.hints.head_dims[i]);
  }
  const nlohmann::json declared = {{"abi", r.abi},
                                   {"compute_unit_roundoff", r.declared.u},
                                   {"exp_ulps", r.declared.exp_ulps},
                                   {"key_blocks", nb},
                                   {"size_hints",
                                    {{"declared", !r.default_hints},
                                     {"q_tile", r.hints.q_tile},
                                     {"k_tile", r.hints.k_tile},
                                     {"split_keys", r.hints.split_keys},
                                     {"lengths", lengths},
                                     {"head_dims", dims}}}};
  const nlohmann::json made_by = {{"version", version_string},
                                  {"contract", contract_version},
                                  {"oracle", {{"laws", "auto_tier"}, {"precision", oracle_precision_id}, {"bits", oracle_precision_bits}}},
                                  {"line", provenance_line()}};
  const nlohmann::json doc = {{"attncheck", made_by}, {"subject", subject_name}, {"declared", declared}, {"seed", seed}, {"seconds", r.seconds},
                              {"failed", r.failed()},   {"unjudged", r.unjudged()}, {"laws", laws}};
  std::ofstream f(path);
  if (!f) throw input_error("--json", "cannot write '" + path + "'");
  f << doc.dump(2) << "\n";
  if (!f) throw input_error("--json", "write to '" + path + "' failed");
}

void write_junit(const std::string& path, const gate_result& r, const std::string& subject_name, std::uint64_t seed) {
  std::ostringstream x;
  int failures = 0, skipped = 0;
  for (const auto& l : r.reports) failures += l.v == verdict::fail || l.v == verdict::unjudged, skipped += l.v == verdict::skip;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"attncheck\" tests=\"" << r.reports.size() << "\" failures=\"" << failures << "\" skipped=\"" << skipped
    << "\" time=\"" << r.seconds << "\">\n";
  x << "  <testsuite name=\"attncheck-gate." << xml_escape(subject_name) << "\" tests=\"" << r.reports.size() << "\" failures=\""
    << failures << "\" skipped=\"" << skipped << "\" time=\"" << r.seconds << "\">\n";
  std::string nb;
  for (const auto& [lk, n] : r.declared.nb_at) nb += (nb.empty() ? "" : ", ") + std::to_string(n) + " at Lk=" + std::to_string(lk);
  x << "    <properties><property name=\"attncheck_version\" value=\"" << version_string
    << "\"/><property name=\"contract_version\" value=\"" << contract_version
    << "\"/><property name=\"oracle\" value=\"auto_tier, " << oracle_precision_id << " (" << oracle_precision_bits
    << "-bit MPFR)\"/><property name=\"made_by\" value=\"" << xml_escape(provenance_line())
    << "\"/><property name=\"seed\" value=\"" << seed << "\"/><property name=\"subject\" value=\""
    << xml_escape(subject_name) << "\"/><property name=\"abi\" value=\"" << r.abi
    << "\"/><property name=\"compute_unit_roundoff\" value=\"" << number_text(r.declared.u, "%.17g")
    << "\"/><property name=\"exp_ulps\" value=\"" << number_text(r.declared.exp_ulps, "%.17g")
    << "\"/><property name=\"key_blocks\" value=\"" << nb << "\"/></properties>\n";
  for (std::size_t i = 0; i < r.reports.size(); ++i) {
    const auto& l = r.reports[i];
    const auto dot = l.law.find('.');
    x << "    <testcase classname=\"" << xml_escape(l.law.substr(0, dot)) << "\" name=\"" << xml_escape(l.law.substr(dot + 1))
      << "\" time=\"" << l.seconds << "\" assertions=\"" << l.cases << "\">\n";
    if (l.v == verdict::skip) x << "      <skipped message=\"" << xml_escape(l.skip_reason) << "\"/>\n";
    if (l.v == verdict::unjudged)
      x << "      <failure message=\"judged " << l.judged << " of " << l.cases << " cases, below the floor of "
        << number_text(100 * l.min_judged, "%.0f") << "%\" type=\"unjudged\">" << xml_escape(l.unjudged_why) << "</failure>\n";
    if (l.v == verdict::fail) {
      x << "      <failure message=\"" << xml_escape(l.failure.message.substr(0, 500)) << "\" type=\"" << failure_kind_name(l.failure.kind) << "\">"
        << xml_escape(l.counterexample ? to_line(*l.counterexample) : std::string()) << "\n"
        << xml_escape(l.failure.worst.where.empty() ? "" : l.failure.worst.describe()) << "</failure>\n";
    }
    x << "      <system-out>judged " << l.judged << "/" << l.cases << "; max observed/bound " << l.max_ratio << " on "
      << xml_escape(l.max_ratio_case) << "</system-out>\n";
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  std::ofstream f(path);
  if (!f) throw input_error("--junit", "cannot write '" + path + "'");
  f << x.str();
  if (!f) throw input_error("--junit", "write to '" + path + "' failed");
}

int repro_case_file(const std::string& file, const std::string& subject_spec, const std::string& law_override, std::ostream& out,
                    bool isolate, double timeout_s, repro_result* result) {
  const case_record rec = read_case_file(file);
  const std::string law_name = law_override.empty() ? rec.law : law_override;
  if (law_name.empty()) throw input_error("law", file + " names no law; pass --law NAME (see `attncheck laws`)");
  const law* l = find_law(law_name);
  if (!l) throw input_error("law", "'" + law_name + "' is not a law (see `attncheck laws`)");
  const auto subj = subject::load(subject_spec);
  repro_result local;
  repro_result& rr = result ? *result : local;
  rr.file = file, rr.law = law_name, rr.subject_name = subj->name(), rr.subject_spec = subject_spec, rr.c = rec.c;
  // A skip replayed nothing: never exit 0 (which would read as "fixed").
  if (auto why = l->applicable(*subj); !why.empty()) {
    out << "SKIP " << law_name << ": " << why << " (nothing replayed)\n";
    rr.outcome = law_outcome::skip(why);
    return rr.status = 3;
  }
  if (auto why = subj->cannot_take(rec.c); !why.empty()) {
    out << "SKIP " << law_name << ": subject cannot take this case (" << why << "; nothing replayed)\n";
    rr.outcome = law_outcome::skip("subject cannot take this case (" + why + ")");
    return rr.status = 3;
  }
  // The replay keeps the elements it compares, for the report's heat map.
  const auto replay_logged = [&] {
    element_log log;
    nlohmann::json j = {{"outcome", outcome_json(replay(*l, *subj, rec.c))}};
    if (const auto heat = heat_map_of(log, outcome_from(j["outcome"]).worst)) j["heat"] = heat_json(*heat);
    return j;
  };
  law_outcome o;
  if (isolate) {
    const child_outcome co = run_isolated([&] { return replay_logged().dump(); }, timeout_s);
    if (co.completed) {
      const auto j = nlohmann::json::parse(co.payload);
      o = outcome_from(j.at("outcome"));
      if (j.contains("heat")) rr.heat = heat_from(j.at("heat"));
    } else {
      o.fail(process_message(co, timeout_s), co.timed_out ? failure_kind::hang : failure_kind::crash);
    }
  } else {
    const auto j = replay_logged();
    o = outcome_from(j.at("outcome"));
    if (j.contains("heat")) rr.heat = heat_from(j.at("heat"));
  }
  failure_report screen;
  screen.kind = o.kind;
  screen.verdict = o.v == verdict::fail ? "FAIL" : "PASS";
  screen.law = law_name;
  screen.subject_name = subj->name(), screen.subject_spec = subject_spec;
  screen.case_line = to_line(rec.c);
  screen.file = file;
  if (o.v == verdict::fail) screen.message = o.message;
  if (!o.worst.where.empty()) screen.worst = o.worst.describe();
  screen.judged = std::to_string(o.compared) + " elements";
  if (o.unbounded) screen.judged += "; " + std::to_string(o.unbounded) + " outside the bound's domain (+inf bound: not judged)";
  if (!o.vacuous.empty()) screen.judged += "; the case judges nothing for this law: " + o.vacuous;
  out << print_failure(screen);
  rr.outcome = o;
  return rr.status = o.v == verdict::fail ? 1 : 0;
}

}  // namespace attncheck
