// The bench run: options, the header, the memory case, the probes, the
// table of forward cases, the backward pass and the targets.
#include "bench.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_internal.hpp"
#include "probes.hpp"

namespace attnimpl::bench {

namespace detail {

isa bench_isa = isa::automatic;

void emit(result& r, const char* fmt, ...) {
  va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string text(static_cast<std::size_t>(std::max(n, 0)) + 1, '\0');
  std::vsnprintf(text.data(), text.size(), fmt, again);
  va_end(again);
  text.pop_back();
  std::fputs(text.c_str(), stdout);
  r.text += text;
}

}  // namespace detail

namespace {

using namespace detail;

long peak_rss_kib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/// Runs first, while the process is small: peak RSS minus the inputs and
/// output is the kernel's own memory (tiles x threads, no Lq x Lk scores).
void bench_memory(result& r, int threads, std::int64_t l) {
  const std::int64_t h = 8, d = 128;
  const long before = peak_rss_kib();
  const std::size_t n = static_cast<std::size_t>(l * h * d);
  std::vector<float> q(n, 0.01f), k(n, 0.02f), v(n, 0.03f), o(n, 0.0f);
  attention_args a = prefill_args(h, l, q.data(), k.data(), v.data(), o.data());
  a.causal = true;  // half the FLOPs of non-causal: same memory behaviour, half the wait
  const auto t0 = std::chrono::steady_clock::now();
  (void)attention(a, {.threads = threads, .simd = bench_isa});
  memory_use m;
  m.l = static_cast<long long>(l), m.threads = threads;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.io_mib = 4.0 * static_cast<double>(n) * 4 / (1 << 20);
  m.peak_mib = static_cast<double>(peak_rss_kib()) / 1024;
  m.before_mib = static_cast<double>(before) / 1024;
  m.scores_mib = static_cast<double>(h) * static_cast<double>(l) * static_cast<double>(l) * 4 / (1 << 20);
  emit(r, "memory: causal prefill B=1 H=8 L=%lld D=128 f32, %d threads, %.1f s\n", m.l, threads, m.seconds);
  emit(r,
       "  peak RSS %.1f MiB (%.1f MiB before); Q+K+V+O %.1f MiB; kernel extra %.1f MiB; "
       "a materialized score matrix would be %.0f MiB\n",
       m.peak_mib, m.before_mib, m.io_mib, m.peak_mib - m.before_mib - m.io_mib, m.scores_mib);
  r.memory = m;
}

/// "best B, median M, worst W over N reps" of probe samples.
std::string spread(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  char buf[160];
  std::snprintf(buf, sizeof buf, "best %.1f, median %.1f, worst %.1f GB/s over %zu reps", x.back(), x[x.size() / 2], x.front(),
                x.size());
  return buf;
}

}  // namespace

int run(int argc, char** argv, result& r) {
  r = result{};
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int reps = 2;
  bool quick = false, rss = true;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc)
      threads = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else if (arg == "--quick")
      quick = true;
    else if (arg == "--no-rss")
      rss = false;
    else if (arg == "--isa" && i + 1 < argc) {
      // The kernel's instruction set, passed in every call's config.
      const std::string name = argv[++i];
      if (!parse_isa(name) || !isa_supported(*parse_isa(name))) {
        std::fprintf(stderr, "bench: --isa must be auto, avx512, avx2 or portable, one this CPU runs (got '%s')\n", name.c_str());
        return 2;
      }
      bench_isa = *parse_isa(name);
    } else {
      std::fprintf(stderr, "bench: unknown option %s (--threads N, --reps N, --filter TEXT, --isa NAME, --quick, --no-rss)\n",
                   arg.c_str());
      return 2;
    }
  }
  r.threads = threads, r.reps = reps, r.kernel_isa = isa_name(resolve_isa(bench_isa)), r.probe_isa = probe_isa();
  emit(r,
       "attnimpl bench: %d threads, best of %d, kernel isa %s (config defaults: k_tile %lld, split_keys %lld, "
       "exp %.2f ulps)\n",
       threads, reps, isa_name(resolve_isa(bench_isa)), static_cast<long long>(resolve({}).k_tile),
       static_cast<long long>(resolve({}).split_keys), exp_ulps());
  if (rss && !quick) bench_memory(r, threads, 16384);
  // The bandwidth probe's spread says how much the shared machine moved
  // during the run: a decode %bw is only as good as it.
  const int probe_reps = quick ? 2 : 5;
  const auto bw1 = read_bandwidth_samples(1, probe_reps), bw_all = read_bandwidth_samples(threads, probe_reps);
  r.peaks = {fma_peak_gflops(1), fma_peak_gflops(threads), *std::max_element(bw1.begin(), bw1.end()),
             *std::max_element(bw_all.begin(), bw_all.end())};
  const probe_peaks& pk = r.peaks;
  if (pk.fma1 > 0)
    emit(r, "probe: f32 FMA peak %.1f GFLOP/s (1 thread), %.1f GFLOP/s (%d threads), %s\n", pk.fma1, pk.fma_all, threads,
         probe_isa());
  else
    emit(r, "probe: f32 FMA peak not measured (the CPU has no AVX2+FMA); %%peak shows -\n");
  emit(r, "probe: memory read bandwidth, 256 MiB: 1 thread %s; %d threads %s; %s loads\n", spread(bw1).c_str(), threads,
       spread(bw_all).c_str(), probe_isa());
  // What the decode rows' page walk gets from memory with nothing computed:
  // 8 KiB runs (one KV head's K or V of a 16-token f32 page), descending.
  const auto runs_hw = read_runs_bandwidth_samples(threads, probe_reps, 8192, false);
  const auto runs_sw = read_runs_bandwidth_samples(threads, probe_reps, 8192, true);
  if (isa_supported(isa::avx2))
    emit(r,
         "probe: the same 256 MiB in 8 KiB runs, descending (an f32 decode row's pages), %d threads: hardware prefetch "
         "only %s; next run requested ahead %s\n",
         threads, spread(runs_hw).c_str(), spread(runs_sw).c_str());
  const std::int64_t l = quick ? 256 : 2048, ld = quick ? 512 : 4096, ll = quick ? 1024 : 32768;
  const std::int64_t bl = quick ? 2 : 8;
  // Decode K+V: Lk = 512 is 4 MiB of f32 (in cache: the kernel's compute
  // speed), Lk = 4096 32 MiB (a last-level cache's size), Lk = 32768 and B = 8
  // 256 MiB (read from memory).
  const bench_case cases[] = {
      {"prefill B=1 H=16 L=2048 D=128", 1, 16, 16, l, l, 128, false, dtype::f32, false},
      {"prefill causal B=1 H=16 L=2048 D=128", 1, 16, 16, l, l, 128, true, dtype::f32, false},
      {"prefill B=4 H=8 L=512 D=64", 4, 8, 8, l / 4, l / 4, 64, false, dtype::f32, false},
      {"decode GQA Hq=32 Hkv=8 Lk=512 D=128 f32", 1, 32, 8, 1, 512, 128, false, dtype::f32, true},
      {"decode GQA Hq=32 Hkv=8 Lk=512 D=128 bf16", 1, 32, 8, 1, 512, 128, false, dtype::bf16, true},
      {"decode GQA Hq=32 Hkv=8 Lk=4096 D=128 f32", 1, 32, 8, 1, ld, 128, false, dtype::f32, true},
      {"decode GQA Hq=32 Hkv=8 Lk=4096 D=128 bf16", 1, 32, 8, 1, ld, 128, false, dtype::bf16, true},
      {"decode GQA Hq=32 Hkv=8 Lk=32768 D=128 f32", 1, 32, 8, 1, ll, 128, false, dtype::f32, true},
      {"decode GQA Hq=32 Hkv=8 Lk=32768 D=128 bf16", 1, 32, 8, 1, ll, 128, false, dtype::bf16, true},
      {"decode GQA B=8 Hq=32 Hkv=8 Lk=4096 D=128 f32", bl, 32, 8, 1, ld, 128, false, dtype::f32, true},
      {"decode GQA B=8 Hq=32 Hkv=8 Lk=4096 D=128 bf16", bl, 32, 8, 1, ld, 128, false, dtype::bf16, true},
  };
  emit(r, "%s\n", quick ? "(quick: L, Lk and B scaled down, names keep the full sizes)" : "");
  emit(r, "%-46s %3s %10s %9s %7s %8s %7s %9s %10s %8s %9s\n", "case", "thr", "time_ms", "GFLOP/s", "%peak", "GB/s", "%bw",
       "tok/s", "naive_ms", "speedup", "cpu/wall");
  // The all-threads figures the targets below are ratios of.
  target_inputs in;
  for (const bench_case& c : cases) {
    if (!filter.empty() && std::string(c.name).find(filter) == std::string::npos) continue;
    std::vector<int> counts = {threads};
    if (threads > 1 && &c == &cases[0]) counts.insert(counts.begin(), 1);
    for (int t : counts) {
      const timing kt = c.decode ? bench_decode(r, c, t, reps) : bench_prefill(r, c, t, reps);
      if (t != threads || kt.wall <= 0 || kt.wall >= 1e300) continue;
      const double flops = 4.0 * static_cast<double>(c.b * c.hq) * visible_pairs(c) * static_cast<double>(c.d);
      if (&c == &cases[0]) in.dense_gflops = flops / kt.wall / 1e9;
      if (&c == &cases[1]) in.causal_gflops = flops / kt.wall / 1e9;
      if (&c == &cases[7]) {
        in.decode_f32_gbs = static_cast<double>(c.b * c.lk * c.hkv * 2 * c.d) * 4 / kt.wall / 1e9;
        in.decode_f32_tps = static_cast<double>(c.b * c.lq) / kt.wall;
      }
      if (&c == &cases[8]) in.decode_bf16_tps = static_cast<double>(c.b * c.lq) / kt.wall;
    }
  }
  emit(r,
       "FLOPs count 4*B*Hq*D per visible (query, key) pair (causal: the visible half). "
       "Decode GB/s: K and V bytes of the cache per step; %%bw: of the best probe rep; tok/s: B tokens "
       "per step. naive: materialized scores, Eigen GEMM, softmax, GEMM, f32, same threads. "
       "cpu/wall < threads means the machine was shared.\n");
  // The backward pass (impl/src/backward), on the dense and causal prefill's shape.
  for (const auto& [name, causal] : {std::pair{"B=1 H=16 L=2048 D=128", false}, std::pair{"causal B=1 H=16 L=2048 D=128", true}})
    if (filter.empty() || (std::string("backward ") + name).find(filter) != std::string::npos)
      bench_backward(r, name, 16, l, causal, threads, reps);
  emit(r,
       "backward FLOPs: 2.5 x the forward's 4*B*Hq*D per visible (query, key) pair (10*D a pair: the score "
       "recompute, dP, dQ, dK, dV); handed the forward's own O and LSE; %%: of the FMA probe at all threads.\n");
  if (filter.empty() || std::string("targets").find(filter) != std::string::npos) bench_targets(r, threads, reps, quick, in);
  return 0;
}

int run(int argc, char** argv) {
  result ignored;
  return run(argc, argv, ignored);
}

}  // namespace attnimpl::bench
