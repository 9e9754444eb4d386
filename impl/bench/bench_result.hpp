// What one bench run measured, as a value: the console prints each part as it
// is measured, and attncheck bench --html draws it (converted by the app: the
// bench knows nothing of the suite).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace attnimpl::bench {

/// The machine probes (probes.hpp): f32 FMA peak and best read bandwidth, at
/// one thread and at the run's threads.
struct probe_peaks {
  double fma1 = 0, fma_all = 0;  ///< GFLOP/s; 0: no FMA probe on this CPU
  double bw1 = 0, bw_all = 0;    ///< GB/s, the best rep
};

/// The peak RSS of a long prefill next to its inputs (not with --quick or --no-rss).
struct memory_use {
  long long l = 0;
  int threads = 0;
  double seconds = 0, peak_mib = 0, before_mib = 0, io_mib = 0, scores_mib = 0;
};

/// One row of the table: a forward case at a thread count.
struct case_row {
  std::string name;
  bool decode = false;  ///< judged in GB/s against the read probe; else in GFLOP/s against the FMA probe
  int threads = 0;
  double ms = 0, gflops = 0, cpu_per_wall = 0;
  std::optional<double> peak_percent;                   ///< of the FMA probe at the same threads; none without one
  std::optional<double> gbs, bw_percent, tokens_per_s;  ///< decode only
  std::optional<double> naive_ms, speedup;              ///< the naive baseline, where the CPU runs it (AVX2+FMA)
};

/// One backward case at the run's threads.
struct backward_row {
  std::string name;
  int threads = 0;
  double ms = 0, gflops = 0, cpu_per_wall = 0;
  std::optional<double> peak_percent;  ///< of the FMA probe at all threads
};

/// One target of docs/impl.md: a ratio within the run against its floor.
struct target_row {
  std::string name, what;
  bool measured = true;  ///< false: why_not says why (value, target unset)
  std::string why_not;
  double value = 0, target = 0;
  bool percent = true;  ///< printed as a percentage, else as a factor
  bool met() const { return measured && value >= target; }
};

struct result {
  int threads = 0, reps = 0;
  std::string kernel_isa, probe_isa;
  std::optional<memory_use> memory;
  probe_peaks peaks;
  std::vector<case_row> cases;
  std::vector<backward_row> backward;
  std::vector<target_row> targets;
  std::string text;  ///< the console text, as printed
};

}  // namespace attnimpl::bench
