// What the timing tools share: the process's CPU time, which separates what
// the kernel costs from what a shared machine took away.
#pragma once

#include <ctime>

namespace attnimpl::tools {

inline double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace attnimpl::tools
