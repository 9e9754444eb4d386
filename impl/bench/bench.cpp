#include "bench.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "attnimpl/attention.hpp"
#include "attnimpl/backward.hpp"
#include "attnimpl/kv_cache.hpp"
#include "attnimpl/paged.hpp"
#include "naive_baseline.hpp"
#include "probes.hpp"

namespace attnimpl::bench {
namespace {

isa bench_isa = isa::automatic;  // --isa: the kernel's instruction set in every call

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

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

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

std::vector<float> filled(std::size_t n, std::uint32_t salt) {
  std::vector<float> x(n);
  std::uint32_t s = 2463534242u ^ salt;
  for (auto& f : x) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    f = static_cast<float>(s >> 8) * 0x1p-24f - 0.5f;
  }
  return x;
}

strides4 dense(std::int64_t l, std::int64_t h, std::int64_t d) { return {l * h * d, h * d, d, 1}; }

/// Visible (query, key) pairs of the case: the FLOP count's basis.
double visible_pairs(const bench_case& c) {
  if (!c.causal) return static_cast<double>(c.lq) * static_cast<double>(c.lk);
  double pairs = 0;
  for (std::int64_t i = 0; i < c.lq; ++i) pairs += static_cast<double>(std::min(c.lk, c.lk - c.lq + i + 1));
  return pairs;
}

struct peaks {
  double fma1, fma_all, bw1, bw_all;
};

void print_row(const bench_case& c, int threads, const timing& k, const timing& naive, const peaks& pk) {
  const double flops = 4.0 * static_cast<double>(c.b * c.hq) * visible_pairs(c) * static_cast<double>(c.d);
  const double peak = threads == 1 ? pk.fma1 : pk.fma_all;
  std::printf("%-46s %3d %10.2f %9.1f", c.name, threads, k.wall * 1e3, flops / k.wall / 1e9);
  if (peak > 0)
    std::printf(" %6.1f%%", 100.0 * flops / k.wall / 1e9 / peak);
  else
    std::printf(" %7s", "-");
  if (c.decode) {
    const double bytes = static_cast<double>(c.b * c.lk * c.hkv * 2 * c.d) * (c.kv_type == dtype::f32 ? 4 : 2);
    const double bw = threads == 1 ? pk.bw1 : pk.bw_all;
    // One decode step yields one token per sequence.
    std::printf(" %8.1f %6.1f%% %9.0f", bytes / k.wall / 1e9, 100.0 * bytes / k.wall / 1e9 / bw,
                static_cast<double>(c.b * c.lq) / k.wall);
  } else {
    std::printf(" %8s %7s %9s", "-", "-", "-");
  }
  if (naive.wall > 0)  // the naive baseline runs where the CPU has AVX2+FMA
    std::printf(" %10.2f %7.2fx %9.2f\n", naive.wall * 1e3, naive.wall / k.wall, k.cpu / k.wall);
  else
    std::printf(" %10s %8s %9.2f\n", "-", "-", k.cpu / k.wall);
  std::fflush(stdout);
}

timing bench_prefill(const bench_case& c, int threads, int reps, const peaks& pk) {
  const auto q = filled(static_cast<std::size_t>(c.b * c.lq * c.hq * c.d), 1);
  const auto k = filled(static_cast<std::size_t>(c.b * c.lk * c.hkv * c.d), 2);
  const auto v = filled(static_cast<std::size_t>(c.b * c.lk * c.hkv * c.d), 3);
  std::vector<float> o(q.size()), o_naive(q.size());
  attention_args a;
  a.dims = {c.b, c.hq, c.hkv, c.lq, c.lk, c.d, c.d};
  a.q = {q.data(), dtype::f32, dense(c.lq, c.hq, c.d)};
  a.k = {k.data(), dtype::f32, dense(c.lk, c.hkv, c.d)};
  a.v = {v.data(), dtype::f32, dense(c.lk, c.hkv, c.d)};
  a.o = {o.data(), dtype::f32, dense(c.lq, c.hq, c.d)};
  a.causal = c.causal;
  const timing kt = best_of(reps, [&] { (void)attention(a, {.threads = threads, .simd = bench_isa}); });
  const timing nt = isa_supported(isa::avx2) ? best_of(reps,
                                                       [&] {
                                                         naive_attention_f32(q.data(), k.data(), v.data(), o_naive.data(), c.b,
                                                                             c.hq, c.hkv, c.lq, c.lk, c.d, c.causal, threads);
                                                       })
                                             : timing{0, 0};
  print_row(c, threads, kt, nt, pk);
  return kt;
}

/// Decode through the paged cache (page size 16, pages in reverse order).
timing bench_decode(const bench_case& c, int threads, int reps, const peaks& pk) {
  const std::int64_t page = 16, pages = c.b * ((c.lk + page - 1) / page);
  std::vector<std::int32_t> order(static_cast<std::size_t>(pages));
  for (std::int64_t p = 0; p < pages; ++p) order[static_cast<std::size_t>(p)] = static_cast<std::int32_t>(pages - 1 - p);
  std::optional<paged_kv_cache> cache;
  const status made = paged_kv_cache::create(
      {.batch = c.b, .hkv = c.hkv, .d = c.d, .dv = c.d, .type = c.kv_type, .page_size = page, .pages = pages}, order, cache);
  if (!made.ok()) {
    std::printf("%-44s cache: %s\n", c.name, made.message.c_str());
    return {};
  }
  const auto k = filled(static_cast<std::size_t>(c.b * c.lk * c.hkv * c.d), 2);
  const auto v = filled(static_cast<std::size_t>(c.b * c.lk * c.hkv * c.d), 3);
  const bool f32 = c.kv_type == dtype::f32;
  std::vector<std::uint16_t> k16(f32 ? 0 : k.size()), v16(f32 ? 0 : v.size());
  for (std::size_t i = 0; i < k16.size(); ++i) {  // bf16 by truncation: the values only need to be bf16
    std::uint32_t bk, bv;
    std::memcpy(&bk, &k[i], 4);
    std::memcpy(&bv, &v[i], 4);
    k16[i] = static_cast<std::uint16_t>(bk >> 16);
    v16[i] = static_cast<std::uint16_t>(bv >> 16);
  }
  const std::int64_t es = f32 ? 4 : 2;
  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    const std::int64_t off = bi * c.lk * c.hkv * c.d * es;
    const char* kb = (f32 ? reinterpret_cast<const char*>(k.data()) : reinterpret_cast<const char*>(k16.data())) + off;
    const char* vb = (f32 ? reinterpret_cast<const char*>(v.data()) : reinterpret_cast<const char*>(v16.data())) + off;
    const status appended = cache->append(bi, c.lk, {kb, {c.hkv * c.d, c.d, 1}, vb, {c.hkv * c.d, c.d, 1}});
    if (!appended.ok()) {
      std::printf("%-44s append: %s\n", c.name, appended.message.c_str());
      return {};
    }
  }
  const auto q = filled(static_cast<std::size_t>(c.b * c.lq * c.hq * c.d), 1);
  std::vector<float> o(q.size()), o_naive(q.size());
  cache_attention_args a;
  a.hq = c.hq;
  a.lq = c.lq;
  a.q = {q.data(), dtype::f32, dense(c.lq, c.hq, c.d)};
  a.o = {o.data(), dtype::f32, dense(c.lq, c.hq, c.d)};
  // A decode step is milliseconds: more reps, same wall budget (steps past the
  // cache take longer, so fewer of them).
  const double kv_mib = static_cast<double>(c.b * c.lk * c.hkv * 2 * c.d * es) / (1 << 20);
  const int decode_reps = kv_mib > 64 ? reps * 4 : reps * 10;
  const timing kt = best_of(decode_reps, [&] { (void)cache->attend(a, {.threads = threads, .simd = bench_isa}); });
  const timing nt = isa_supported(isa::avx2) ? best_of(decode_reps,
                                                       [&] {
                                                         naive_attention_f32(q.data(), k.data(), v.data(), o_naive.data(), c.b,
                                                                             c.hq, c.hkv, c.lq, c.lk, c.d, false, threads);
                                                       })
                                             : timing{0, 0};
  print_row(c, threads, kt, nt, pk);
  return kt;
}

/// tokens/s of one f32 decode step (B = 1, Hq = 32, Hkv = 8, D = 128) over lk
/// keys through a caller's block table (page size 16, pages in reverse
/// order in an arena (page, slot, head, dim)) and over the same keys dense,
/// in one run: {paged, dense}.
std::pair<double, double> paged_dense_decode_tps(std::int64_t lk, int threads, int reps) {
  const std::int64_t hq = 32, hkv = 8, d = 128, page = 16, pages = (lk + page - 1) / page;
  const auto q = filled(static_cast<std::size_t>(hq * d), 1);
  const auto k = filled(static_cast<std::size_t>(lk * hkv * d), 2);
  const auto v = filled(static_cast<std::size_t>(lk * hkv * d), 3);
  std::vector<float> kp(static_cast<std::size_t>(pages * page * hkv * d)), vp(kp.size()), o(q.size());
  std::vector<std::int32_t> table(static_cast<std::size_t>(pages));
  for (std::int64_t t = 0; t < pages; ++t) {
    const std::int64_t at = pages - 1 - t;
    table[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(at);
    const std::int64_t keys = std::min(page, lk - t * page);
    std::copy_n(k.begin() + t * page * hkv * d, keys * hkv * d, kp.begin() + at * page * hkv * d);
    std::copy_n(v.begin() + t * page * hkv * d, keys * hkv * d, vp.begin() + at * page * hkv * d);
  }
  const std::int64_t n = lk;
  paged_attention_args pa;
  pa.dims = {1, hq, hkv, 1, lk, d, d};
  pa.q = {q.data(), dtype::f32, dense(1, hq, d)};
  pa.kv.page_size = page;
  pa.kv.num_pages = pages;
  pa.kv.k_pages = {kp.data(), dtype::f32, {page * hkv * d, hkv * d, d, 1}};
  pa.kv.v_pages = {vp.data(), dtype::f32, {page * hkv * d, hkv * d, d, 1}};
  pa.kv.table = table.data();
  pa.kv.table_stride = pages;
  pa.kv.max_pages = pages;
  pa.key_len = &n;
  pa.o = {o.data(), dtype::f32, dense(1, hq, d)};
  attention_args da;
  da.dims = pa.dims;
  da.q = pa.q;
  da.k = {k.data(), dtype::f32, dense(lk, hkv, d)};
  da.v = {v.data(), dtype::f32, dense(lk, hkv, d)};
  da.o = pa.o;
  const config cfg{.threads = threads, .simd = bench_isa};
  // Interleaved, best of each: the shared machine's slow spells hit both.
  timing paged, dense_t;
  for (int r = 0; r < 3; ++r) {
    const timing pt = best_of(reps * 4, [&] { (void)paged_attention(pa, cfg); });
    const timing dt = best_of(reps * 4, [&] { (void)attention(da, cfg); });
    if (pt.wall < paged.wall) paged = pt;
    if (dt.wall < dense_t.wall) dense_t = dt;
  }
  return {1.0 / paged.wall, 1.0 / dense_t.wall};
}

/// Visible (query, key) pairs of an lq = lk = l prefill with var's windows
/// and chunks, counted as the kernel sees them.
double visible_pairs_of(std::int64_t l, bool causal, const variants& var) {
  double pairs = 0;
  for (std::int64_t p = 0; p < l; ++p) {
    std::int64_t lo = 0, hi = causal ? p + 1 : l;
    if (var.window_left >= 0) lo = std::max(lo, p - var.window_left);
    if (var.window_right >= 0) hi = std::min(hi, p + var.window_right + 1);
    if (var.chunk > 0) lo = std::max(lo, p / var.chunk * var.chunk), hi = std::min(hi, (p / var.chunk + 1) * var.chunk);
    pairs += static_cast<double>(std::max<std::int64_t>(0, hi - lo));
  }
  return pairs;
}

/// The f32 prefill B=1 H=h L=l D=128 (lq = lk, Hq = Hkv), dense layout, on
/// the given buffers of l * h * 128 floats each.
attention_args prefill_args(std::int64_t h, std::int64_t l, const float* q, const float* k, const float* v, float* o) {
  const std::int64_t d = 128;
  attention_args a;
  a.dims = {1, h, h, l, l, d, d};
  a.q = {q, dtype::f32, dense(l, h, d)};
  a.k = {k, dtype::f32, dense(l, h, d)};
  a.v = {v, dtype::f32, dense(l, h, d)};
  a.o = {o, dtype::f32, dense(l, h, d)};
  return a;
}

/// Two f32 prefills B=1 H=h L=l D=128 (lq = lk) on the same inputs, (var_a,
/// isa_a) and (var_b, isa_b), their reps alternating a, b, a, b so both see
/// the same load: GFLOP/s of each one's visible pairs, best of reps.
std::pair<double, double> prefill_pair_gflops(std::int64_t h, std::int64_t l, bool causal, const variants& var_a, isa isa_a,
                                              const variants& var_b, isa isa_b, int threads, int reps) {
  const std::int64_t d = 128;
  const std::size_t n = static_cast<std::size_t>(l * h * d);
  const auto q = filled(n, 1), k = filled(n, 2), v = filled(n, 3);
  std::vector<float> o(n);
  attention_args a = prefill_args(h, l, q.data(), k.data(), v.data(), o.data());
  a.causal = causal;
  attention_args b = a;
  a.var = var_a;
  b.var = var_b;
  const auto once = [&](const attention_args& x, isa which) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)attention(x, {.threads = threads, .simd = which});
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  once(a, isa_a);  // warm-up: page faults, pool start, caches
  once(b, isa_b);
  double best_a = 1e300, best_b = 1e300;
  for (int r = 0; r < reps; ++r) {
    best_a = std::min(best_a, once(a, isa_a));
    best_b = std::min(best_b, once(b, isa_b));
  }
  const double per_pair = 4.0 * static_cast<double>(h * d) / 1e9;
  return {per_pair * visible_pairs_of(l, causal, var_a) / best_a, per_pair * visible_pairs_of(l, causal, var_b) / best_b};
}

/// One f32 backward B=1 H=h L=l D=128 (lq = lk, Hq = Hkv) at the production
/// tiles, handed the forward's own O and LSE and a dO: its time, GFLOP/s and
/// share of the FMA probe. FLOPs: the standard count, 2.5 times the
/// forward's 4*B*Hq*D per visible (query, key) pair (dP, dQ, dK and dV take
/// 2*D each and the score recompute 2*D: 10*D a pair).
void bench_backward(const char* name, std::int64_t h, std::int64_t l, bool causal, int threads, int reps, const peaks& pk) {
  const std::int64_t d = 128;
  const std::size_t n = static_cast<std::size_t>(l * h * d);
  const auto q = filled(n, 1), k = filled(n, 2), v = filled(n, 3), d_o = filled(n, 4);
  std::vector<float> o(n), lse(static_cast<std::size_t>(h * l)), dq(n), dk(n), dv(n);
  attention_args f = prefill_args(h, l, q.data(), k.data(), v.data(), o.data());
  f.lse = {lse.data(), {h * l, l, 1}};
  f.causal = causal;
  const status fwd = attention(f, {.threads = threads, .simd = bench_isa});
  if (!fwd.ok()) {
    std::printf("backward: %s: forward: %s\n", name, fwd.message.c_str());
    return;
  }
  backward_args a;
  a.dims = f.dims;
  a.q = f.q, a.k = f.k, a.v = f.v;
  a.o = {o.data(), dtype::f32, dense(l, h, d)};
  a.lse = lse.data();
  a.lse_stride = {h * l, l, 1};
  a.d_o = {d_o.data(), dtype::f32, dense(l, h, d)};
  a.dq = {dq.data(), dtype::f32, dense(l, h, d)};
  a.dk = {dk.data(), dtype::f32, dense(l, h, d)};
  a.dv = {dv.data(), dtype::f32, dense(l, h, d)};
  a.causal = causal;
  const timing t = best_of(reps, [&] { (void)attention_backward(a, {.threads = threads}); });
  const bench_case c{name, 1, h, h, l, l, d, causal, dtype::f32, false};
  const double flops = 2.5 * 4.0 * static_cast<double>(h) * visible_pairs(c) * static_cast<double>(d);
  const double gflops = flops / t.wall / 1e9;
  std::printf("backward: %-44s %3d threads %10.2f ms %9.1f GFLOP/s", name, threads, t.wall * 1e3, gflops);
  if (pk.fma_all > 0)
    std::printf(", %5.1f%% of the %s FMA probe %.1f GFLOP/s", 100.0 * gflops / pk.fma_all, probe_isa(), pk.fma_all);
  else
    std::printf(", FMA probe not measured");
  std::printf(" (cpu/wall %.2f)\n", t.cpu / t.wall);
  std::fflush(stdout);
}

/// "name: what = X, target T: met/unmet" (value and target as ratios).
void target_line(const char* name, const char* what, double value, double target, bool percent) {
  if (percent)
    std::printf("target: %-58s %-44s %6.1f%% (target >= %.0f%%) %s\n", name, what, 100.0 * value, 100.0 * target,
                value >= target ? "met" : "NOT met");
  else
    std::printf("target: %-58s %-44s %6.2fx (target >= %.1fx) %s\n", name, what, value, target,
                value >= target ? "met" : "NOT met");
  std::fflush(stdout);
}

/// The targets of docs/impl.md as ratios within this run, each line naming
/// its reference (a probe at probe_isa()'s width, or another kernel run).
void bench_targets(int threads, int reps, bool quick, const peaks& pk, double decode_f32_gbs, double decode_f32_tps,
                   double decode_bf16_tps, double dense_gflops, double causal_gflops) {
  const char* pisa = probe_isa();
  const std::int64_t l = quick ? 256 : 2048, swa_l = quick ? 1024 : 8192, swa_w = quick ? 128 : 1024;
  std::printf("targets (%d threads; ratios within this run; probes at %s; kernel isa %s; docs/impl.md):\n", threads, pisa,
              isa_name(resolve_isa(bench_isa)));
  char what[96];
  const auto not_measured = [](const char* name, const char* why) { std::printf("target: %s: not measured (%s)\n", name, why); };
  if (decode_f32_gbs > 0 && pk.bw_all > 0) {
    std::snprintf(what, sizeof what, "%.1f GB/s of the %s read probe %.1f", decode_f32_gbs, pisa, pk.bw_all);
    target_line("f32 decode Lk=32768 vs read probe", what, decode_f32_gbs / pk.bw_all, 0.70, true);
  } else {
    not_measured("f32 decode Lk=32768 vs read probe", "its row was filtered out");
  }
  if (decode_f32_tps > 0 && decode_bf16_tps > 0) {
    std::snprintf(what, sizeof what, "%.0f vs %.0f tok/s", decode_bf16_tps, decode_f32_tps);
    target_line("bf16/f32 decode Lk=32768 tokens/s", what, decode_bf16_tps / decode_f32_tps, 1.6, false);
  } else {
    not_measured("bf16/f32 decode Lk=32768 tokens/s", "its rows were filtered out");
  }
  {
    const auto [paged_tps, dense_tps] = paged_dense_decode_tps(quick ? 1024 : 32768, threads, reps);
    std::snprintf(what, sizeof what, "%.0f vs %.0f tok/s (block table, P=16)", paged_tps, dense_tps);
    target_line("paged/dense f32 decode Lk=32768 tokens/s", what, paged_tps / dense_tps, 0.90, true);
  }
  const char* no_fma = pk.fma_all > 0 ? "its row was filtered out" : "no FMA probe on this CPU";
  if (pk.fma_all > 0 && dense_gflops > 0) {
    std::snprintf(what, sizeof what, "%.1f of the %s FMA probe %.1f GFLOP/s", dense_gflops, pisa, pk.fma_all);
    target_line("dense prefill B=1 H=16 L=2048 D=128 vs FMA probe", what, dense_gflops / pk.fma_all, 0.80, true);
  } else {
    not_measured("dense prefill B=1 H=16 L=2048 D=128 vs FMA probe", no_fma);
  }
  if (pk.fma_all > 0 && causal_gflops > 0) {
    std::snprintf(what, sizeof what, "%.1f of the %s FMA probe %.1f GFLOP/s", causal_gflops, pisa, pk.fma_all);
    target_line("causal prefill B=1 H=16 L=2048 D=128 (visible FLOPs)", what, causal_gflops / pk.fma_all, 0.75, true);
  } else {
    not_measured("causal prefill B=1 H=16 L=2048 D=128 (visible FLOPs)", no_fma);
  }
  // Sliding window against dense causal at the same L (both visible FLOPs).
  variants swa;
  swa.window_left = swa_w - 1;
  swa.window_right = 0;
  const auto [causal_long, window] = prefill_pair_gflops(16, swa_l, true, {}, bench_isa, swa, bench_isa, threads, reps);
  std::snprintf(what, sizeof what, "%.1f vs dense causal %.1f GFLOP/s", window, causal_long);
  target_line("SWA prefill H=16 L=8192 W=1024 vs dense causal (visible)", what, window / causal_long, 0.85, true);
  // Score variants as a share of plain on the dense prefill's shape, each
  // against its own alternating plain reps.
  std::vector<float> slopes(16), sinks(16), bias(static_cast<std::size_t>(l * l));
  for (std::size_t x = 0; x < slopes.size(); ++x)
    slopes[x] = sinks[x] = static_cast<float>(std::exp2(-8.0 * static_cast<double>(x + 1) / 16.0));
  for (std::size_t x = 0; x < bias.size(); ++x) bias[x] = static_cast<float>(x % 7) * 0.125f - 0.375f;
  struct share {
    const char* name;
    variants var;
    double target;
  };
  variants softcap, alibi, sink, fbias;
  softcap.softcap = 30.0f;
  alibi.alibi = slopes.data();
  sink.sinks = sinks.data();
  fbias.bias = {bias.data(), dtype::f32, {0, 0, l, 1}};  // one L x L bias for every batch and head
  for (const share& sh : {share{"softcap=30 share of plain prefill B=1 H=16 L=2048 D=128", softcap, 0.85},
                          share{"ALiBi share of plain prefill B=1 H=16 L=2048 D=128", alibi, 0.90},
                          share{"sinks share of plain prefill B=1 H=16 L=2048 D=128", sink, 0.98},
                          share{"f32 bias (L x L) share of plain prefill B=1 H=16 L=2048 D=128", fbias, 0.75}}) {
    const auto [plain, g] = prefill_pair_gflops(16, l, false, {}, bench_isa, sh.var, bench_isa, threads, reps);
    std::snprintf(what, sizeof what, "%.1f vs plain %.1f GFLOP/s", g, plain);
    target_line(sh.name, what, g / plain, sh.target, true);
  }
  // The two vector builds on the same shape, back to back.
  if (isa_supported(isa::avx512)) {
    const auto [g2, g5] = prefill_pair_gflops(16, l, false, {}, isa::avx2, {}, isa::avx512, threads, reps);
    std::snprintf(what, sizeof what, "%.1f vs %.1f GFLOP/s", g5, g2);
    target_line("AVX-512 vs AVX2 prefill B=1 H=16 L=2048 D=128", what, g5 / g2, 1.6, false);
  } else {
    not_measured("AVX-512 vs AVX2 prefill B=1 H=16 L=2048 D=128", "this CPU has no AVX-512 F+BW+VL");
  }
}

long peak_rss_kib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/// Runs first, while the process is small: peak RSS minus the inputs and
/// output is the kernel's own memory (tiles x threads, no Lq x Lk scores).
void bench_memory(int threads, std::int64_t l) {
  const std::int64_t h = 8, d = 128;
  const long before = peak_rss_kib();
  const std::size_t n = static_cast<std::size_t>(l * h * d);
  std::vector<float> q(n, 0.01f), k(n, 0.02f), v(n, 0.03f), o(n, 0.0f);
  attention_args a = prefill_args(h, l, q.data(), k.data(), v.data(), o.data());
  a.causal = true;  // half the FLOPs of non-causal: same memory behaviour, half the wait
  const auto t0 = std::chrono::steady_clock::now();
  (void)attention(a, {.threads = threads, .simd = bench_isa});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double io_mib = 4.0 * static_cast<double>(n) * 4 / (1 << 20);
  const double peak_mib = static_cast<double>(peak_rss_kib()) / 1024;
  const double scores_mib = static_cast<double>(h) * static_cast<double>(l) * static_cast<double>(l) * 4 / (1 << 20);
  std::printf("memory: causal prefill B=1 H=8 L=%lld D=128 f32, %d threads, %.1f s\n", static_cast<long long>(l), threads, secs);
  std::printf(
      "  peak RSS %.1f MiB (%.1f MiB before); Q+K+V+O %.1f MiB; kernel extra %.1f MiB; "
      "a materialized score matrix would be %.0f MiB\n",
      peak_mib, static_cast<double>(before) / 1024, io_mib, peak_mib - static_cast<double>(before) / 1024 - io_mib, scores_mib);
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

int run(int argc, char** argv) {
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
  std::printf(
      "attnimpl bench: %d threads, best of %d, kernel isa %s (config defaults: k_tile %lld, split_keys %lld, "
      "exp %.2f ulps)\n",
      threads, reps, isa_name(resolve_isa(bench_isa)), static_cast<long long>(resolve({}).k_tile),
      static_cast<long long>(resolve({}).split_keys), exp_ulps());
  if (rss && !quick) bench_memory(threads, 16384);
  // The bandwidth probe's spread says how much the shared machine moved
  // during the run: a decode %bw is only as good as it.
  const int probe_reps = quick ? 2 : 5;
  const auto bw1 = read_bandwidth_samples(1, probe_reps), bw_all = read_bandwidth_samples(threads, probe_reps);
  peaks pk{fma_peak_gflops(1), fma_peak_gflops(threads), *std::max_element(bw1.begin(), bw1.end()),
           *std::max_element(bw_all.begin(), bw_all.end())};
  if (pk.fma1 > 0)
    std::printf("probe: f32 FMA peak %.1f GFLOP/s (1 thread), %.1f GFLOP/s (%d threads), %s\n", pk.fma1, pk.fma_all, threads,
                probe_isa());
  else
    std::printf("probe: f32 FMA peak not measured (the CPU has no AVX2+FMA); %%peak shows -\n");
  std::printf("probe: memory read bandwidth, 256 MiB: 1 thread %s; %d threads %s; %s loads\n", spread(bw1).c_str(), threads,
              spread(bw_all).c_str(), probe_isa());
  // What the decode rows' page walk gets from memory with nothing computed:
  // 8 KiB runs (one KV head's K or V of a 16-token f32 page), descending.
  const auto runs_hw = read_runs_bandwidth_samples(threads, probe_reps, 8192, false);
  const auto runs_sw = read_runs_bandwidth_samples(threads, probe_reps, 8192, true);
  if (isa_supported(isa::avx2))
    std::printf(
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
  std::printf("%s\n", quick ? "(quick: L, Lk and B scaled down, names keep the full sizes)" : "");
  std::printf("%-46s %3s %10s %9s %7s %8s %7s %9s %10s %8s %9s\n", "case", "thr", "time_ms", "GFLOP/s", "%peak", "GB/s", "%bw",
              "tok/s", "naive_ms", "speedup", "cpu/wall");
  // The all-threads figures the targets below are ratios of.
  double decode_f32_gbs = 0, decode_f32_tps = 0, decode_bf16_tps = 0, dense_gflops = 0, causal_gflops = 0;
  for (const bench_case& c : cases) {
    if (!filter.empty() && std::string(c.name).find(filter) == std::string::npos) continue;
    std::vector<int> counts = {threads};
    if (threads > 1 && &c == &cases[0]) counts.insert(counts.begin(), 1);
    for (int t : counts) {
      const timing kt = c.decode ? bench_decode(c, t, reps, pk) : bench_prefill(c, t, reps, pk);
      if (t != threads || kt.wall <= 0 || kt.wall >= 1e300) continue;
      const double flops = 4.0 * static_cast<double>(c.b * c.hq) * visible_pairs(c) * static_cast<double>(c.d);
      if (&c == &cases[0]) dense_gflops = flops / kt.wall / 1e9;
      if (&c == &cases[1]) causal_gflops = flops / kt.wall / 1e9;
      if (&c == &cases[7]) {
        decode_f32_gbs = static_cast<double>(c.b * c.lk * c.hkv * 2 * c.d) * 4 / kt.wall / 1e9;
        decode_f32_tps = static_cast<double>(c.b * c.lq) / kt.wall;
      }
      if (&c == &cases[8]) decode_bf16_tps = static_cast<double>(c.b * c.lq) / kt.wall;
    }
  }
  std::printf(
      "FLOPs count 4*B*Hq*D per visible (query, key) pair (causal: the visible half). "
      "Decode GB/s: K and V bytes of the cache per step; %%bw: of the best probe rep; tok/s: B tokens "
      "per step. naive: materialized scores, Eigen GEMM, softmax, GEMM, f32, same threads. "
      "cpu/wall < threads means the machine was shared.\n");
  // The backward pass (impl/src/backward), on the dense and causal prefill's shape.
  for (const auto& [name, causal] : {std::pair{"B=1 H=16 L=2048 D=128", false}, std::pair{"causal B=1 H=16 L=2048 D=128", true}})
    if (filter.empty() || (std::string("backward ") + name).find(filter) != std::string::npos)
      bench_backward(name, 16, l, causal, threads, reps, pk);
  std::printf(
      "backward FLOPs: 2.5 x the forward's 4*B*Hq*D per visible (query, key) pair (10*D a pair: the score "
      "recompute, dP, dQ, dK, dV); handed the forward's own O and LSE; %%: of the FMA probe at all threads.\n");
  if (filter.empty() || std::string("targets").find(filter) != std::string::npos)
    bench_targets(threads, reps, quick, pk, decode_f32_gbs, decode_f32_tps, decode_bf16_tps, dense_gflops, causal_gflops);
  return 0;
}

}  // namespace attnimpl::bench
