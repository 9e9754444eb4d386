// Machine probes for the bench: what the hardware gives this process now
// (the machine may be shared, so the table compares against these, not specs).
#pragma once

#include <vector>

namespace attnimpl::bench {

/// f32 FMA throughput of `threads` threads running independent FMA chains, GFLOP/s.
double fma_peak_gflops(int threads);

/// Read bandwidth of `threads` threads summing a 256 MiB buffer (far larger
/// than a core's share of the last-level cache), GB/s, one figure per rep
/// (reps >= 1), in the order measured.
std::vector<double> read_bandwidth_samples(int threads, int reps);

}  // namespace attnimpl::bench
