// Each law in its own child process: a crash or hang fails that law only;
// progress of the schedule on standard error.
#include <sys/mman.h>

#include <chrono>
#include <functional>
#include <iostream>

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

// The report of a law whose child completed, crashed or hung.
law_report report_of_child(const law& l, const child_outcome& co, const shared_note& note, const gate_options& opt,
                           double seconds) {
  if (co.completed) return report_from_payload(co.payload);
  law_report r;
  r.law = l.name;
  r.v = verdict::fail;
  const std::string line = note.read();
  r.counterexample = case_of_line(line);
  r.failure.fail(
      process_message(co, opt.law_timeout) + (line.empty() ? std::string(" before the first case") : " while checking " + line),
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
  const std::vector<const gate_options*>& options_;
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
  const auto outcomes = run_isolated_all(
      tasks, options.empty() ? 120.0 : options.front()->law_timeout, jobs,
      [&progress](const std::vector<std::size_t>& running, std::size_t finished) { progress.tick(running, finished); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<law_report> reports;
  for (std::size_t i = 0; i < laws.size(); ++i)
    reports.push_back(report_of_child(*laws[i], outcomes[i], *notes[i], *options[i], seconds));
  return reports;
}

}  // namespace gate_detail

}  // namespace attncheck
