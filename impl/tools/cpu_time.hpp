// What the timing tools share: the process's CPU time, which separates what
// the kernel costs from what a shared machine took away.
#pragma once

#include <algorithm>
#include <chrono>
#include <ctime>

namespace attnimpl::tools {

inline double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// The least wall-clock and process-CPU seconds over the calls timed.
struct best_times {
  double wall = 1e300, cpu = 1e300;
  /// Calls f() once, timed; returns what it returned.
  template <class F>
  auto time(F&& f) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    auto result = f();
    wall = std::min(wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpu = std::min(cpu, cpu_seconds() - c0);
    return result;
  }
};

}  // namespace attnimpl::tools
