// Machine probes for the bench: what the hardware gives this process now
// (the machine may be shared, so the table compares against these, not specs).
#pragma once

#include <cstddef>
#include <vector>

namespace attnimpl::bench {

/// The widest vector instruction set the probes use on this CPU: "avx512"
/// (AVX-512F, where the OS saves its state), "avx2" (AVX2+FMA+F16C), else
/// "sse2" (x86-64's baseline; no FMA probe) or "scalar" (not x86-64). The
/// FMA and read probes run at this width, so "% of peak" is of the machine.
const char* probe_isa();

/// f32 FMA throughput of `threads` threads running independent FMA chains at
/// probe_isa()'s width, GFLOP/s (0 without FMA).
double fma_peak_gflops(int threads);

/// Read bandwidth of `threads` threads summing (at probe_isa()'s width) a 256 MiB buffer (far larger
/// than a core's share of the last-level cache), GB/s, one figure per rep
/// (reps >= 1), in the order measured.
std::vector<double> read_bandwidth_samples(int threads, int reps);

/// The same 256 MiB read in runs of run_bytes visited in descending order
/// (each thread its own share), the way a decode step walks a paged cache
/// whose pages were handed out in reverse: a run is one KV head's K or V of
/// one page. With request_ahead, the next run's lines are prefetched one per
/// 64 bytes summed, as the kernel does; without, only the hardware fetches.
/// GB/s per rep. Zero where the CPU lacks AVX2 (the loop needs it).
std::vector<double> read_runs_bandwidth_samples(int threads, int reps, std::size_t run_bytes, bool request_ahead);

}  // namespace attnimpl::bench
