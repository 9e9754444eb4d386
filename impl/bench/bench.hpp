// The attnimpl benchmark table (docs/impl.md, "Speed"): machine probes (f32 FMA
// peak at 1 and all threads, memory read bandwidth), then each case's time,
// GFLOP/s and % of peak (GB/s and % of bandwidth for decode), the ratio to a
// naive f32 baseline (materialized scores: Eigen GEMM, softmax, GEMM) timed
// in the same run, and the peak RSS of a long prefill next to its inputs.
#pragma once

#include "bench_result.hpp"

namespace attnimpl::bench {

/// Prints the table to stdout as it is measured, and fills `out` with it;
/// returns 0, or 2 on a bad option.
/// Options: --threads N (default: hardware threads), --reps N (best of N, default 2),
/// --quick (smaller shapes, no RSS case: for smoke tests), --no-rss.
int run(int argc, char** argv, result& out);
/// The same, printing only.
int run(int argc, char** argv);

}  // namespace attnimpl::bench
