// The table's cases: forward prefill and decode rows against the naive
// baseline, and the backward pass.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <utility>
#include <vector>

#include "attnimpl/backward.hpp"
#include "attnimpl/kv_cache.hpp"
#include "bench_internal.hpp"
#include "naive_baseline.hpp"
#include "probes.hpp"

namespace attnimpl::bench::detail {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
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

double visible_pairs(const bench_case& c) {
  if (!c.causal) return static_cast<double>(c.lq) * static_cast<double>(c.lk);
  double pairs = 0;
  for (std::int64_t i = 0; i < c.lq; ++i) pairs += static_cast<double>(std::min(c.lk, c.lk - c.lq + i + 1));
  return pairs;
}

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

namespace {

// The row of a case at a thread count from the kernel's and the naive
// baseline's timings (naive wall 0: not timed), printed and kept.
void record_row(result& r, const bench_case& c, int threads, const timing& k, const timing& naive) {
  const probe_peaks& pk = r.peaks;
  const double flops = 4.0 * static_cast<double>(c.b * c.hq) * visible_pairs(c) * static_cast<double>(c.d);
  const double peak = threads == 1 ? pk.fma1 : pk.fma_all;
  case_row row;
  row.name = c.name, row.decode = c.decode, row.threads = threads;
  row.ms = k.wall * 1e3, row.gflops = flops / k.wall / 1e9, row.cpu_per_wall = k.cpu / k.wall;
  if (peak > 0) row.peak_percent = 100.0 * flops / k.wall / 1e9 / peak;
  if (c.decode) {
    const double bytes = static_cast<double>(c.b * c.lk * c.hkv * 2 * c.d) * (c.kv_type == dtype::f32 ? 4 : 2);
    const double bw = threads == 1 ? pk.bw1 : pk.bw_all;
    row.gbs = bytes / k.wall / 1e9, row.bw_percent = 100.0 * bytes / k.wall / 1e9 / bw;
    row.tokens_per_s = static_cast<double>(c.b * c.lq) / k.wall;  // one decode step yields one token per sequence
  }
  if (naive.wall > 0) row.naive_ms = naive.wall * 1e3, row.speedup = naive.wall / k.wall;  // where the CPU has AVX2+FMA
  emit(r, "%-46s %3d %10.2f %9.1f", c.name, threads, row.ms, row.gflops);
  if (row.peak_percent)
    emit(r, " %6.1f%%", *row.peak_percent);
  else
    emit(r, " %7s", "-");
  if (c.decode)
    emit(r, " %8.1f %6.1f%% %9.0f", *row.gbs, *row.bw_percent, *row.tokens_per_s);
  else
    emit(r, " %8s %7s %9s", "-", "-", "-");
  if (row.naive_ms)
    emit(r, " %10.2f %7.2fx %9.2f\n", *row.naive_ms, *row.speedup, row.cpu_per_wall);
  else
    emit(r, " %10s %8s %9.2f\n", "-", "-", row.cpu_per_wall);
  std::fflush(stdout);
  r.cases.push_back(std::move(row));
}

}  // namespace

timing bench_prefill(result& r, const bench_case& c, int threads, int reps) {
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
  record_row(r, c, threads, kt, nt);
  return kt;
}

/// Decode through the paged cache (page size 16, pages in reverse order).
timing bench_decode(result& r, const bench_case& c, int threads, int reps) {
  const std::int64_t page = 16, pages = c.b * ((c.lk + page - 1) / page);
  std::vector<std::int32_t> order(static_cast<std::size_t>(pages));
  for (std::int64_t p = 0; p < pages; ++p) order[static_cast<std::size_t>(p)] = static_cast<std::int32_t>(pages - 1 - p);
  std::optional<paged_kv_cache> cache;
  const status made = paged_kv_cache::create(
      {.batch = c.b, .hkv = c.hkv, .d = c.d, .dv = c.d, .type = c.kv_type, .page_size = page, .pages = pages}, order, cache);
  if (!made.ok()) {
    emit(r, "%-44s cache: %s\n", c.name, made.message.c_str());
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
      emit(r, "%-44s append: %s\n", c.name, appended.message.c_str());
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
  record_row(r, c, threads, kt, nt);
  return kt;
}

/// One f32 backward B=1 H=h L=l D=128 (lq = lk, Hq = Hkv) at the production
/// tiles, handed the forward's own O and LSE and a dO: its time, GFLOP/s and
/// share of the FMA probe. FLOPs: the standard count, 2.5 times the
/// forward's 4*B*Hq*D per visible (query, key) pair (dP, dQ, dK and dV take
/// 2*D each and the score recompute 2*D: 10*D a pair).
void bench_backward(result& r, const char* name, std::int64_t h, std::int64_t l, bool causal, int threads, int reps) {
  const std::int64_t d = 128;
  const std::size_t n = static_cast<std::size_t>(l * h * d);
  const auto q = filled(n, 1), k = filled(n, 2), v = filled(n, 3), d_o = filled(n, 4);
  std::vector<float> o(n), lse(static_cast<std::size_t>(h * l)), dq(n), dk(n), dv(n);
  attention_args f = prefill_args(h, l, q.data(), k.data(), v.data(), o.data());
  f.lse = {lse.data(), {h * l, l, 1}};
  f.causal = causal;
  const status fwd = attention(f, {.threads = threads, .simd = bench_isa});
  if (!fwd.ok()) {
    emit(r, "backward: %s: forward: %s\n", name, fwd.message.c_str());
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
  backward_row row;
  row.name = name, row.threads = threads;
  row.ms = t.wall * 1e3, row.gflops = flops / t.wall / 1e9, row.cpu_per_wall = t.cpu / t.wall;
  const double fma = r.peaks.fma_all;
  if (fma > 0) row.peak_percent = 100.0 * row.gflops / fma;
  emit(r, "backward: %-44s %3d threads %10.2f ms %9.1f GFLOP/s", name, threads, row.ms, row.gflops);
  if (row.peak_percent)
    emit(r, ", %5.1f%% of the %s FMA probe %.1f GFLOP/s", *row.peak_percent, probe_isa(), fma);
  else
    emit(r, ", FMA probe not measured");
  emit(r, " (cpu/wall %.2f)\n", row.cpu_per_wall);
  std::fflush(stdout);
  r.backward.push_back(std::move(row));
}

}  // namespace attnimpl::bench::detail
