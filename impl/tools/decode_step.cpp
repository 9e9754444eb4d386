// attnimpl_decode_step: times one GQA decode step through the paged cache
// (Hq = 32, Hkv = 8, D = 128, page size 16, pages in reverse order, as the
// bench) and prints wall and process-CPU time of the best step. The CPU time
// separates what the kernel costs from what a shared machine took away.
// Usage: attnimpl_decode_step THREADS f32|bf16 LK [B [STEPS [PAGE]]]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "cpu_time.hpp"
#include "attnimpl/kv_cache.hpp"

int main(int argc, char** argv) {
  using attnimpl::dtype;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s THREADS f32|bf16 LK [B [STEPS [PAGE]]]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  const dtype t = std::strcmp(argv[2], "bf16") == 0 ? dtype::bf16 : dtype::f32;
  const std::int64_t lk = std::atol(argv[3]), b = argc > 4 ? std::atol(argv[4]) : 1;
  const int steps = argc > 5 ? std::atoi(argv[5]) : 20;
  const std::int64_t page = argc > 6 ? std::atol(argv[6]) : 16;
  if (threads < 0 || threads > 1024 || lk < 1 || lk > (1 << 20) || b < 1 || b > 64 || steps < 1 || steps > 1000000 || page < 1 ||
      page > 4096) {
    std::fprintf(stderr, "THREADS must be in [0, 1024], LK in [1, 2^20], B in [1, 64], STEPS in [1, 10^6], PAGE in [1, 4096]\n");
    return 2;
  }
  const std::int64_t hkv = 8, hq = 32, d = 128, pages = b * ((lk + page - 1) / page);
  std::vector<std::int32_t> order(static_cast<std::size_t>(pages));
  for (std::int64_t p = 0; p < pages; ++p) order[static_cast<std::size_t>(p)] = static_cast<std::int32_t>(pages - 1 - p);
  std::optional<attnimpl::paged_kv_cache> cache;
  if (!attnimpl::paged_kv_cache::create({.batch = b, .hkv = hkv, .d = d, .dv = d, .type = t, .page_size = page, .pages = pages},
                                        order, cache)
           .ok())
    return 1;
  const std::int64_t es = t == dtype::f32 ? 4 : 2;
  // Finite values in both dtypes (bf16 0x3b00 / 0x3c00, f32 0x3b003b00 ...: 2e-3 to 8e-3).
  std::vector<unsigned char> kv(static_cast<std::size_t>(lk * hkv * d * es));
  for (std::size_t i = 0; i < kv.size(); i += 2) {
    kv[i] = 0;
    kv[i + 1] = i % 7 == 0 ? 0x3c : 0x3b;
  }
  for (std::int64_t s = 0; s < b; ++s)
    if (!cache->append(s, lk, {kv.data(), {hkv * d, d, 1}, kv.data(), {hkv * d, d, 1}}).ok()) return 1;
  std::vector<float> q(static_cast<std::size_t>(b * hq * d), 0.01f), o(q.size());
  attnimpl::cache_attention_args a;
  a.hq = hq;
  a.lq = 1;
  a.q = {q.data(), dtype::f32, {hq * d, hq * d, d, 1}};
  a.o = {o.data(), dtype::f32, {hq * d, hq * d, d, 1}};
  attnimpl::tools::best_times best;
  for (int i = 0; i < steps; ++i)
    if (!best.time([&] { return cache->attend(a, {.threads = threads}); }).ok()) return 1;
  const double wall = best.wall, cpu = best.cpu;
  const double bytes = static_cast<double>(b * lk * hkv * 2 * d * es);
  std::printf("decode %s threads=%d B=%lld Lk=%lld: best wall %.3f ms (%.1f GB/s), best CPU %.3f ms (%.1f GB/s per CPU-second)\n",
              t == dtype::f32 ? "f32" : "bf16", threads, static_cast<long long>(b), static_cast<long long>(lk), wall * 1e3,
              bytes / wall / 1e9, cpu * 1e3, bytes / cpu / 1e9);
  return 0;
}
