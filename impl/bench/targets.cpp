// The targets of docs/impl.md as ratios within one run: decode against the
// read probe, prefill against the FMA probe, and kernels against each other.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "../tools/visible_pairs.hpp"
#include "attnimpl/paged.hpp"
#include "bench_internal.hpp"
#include "probes.hpp"

namespace attnimpl::bench::detail {

namespace {

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
  return {per_pair * tools::visible_pairs(l, causal, var_a) / best_a, per_pair * tools::visible_pairs(l, causal, var_b) / best_b};
}

// "target: name what value (target >= T) met" (value and target as ratios), printed and kept.
void target_line(result& r, const char* name, const char* what, double value, double target, bool percent) {
  if (percent)
    emit(r, "target: %-58s %-44s %6.1f%% (target >= %.0f%%) %s\n", name, what, 100.0 * value, 100.0 * target,
         value >= target ? "met" : "NOT met");
  else
    emit(r, "target: %-58s %-44s %6.2fx (target >= %.1fx) %s\n", name, what, value, target, value >= target ? "met" : "NOT met");
  std::fflush(stdout);
  target_row t;
  t.name = name, t.what = what, t.value = value, t.target = target, t.percent = percent;
  r.targets.push_back(std::move(t));
}

// A target this run could not measure, and why.
void not_measured(result& r, const char* name, const char* why) {
  emit(r, "target: %s: not measured (%s)\n", name, why);
  target_row t;
  t.name = name, t.measured = false, t.why_not = why;
  r.targets.push_back(std::move(t));
}

}  // namespace

/// The targets of docs/impl.md as ratios within this run, each line naming
/// its reference (a probe at probe_isa()'s width, or another kernel run).
void bench_targets(result& r, int threads, int reps, bool quick, const target_inputs& in) {
  const probe_peaks& pk = r.peaks;
  const auto [decode_f32_gbs, decode_f32_tps, decode_bf16_tps, dense_gflops, causal_gflops] = in;
  const char* pisa = probe_isa();
  const std::int64_t l = quick ? 256 : 2048, swa_l = quick ? 1024 : 8192, swa_w = quick ? 128 : 1024;
  emit(r, "targets (%d threads; ratios within this run; probes at %s; kernel isa %s; docs/impl.md):\n", threads, pisa,
       isa_name(resolve_isa(bench_isa)));
  char what[96];
  if (decode_f32_gbs > 0 && pk.bw_all > 0) {
    std::snprintf(what, sizeof what, "%.1f GB/s of the %s read probe %.1f", decode_f32_gbs, pisa, pk.bw_all);
    target_line(r, "f32 decode Lk=32768 vs read probe", what, decode_f32_gbs / pk.bw_all, 0.70, true);
  } else {
    not_measured(r, "f32 decode Lk=32768 vs read probe", "its row was filtered out");
  }
  if (decode_f32_tps > 0 && decode_bf16_tps > 0) {
    std::snprintf(what, sizeof what, "%.0f vs %.0f tok/s", decode_bf16_tps, decode_f32_tps);
    target_line(r, "bf16/f32 decode Lk=32768 tokens/s", what, decode_bf16_tps / decode_f32_tps, 1.6, false);
  } else {
    not_measured(r, "bf16/f32 decode Lk=32768 tokens/s", "its rows were filtered out");
  }
  {
    const auto [paged_tps, dense_tps] = paged_dense_decode_tps(quick ? 1024 : 32768, threads, reps);
    std::snprintf(what, sizeof what, "%.0f vs %.0f tok/s (block table, P=16)", paged_tps, dense_tps);
    target_line(r, "paged/dense f32 decode Lk=32768 tokens/s", what, paged_tps / dense_tps, 0.90, true);
  }
  const char* no_fma = pk.fma_all > 0 ? "its row was filtered out" : "no FMA probe on this CPU";
  if (pk.fma_all > 0 && dense_gflops > 0) {
    std::snprintf(what, sizeof what, "%.1f of the %s FMA probe %.1f GFLOP/s", dense_gflops, pisa, pk.fma_all);
    target_line(r, "dense prefill B=1 H=16 L=2048 D=128 vs FMA probe", what, dense_gflops / pk.fma_all, 0.80, true);
  } else {
    not_measured(r, "dense prefill B=1 H=16 L=2048 D=128 vs FMA probe", no_fma);
  }
  if (pk.fma_all > 0 && causal_gflops > 0) {
    std::snprintf(what, sizeof what, "%.1f of the %s FMA probe %.1f GFLOP/s", causal_gflops, pisa, pk.fma_all);
    target_line(r, "causal prefill B=1 H=16 L=2048 D=128 (visible FLOPs)", what, causal_gflops / pk.fma_all, 0.75, true);
  } else {
    not_measured(r, "causal prefill B=1 H=16 L=2048 D=128 (visible FLOPs)", no_fma);
  }
  // Sliding window against dense causal at the same L (both visible FLOPs).
  variants swa;
  swa.window_left = swa_w - 1;
  swa.window_right = 0;
  const auto [causal_long, window] = prefill_pair_gflops(16, swa_l, true, {}, bench_isa, swa, bench_isa, threads, reps);
  std::snprintf(what, sizeof what, "%.1f vs dense causal %.1f GFLOP/s", window, causal_long);
  target_line(r, "SWA prefill H=16 L=8192 W=1024 vs dense causal (visible)", what, window / causal_long, 0.85, true);
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
    target_line(r, sh.name, what, g / plain, sh.target, true);
  }
  // The two vector builds on the same shape, back to back.
  if (isa_supported(isa::avx512)) {
    const auto [g2, g5] = prefill_pair_gflops(16, l, false, {}, isa::avx2, {}, isa::avx512, threads, reps);
    std::snprintf(what, sizeof what, "%.1f vs %.1f GFLOP/s", g5, g2);
    target_line(r, "AVX-512 vs AVX2 prefill B=1 H=16 L=2048 D=128", what, g5 / g2, 1.6, false);
  } else {
    not_measured(r, "AVX-512 vs AVX2 prefill B=1 H=16 L=2048 D=128", "this CPU has no AVX-512 F+BW+VL");
  }
}

}  // namespace attnimpl::bench::detail
