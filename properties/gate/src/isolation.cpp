// Each law in its own child process: a crash or hang fails that law only;
// progress of the schedule on standard error.
#include <sys/mman.h>

#include <chrono>
#include <map>
#include <functional>
#include <iostream>

#include "attncheck/result_json.hpp"

#include "gate_internal.hpp"

namespace attncheck {
namespace gate_detail {

namespace {

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

// What a law's child publishes after every case (run_options::on_progress):
// its counts so far and the smallest failing case yet, so a law whose process
// dies is still counted (--stats, judged/run) and a failure found before a
// timeout is not lost.
std::string progress_json(const law_report& r) {
  nlohmann::json j = {{"cases", r.cases},
                      {"judged", r.judged},
                      {"shrink_steps", r.shrink_steps},
                      {"stats", r.stats.counts},
                      {"stats_n", r.stats.n},
                      {"max_ratio", number_json(r.max_ratio, json_numbers::exact)},
                      {"max_ratio_case", r.max_ratio_case},
                      {"ratio_histogram", r.ratio_histogram},
                      {"declines", r.declines}};
  if (r.counterexample) {
    j["failing"] = to_line(*r.counterexample);
    j["failing_message"] = r.failure.message.substr(0, 4000);
    j["failing_kind"] = static_cast<int>(r.failure.kind);
  }
  return j.dump();
}

std::string seconds_text(double s) { return number_text(s, s < 10 ? "%.2g" : "%.0f"); }

// The report of a law whose child completed, crashed, hung (a call past its
// watchdog limit) or ran out of the law's time (a timeout: the gate's problem).
law_report report_of_child(const law& l, const subject& s, const child_outcome& co, const shared_note& note,
                           const shared_note& progress, const law_watch& watch, const run_config& opt) {
  if (co.completed) return law_report_from_json(nlohmann::json::parse(co.payload));
  law_report r;
  r.law = l.name;
  r.v = verdict::fail;
  r.seconds = co.seconds;
  r.min_judged = l.min_judged;
  // Whatever the child counted before it died.
  std::string failing, failing_message;
  failure_kind failing_kind = failure_kind::law;
  if (const std::string p = progress.read(); !p.empty()) {
    try {
      const auto j = nlohmann::json::parse(p);
      r.cases = j.at("cases"), r.judged = j.at("judged"), r.shrink_steps = j.at("shrink_steps");
      r.stats.counts = j.at("stats").get<std::map<std::string, std::int64_t>>();
      r.stats.n = j.at("stats_n");
      r.max_ratio = number_from_json(j.at("max_ratio"));
      r.max_ratio_case = j.at("max_ratio_case");
      r.ratio_histogram = j.at("ratio_histogram").get<decltype(r.ratio_histogram)>();
      r.declines = j.at("declines").get<std::map<std::string, std::int64_t>>();
      failing = j.value("failing", std::string());
      failing_message = j.value("failing_message", std::string());
      failing_kind = static_cast<failure_kind>(j.value("failing_kind", 0));
    } catch (const std::exception&) {
      // A note cut mid-write (the child died writing it): count nothing rather than guess.
    }
  }
  const law_watch::state w = watch.read(co.ended);
  const std::string line = note.read();
  // The case in flight was run too, though it never finished (not while shrinking: shrink steps are not cases).
  if (w.phase == law_phase::checking && w.in_case && !line.empty()) {
    if (auto c = case_of_line(line)) {
      ++r.cases;
      r.stats.add(*c, s);
    }
  }
  r.counterexample = case_of_line(line);
  const std::string where = line.empty()                      ? std::string(" before the first case")
                            : !w.in_case                      ? " between cases, after " + line
                            : w.phase == law_phase::shrinking ? " while shrinking, on " + line
                                                              : " while checking " + line;
  const std::string phases = seconds_text(w.checking_seconds) + " s generating and checking (" + std::to_string(r.cases) +
                             " cases), " + seconds_text(w.shrinking_seconds) + " s shrinking (" + std::to_string(r.shrink_steps) +
                             " steps)";
  const std::string found =
      failing.empty() ? std::string() : "; the law had already failed on " + failing + ": " + failing_message;
  if (co.call_overdue) {
    char what[400];
    std::snprintf(what, sizeof what,
                  "the subject's call %s (work B*Hq*Lq*Lk*(D+Dv) = %lld) ran %s s, past its watchdog limit of %s s "
                  "(max(floor %s s, %s x expected %s s)): stopped (a hang)",
                  w.entry.c_str(), static_cast<long long>(w.work), seconds_text(w.call_seconds).c_str(),
                  seconds_text(w.limit_seconds).c_str(), number_text(opt.watchdog.floor_s).c_str(),
                  number_text(opt.watchdog.factor).c_str(), number_text(w.expected_seconds, "%.3g").c_str());
    r.failure.fail(what + where + "; " + phases + found, failure_kind::hang);
  } else if (co.timed_out && !failing.empty()) {
    // The law failed, then ran out of time shrinking: a real failure, its case not minimal.
    r.counterexample = case_of_line(failing);
    r.failure.fail(failing_message + " [shrinking stopped at the law timeout (--law-timeout " + number_text(opt.law_timeout) +
                       " s; " + phases + "): the smallest failing case found, not minimal]",
                   failing_kind);
  } else if (co.timed_out) {
    std::string call;
    if (w.in_call)
      call = "; a call " + w.entry + " had run " + seconds_text(w.call_seconds) + " s of its " + seconds_text(w.limit_seconds) +
             " s watchdog limit";
    r.failure.fail("the law ran out of its time (--law-timeout " + number_text(opt.law_timeout) +
                       " s) with no call into the subject past its watchdog limit (a timeout of the gate, not a hang)" + where +
                       "; " + phases + call,
                   failure_kind::timeout);
  } else {
    r.failure.fail(process_message(co, opt.law_timeout) + where + found, failure_kind::crash);
  }
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
  gate_progress(const std::vector<const law*>& laws, const std::vector<const run_config*>& configs, const run_config& run,
                const shared_counts& counts)
      : laws_(laws), configs_(configs), counts_(counts), start_(std::chrono::steady_clock::now()), last_(start_) {
    for (std::size_t i = 0; i < configs.size() && i < laws.size(); ++i) total_ += law_cases(*laws[i], configs[i]->cases);
    tty_ = run.progress;
    every_ = tty_ ? 1.0 : run.progress_seconds;
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
      const std::int64_t cases = law_cases(*laws_[i], configs_[i]->cases);
      done += live[i] ? std::min(counts_.get(i), cases) : cases;
    }
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    char head[160];
    std::snprintf(head, sizeof head, "gate: %lld/%lld cases (%.1f%%), %.0f cases/s, ETA %.0f s", static_cast<long long>(done),
                  static_cast<long long>(total_),
                  total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0, rate,
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
  const std::vector<const run_config*>& configs_;
  const shared_counts& counts_;
  std::chrono::steady_clock::time_point start_, last_;
  std::int64_t total_ = 0;
  bool tty_ = false, printed_ = false;
  double every_ = 10;
};

}  // namespace

// Why a child process did not complete: a hang (stopped at the timeout) or a crash.
std::string process_message(const child_outcome& co, double timeout_s) {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%.0f", timeout_s);
  return "the subject's process was " + (co.timed_out ? std::string("stopped after ") + limit + " s (a hang)" : co.describe());
}

namespace {
// Set while a crashed law runs again: its child then puts each call into the subject in its own process.
bool crash_rerun = false;
}  // namespace

// Runs the laws, each in its own child process, run.jobs at once (results in order).
std::vector<law_report> run_laws_isolated(const std::vector<const law*>& laws, const std::vector<const subject*>& subjects,
                                          const std::vector<const run_config*>& configs, const run_config& run) {
  // Per law: the case in flight, the counts so far, and the call in flight with its deadline.
  std::vector<std::unique_ptr<shared_note>> notes, progresses;
  std::vector<std::unique_ptr<law_watch>> watches;
  std::vector<std::function<std::string()>> tasks;
  shared_counts counts(laws.size());
  for (std::size_t i = 0; i < laws.size(); ++i) {
    notes.push_back(std::make_unique<shared_note>());
    progresses.push_back(std::make_unique<shared_note>());
    watches.push_back(std::make_unique<law_watch>(run.watchdog));
    shared_note* note = notes.back().get();
    shared_note* progress = progresses.back().get();
    law_watch* watch = watches.back().get();
    const law* l = laws[i];
    const subject* s = subjects[i];
    const run_config* config = configs[i];
    shared_counts* cases = &counts;
    tasks.push_back([l, s, config, note, progress, watch, cases, i] {
      set_call_watch(watch);
      set_call_isolation(crash_rerun);
      run_options ro = run_options_of(*config);
      ro.on_case = [note, watch, cases, i](const attn_case& c) {
        note->write(to_line(c));
        watch->begin_case();
        cases->bump(i);
      };
      ro.on_phase = [watch](law_phase p) { watch->enter_phase(p); };
      ro.on_progress = [progress, watch](const law_report& r) {
        progress->write(progress_json(r));
        watch->end_case();
      };
      return to_json(run_law(*l, *s, ro), json_numbers::exact).dump();
    });
  }
  gate_progress progress(laws, configs, run, counts);
  // Every law under the run's limit.
  const auto outcomes = run_isolated_all(
      tasks, run.law_timeout, resolved_jobs(run.jobs),
      [&progress](const std::vector<std::size_t>& running, std::size_t finished) { progress.tick(running, finished); },
      [&watches](std::size_t i) { return watches[i]->overdue(); });
  std::vector<law_report> reports;
  for (std::size_t i = 0; i < laws.size(); ++i) {
    reports.push_back(report_of_child(*laws[i], *subjects[i], outcomes[i], *notes[i], *progresses[i], *watches[i], run));
    const child_outcome& co = outcomes[i];
    if (co.completed || co.timed_out || co.call_overdue || co.signal == 0) continue;
    // The law's process was killed by a signal: run the law again with each
    // call into the subject in its own process, so the call that kills it is
    // one failure, shrunk like any other. Its kind stays crash.
    crash_rerun = true;
    const child_outcome again = run_isolated(tasks[i], run.law_timeout);
    crash_rerun = false;
    if (!again.completed) continue;
    law_report shrunk = law_report_from_json(nlohmann::json::parse(again.payload));
    if (shrunk.v != verdict::fail || !shrunk.counterexample) continue;
    shrunk.failure.message = process_message(co, run.law_timeout) +
                             "; replayed with each call in its own process and shrunk: " + shrunk.failure.message;
    shrunk.failure.kind = failure_kind::crash;
    shrunk.seconds += reports.back().seconds;
    reports.back() = std::move(shrunk);
  }
  return reports;
}

}  // namespace gate_detail

}  // namespace attncheck
