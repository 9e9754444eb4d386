// Process isolation: a kernel under test may crash, abort or hang; the gate
// runs each law in a child process with a time limit and survives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attncheck {

struct child_outcome {
  bool completed = false;                       ///< the child ran fn to the end and sent its payload
  std::string payload;                          ///< what fn returned
  int signal = 0;                               ///< the signal that ended the child, if any
  int exit_code = 0;                            ///< its exit code when it exited without completing
  bool timed_out = false;                       ///< killed after the time limit
  bool call_overdue = false;                    ///< killed by the per-call watchdog (`overdue` of run_isolated_all)
  double seconds = 0;                           ///< wall seconds from its fork until it was reaped
  std::chrono::steady_clock::time_point ended;  ///< when it was reaped
  std::string describe() const;                 ///< "killed by SIGSEGV", "no result within 5 s", ...
};

/// Runs fn in a forked child; the child's return value travels back through a
/// pipe. A child still running after timeout_s seconds is killed (SIGKILL).
/// The caller must not hold threads that the child needs (fork copies only the
/// calling thread): the gate forks before any kernel call in the parent.
child_outcome run_isolated(const std::function<std::string()>& fn, double timeout_s);

/// Runs every fn in its own forked child, at most `jobs` at once, each with
/// its own time limit; results in the order of fns. Single-threaded: the
/// parent polls the children's pipes, so forking stays safe.
/// `tick`, when set, is called after every poll (at least once a second) with
/// the indices of the children still running and the number finished.
/// `overdue`, when set, is asked about every running child at least every
/// 100 ms; a child it names is killed (SIGKILL) and marked call_overdue, which
/// wins over timed_out.
std::vector<child_outcome> run_isolated_all(
    const std::vector<std::function<std::string()>>& fns, double timeout_s, int jobs,
    const std::function<void(const std::vector<std::size_t>& running, std::size_t finished)>& tick = {},
    const std::function<bool(std::size_t)>& overdue = {});

/// A small buffer shared with forked children: the child writes the case it
/// is about to run, the parent reads it when the child dies.
class shared_note {
 public:
  explicit shared_note(std::size_t capacity = 1 << 16);
  ~shared_note();
  shared_note(const shared_note&) = delete;
  shared_note& operator=(const shared_note&) = delete;
  void write(const std::string& s);
  std::string read() const;
  void clear() { write(""); }

 private:
  char* data_;
  std::size_t capacity_;
};

/// What a law's child is doing: its phase, published in its law_watch.
enum class law_phase : std::int64_t { starting, checking, shrinking };
/// "starting", "generating and checking", "shrinking".
const char* law_phase_name(law_phase p);

/// The per-call watchdog's limits. A call into the subject is overdue once it
/// has run max(floor_s, factor x expected) seconds, where expected is the
/// call's work (B*Hq*Lq*Lk*(D+Dv) of its case, Lq summed over a cached call's
/// steps) times the seconds per unit of work of the calls the same law's
/// child completed before it (total time over total work); a law's first
/// call, and calls without work (key_blocks), get the floor.
struct watchdog_limits {
  double floor_s = 30;  ///< in [0.01, 86400] seconds
  double factor = 50;   ///< in [1, 1e6]
};

/// One law's child as the gate sees it, in memory shared across fork: the call
/// into the subject in flight (which entry point, its work, when it started,
/// its deadline), the law's phase and when each began. The child writes, the
/// parent reads; read() after the child died sees its last state.
class law_watch {
 public:
  explicit law_watch(watchdog_limits limits = {});
  ~law_watch();
  law_watch(const law_watch&) = delete;
  law_watch& operator=(const law_watch&) = delete;

  // The child's side. A call begun inside another (the steps of a cached
  // call) only renames the entry in flight; the outer call keeps its deadline.
  void begin_call(const char* entry, std::int64_t work);
  void end_call();
  void enter_phase(law_phase p);
  /// Brackets one case of the law (begin before it is checked, end once it is counted).
  void begin_case();
  void end_case();

  /// A snapshot, at `now`.
  struct state {
    bool in_call = false;
    std::string entry;         ///< the entry point in flight ("attend", "attend_cached: cache_append", ...)
    std::int64_t work = 0;     ///< of the call in flight
    double call_seconds = 0;   ///< how long the call in flight has run
    double limit_seconds = 0;  ///< its watchdog limit: max(floor, factor x expected)
    double expected_seconds = 0;
    std::int64_t calls = 0;  ///< calls completed
    bool in_case = false;    ///< a case has begun and was not counted yet
    law_phase phase = law_phase::starting;
    double checking_seconds = 0, shrinking_seconds = 0;  ///< time spent in each phase so far
  };
  state read(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) const;
  /// True when a call is in flight past its deadline.
  bool overdue(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) const;
  const watchdog_limits& limits() const { return limits_; }

 private:
  struct block;
  block* b_;
  watchdog_limits limits_;
};

/// Routes every call into a subject in this process through w (null: none);
/// a law's child sets its own.
void set_call_watch(law_watch* w);

/// Runs every attend call into a subject made in this process in its own
/// forked child (subject::attend), so that a call which kills its process is
/// one failing call, which the law reports and rapidcheck shrinks, not the end
/// of the law. The gate turns it on in the child that re-runs a law whose
/// process crashed (a fork per call: never on a passing subject's path).
void set_call_isolation(bool on);
bool call_isolation();

/// Brackets one call into a subject's code (the host's call adapters and call_subject): begin_call and
/// end_call on the watch set in this process, if any.
class watched_call {
 public:
  watched_call(const char* entry, std::int64_t work);
  ~watched_call();
  watched_call(const watched_call&) = delete;
  watched_call& operator=(const watched_call&) = delete;

 private:
  law_watch* w_;
};

}  // namespace attncheck
