#include "probes.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "attnimpl/attention.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace attnimpl::bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class F>
double run_threads(int threads, F&& body) {
  std::vector<std::thread> pool;
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { body(t); });
  for (auto& th : pool) th.join();
  return seconds_since(t0);
}

#if defined(__x86_64__)
// The probes' loops use AVX2/FMA or AVX-512F through target attributes (the
// project is built for the baseline); they run only where the CPU has them
// (isa_supported(isa::avx2), cpu_has_avx512()). One body per probe, stamped
// out per width (a target attribute cannot depend on a template parameter).

/// 12 independent FMA chains of vector type V, iters steps each.
#define ATTNIMPL_FMA_CHAINS(NAME, TARGET, V, SET1, FMADD, FIRST)                   \
  __attribute__((target(TARGET))) float NAME(int id, long iters) {                 \
    V a[12];                                                                       \
    for (int i = 0; i < 12; ++i) a[i] = SET1(0.001f * static_cast<float>(i + id)); \
    const V b = SET1(0.999f), c = SET1(1e-4f);                                     \
    for (long k = 0; k < iters; ++k)                                               \
      for (int i = 0; i < 12; ++i) a[i] = FMADD(a[i], b, c);                       \
    float s = 0;                                                                   \
    for (int i = 0; i < 12; ++i) s += FIRST(a[i]);                                 \
    return s;                                                                      \
  }
ATTNIMPL_FMA_CHAINS(fma_chains, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32)
ATTNIMPL_FMA_CHAINS(fma_chains_avx512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_cvtss_f32)
#undef ATTNIMPL_FMA_CHAINS

/// Sum of p[0 .. n) in 4 accumulators of W lanes; with next, the lines of
/// next[0 .. 4n) are requested while it sums, one per 64 bytes summed (the
/// page-walk probe's request ahead).
#define ATTNIMPL_SUM(NAME, TARGET, V, W, SETZERO, ADD, LOADU, FIRST)                                      \
  __attribute__((target(TARGET))) float NAME(const float* p, std::size_t n, const char* next = nullptr) { \
    V s0 = SETZERO(), s1 = s0, s2 = s0, s3 = s0;                                                          \
    for (std::size_t i = 0; i + 4 * W <= n; i += 4 * W) {                                                 \
      if (next)                                                                                           \
        for (std::size_t x = 0; x < 16 * W; x += 64) _mm_prefetch(next + i * 4 + x, _MM_HINT_T0);         \
      s0 = ADD(s0, LOADU(p + i));                                                                         \
      s1 = ADD(s1, LOADU(p + i + W));                                                                     \
      s2 = ADD(s2, LOADU(p + i + 2 * W));                                                                 \
      s3 = ADD(s3, LOADU(p + i + 3 * W));                                                                 \
    }                                                                                                     \
    return FIRST(ADD(ADD(s0, s1), ADD(s2, s3)));                                                          \
  }
ATTNIMPL_SUM(sum_sse2, "sse2", __m128, 4, _mm_setzero_ps, _mm_add_ps, _mm_loadu_ps, _mm_cvtss_f32)
ATTNIMPL_SUM(sum_avx2, "avx2", __m256, 8, _mm256_setzero_ps, _mm256_add_ps, _mm256_loadu_ps, _mm256_cvtss_f32)
ATTNIMPL_SUM(sum_avx512, "avx512f", __m512, 16, _mm512_setzero_ps, _mm512_add_ps, _mm512_loadu_ps, _mm512_cvtss_f32)
#undef ATTNIMPL_SUM

bool cpu_has_avx512() {
  // libgcc/compiler-rt count AVX-512 only where the OS saves the ZMM state.
  static const bool has = __builtin_cpu_supports("avx512f") && isa_supported(isa::avx2);
  return has;
}

#else
// Elsewhere: no FMA probe (fma_peak_gflops returns 0), a plain sum for bandwidth.
bool cpu_has_avx512() { return false; }
float fma_chains_avx512(int, long) { return 0; }
float sum_avx512(const float*, std::size_t, const char* = nullptr) { return 0; }
float fma_chains(int, long) { return 0; }
float sum_avx2(const float*, std::size_t, const char* = nullptr) { return 0; }
float sum_sse2(const float* p, std::size_t n) {
  float s[16] = {};
  for (std::size_t i = 0; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) s[j] += p[i + static_cast<std::size_t>(j)];
  float t = 0;
  for (float x : s) t += x;
  return t;
}
#endif

}  // namespace

const char* probe_isa() {
#if defined(__x86_64__)
  return cpu_has_avx512() ? "avx512" : isa_supported(isa::avx2) ? "avx2" : "sse2";
#else
  return "scalar";
#endif
}

double fma_peak_gflops(int threads) {
  if (!isa_supported(isa::avx2)) return 0;  // no FMA unit to measure
  // 12 independent chains hide the FMA latency on 2 ports (latency <= 6).
  constexpr long iters = 50'000'000;
  const bool wide = cpu_has_avx512();
  const double flops_per_fma = wide ? 32 : 16;
  std::vector<float> sink(static_cast<std::size_t>(threads));
  double best = 0;
  for (int rep = 0; rep < 2; ++rep) {
    const double t = run_threads(threads, [&](int id) {
      sink[static_cast<std::size_t>(id)] = wide ? fma_chains_avx512(id, iters) : fma_chains(id, iters);
    });
    best = std::max(best, static_cast<double>(threads) * iters * 12 * flops_per_fma / t / 1e9);
  }
  return best;
}

namespace {
constexpr std::size_t probe_floats = std::size_t{64} << 20;  // 256 MiB: beyond any L3 here

std::vector<float>& probe_buffer() {
  static std::vector<float> buf(probe_floats, 1.0f);
  return buf;
}
}  // namespace

std::vector<double> read_runs_bandwidth_samples(int threads, int reps, std::size_t run_bytes, bool request_ahead) {
  std::vector<double> samples;
  if (!isa_supported(isa::avx2)) return std::vector<double>(static_cast<std::size_t>(reps), 0.0);
  const std::vector<float>& buf = probe_buffer();
  const std::size_t run = run_bytes / 4, runs = probe_floats / run, per = runs / static_cast<std::size_t>(threads);
  std::vector<float> sink(static_cast<std::size_t>(threads));
  for (int rep = 0; rep < reps; ++rep) {
    const double t = run_threads(threads, [&](int id) {
      const std::size_t last = per * static_cast<std::size_t>(id + 1) - 1;
      // Runs last, last - 1, ...: while one sums, the next one down is requested.
      float sum = 0;
      for (std::size_t k = 0; k < per; ++k) {
        const float* p = buf.data() + (last - k) * run;
        sum += sum_avx2(p, run, request_ahead && k + 1 < per ? reinterpret_cast<const char*>(p - run) : nullptr);
      }
      sink[static_cast<std::size_t>(id)] = sum;
    });
    samples.push_back(static_cast<double>(per * static_cast<std::size_t>(threads) * run_bytes) / t / 1e9);
  }
  return samples;
}

std::vector<double> read_bandwidth_samples(int threads, int reps) {
  constexpr std::size_t floats = probe_floats;
  std::vector<float>& buf = probe_buffer();
  std::vector<float> sink(static_cast<std::size_t>(threads));
  std::vector<double> samples;
  const bool avx2 = isa_supported(isa::avx2), avx512 = cpu_has_avx512();
  for (int rep = 0; rep < reps; ++rep) {
    const double t = run_threads(threads, [&](int id) {
      const std::size_t per = floats / static_cast<std::size_t>(threads);
      const float* p = buf.data() + per * static_cast<std::size_t>(id);
      sink[static_cast<std::size_t>(id)] = avx512 ? sum_avx512(p, per) : avx2 ? sum_avx2(p, per) : sum_sse2(p, per);
    });
    samples.push_back(static_cast<double>(floats) * 4 / t / 1e9);
  }
  return samples;
}

}  // namespace attnimpl::bench
