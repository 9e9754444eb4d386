// Process isolation: a kernel under test may crash, abort or hang; the gate
// runs each law in a child process with a time limit and survives it.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace attncheck {

struct child_outcome {
  bool completed = false;        ///< the child ran fn to the end and sent its payload
  std::string payload;           ///< what fn returned
  int signal = 0;                ///< the signal that ended the child, if any
  int exit_code = 0;             ///< its exit code when it exited without completing
  bool timed_out = false;        ///< killed after the time limit
  std::string describe() const;  ///< "killed by SIGSEGV", "no result within 5 s", ...
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
std::vector<child_outcome> run_isolated_all(
    const std::vector<std::function<std::string()>>& fns, double timeout_s, int jobs,
    const std::function<void(const std::vector<std::size_t>& running, std::size_t finished)>& tick = {});

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

}  // namespace attncheck
