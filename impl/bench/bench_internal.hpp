// Internal to the bench (impl/bench/): the pieces one part of the run
// needs from another. Not installed.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "attnimpl/attention.hpp"
#include "bench_result.hpp"

namespace attnimpl::bench::detail {

/// --isa: the kernel's instruction set in every call of the run.
extern isa bench_isa;

/// printf to standard output, and the same text appended to r.text.
void emit(result& r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

struct bench_case {
  const char* name;
  std::int64_t b, hq, hkv, lq, lk, d;
  bool causal;
  dtype kv_type;  // decode cases: storage of the cache
  bool decode;
};

struct timing {
  double wall = 1e300;  // best of reps, seconds
  double cpu = 0;       // process CPU seconds of that best rep (all threads)
};

/// Process CPU seconds (all threads).
double cpu_seconds();

template <class F>
timing best_of(int reps, F&& f) {
  f();  // warm-up: page faults, pool start, caches
  timing best;
  for (int r = 0; r < reps; ++r) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (wall < best.wall) best = {wall, cpu_seconds() - c0};
  }
  return best;
}

/// n floats in [-0.5, 0.5), the same for the same salt.
std::vector<float> filled(std::size_t n, std::uint32_t salt);

inline strides4 dense(std::int64_t l, std::int64_t h, std::int64_t d) { return {l * h * d, h * d, d, 1}; }

/// Visible (query, key) pairs of the case: the FLOP count's basis.
double visible_pairs(const bench_case& c);

/// The f32 prefill B=1 H=h L=l D=128 (lq = lk, Hq = Hkv), dense layout, on
/// the given buffers of l * h * 128 floats each.
attention_args prefill_args(std::int64_t h, std::int64_t l, const float* q, const float* k, const float* v, float* o);

// cases.cpp: one forward case at a thread count (its row printed and kept);
// the kernel's timing, or none (wall 1e300) where the case could not be set up.
timing bench_prefill(result& r, const bench_case& c, int threads, int reps);
timing bench_decode(result& r, const bench_case& c, int threads, int reps);
/// One f32 backward B=1 H=h L=l D=128 (lq = lk, Hq = Hkv) at the production
/// tiles, handed the forward's own O and LSE and a dO: its time, GFLOP/s and
/// share of the FMA probe. FLOPs: the standard count, 2.5 times the
/// forward's 4*B*Hq*D per visible (query, key) pair (dP, dQ, dK and dV take
/// 2*D each and the score recompute 2*D: 10*D a pair).
void bench_backward(result& r, const char* name, std::int64_t h, std::int64_t l, bool causal, int threads, int reps);

// targets.cpp: the targets of docs/impl.md as ratios within this run, each
// line naming its reference (a probe at probe_isa()'s width, or another
// kernel run); the figures are the all-threads ones of the table's rows.
struct target_inputs {
  double decode_f32_gbs = 0, decode_f32_tps = 0, decode_bf16_tps = 0, dense_gflops = 0, causal_gflops = 0;
};
void bench_targets(result& r, int threads, int reps, bool quick, const target_inputs& in);

}  // namespace attnimpl::bench::detail
