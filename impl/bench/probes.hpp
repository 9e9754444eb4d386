// Machine probes for the bench: what the hardware gives this process now
// (the machine may be shared, so the table compares against these, not specs).
#pragma once

namespace attnimpl::bench {

/// f32 FMA throughput of `threads` threads running independent FMA chains, GFLOP/s.
double fma_peak_gflops(int threads);

/// Read bandwidth of `threads` threads summing a buffer far larger than caches, GB/s.
double read_bandwidth_gbs(int threads);

}  // namespace attnimpl::bench
