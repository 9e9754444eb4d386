// attnimpl_prefill: times a prefill of the bench's shape (B = 1, H = 16,
// D = 128, f32, dense (b, s, h, d) layout) and prints GFLOP/s by wall and by
// process-CPU time, so that a profile (perf record) sees the kernel alone.
// Usage: attnimpl_prefill THREADS L [causal [REPS [Q_TILE [K_TILE]]]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cpu_time.hpp"
#include "attnimpl/attention.hpp"

int main(int argc, char** argv) {
  using attnimpl::dtype;
  using attnimpl::tools::cpu_seconds;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s THREADS L [causal [REPS [Q_TILE [K_TILE]]]]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  const std::int64_t l = std::atol(argv[2]), h = 16, d = 128;
  const bool causal = argc > 3 && std::strcmp(argv[3], "causal") == 0;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 5;
  const std::int64_t q_tile = argc > 5 ? std::atol(argv[5]) : 0, k_tile = argc > 6 ? std::atol(argv[6]) : 0;
  if (threads < 0 || threads > 1024 || l < 1 || l > 65536 || reps < 1 || reps > 1000) {
    std::fprintf(stderr, "THREADS must be in [0, 1024], L in [1, 65536], REPS in [1, 1000]\n");
    return 2;
  }
  // The bench's inputs: xorshift values in [-0.5, 0.5), salts 1, 2, 3 for Q, K, V.
  std::vector<float> q(static_cast<std::size_t>(l * h * d)), k(q.size()), v(q.size()), o(q.size());
  std::uint32_t salt = 1;
  for (auto* t : {&q, &k, &v}) {
    std::uint32_t x = 2463534242u ^ salt++;
    for (float& e : *t) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      e = static_cast<float>(x >> 8) * 0x1p-24f - 0.5f;
    }
  }
  attnimpl::attention_args a;
  a.dims = {1, h, h, l, l, d, d};
  a.q = {q.data(), dtype::f32, {l * h * d, h * d, d, 1}};
  a.k = {k.data(), dtype::f32, {l * h * d, h * d, d, 1}};
  a.v = {v.data(), dtype::f32, {l * h * d, h * d, d, 1}};
  a.o = {o.data(), dtype::f32, {l * h * d, h * d, d, 1}};
  a.causal = causal;
  double wall = 1e300, cpu = 1e300;
  for (int i = 0; i < reps; ++i) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    const attnimpl::status s = attnimpl::attention(a, {.threads = threads, .q_tile = q_tile, .k_tile = k_tile});
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message.c_str());
      return 1;
    }
    wall = std::min(wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpu = std::min(cpu, cpu_seconds() - c0);
  }
  // 4 * H * D FLOPs per visible (query, key) pair, as the bench counts them.
  const double pairs =
      causal ? static_cast<double>(l) * static_cast<double>(l + 1) / 2 : static_cast<double>(l) * static_cast<double>(l);
  const double flops = 4.0 * static_cast<double>(h * d) * pairs;
  std::printf("prefill%s threads=%d L=%lld: best wall %.2f ms (%.1f GFLOP/s), best CPU %.2f ms (%.1f GFLOP/s per CPU-second)\n",
              causal ? " causal" : "", threads, static_cast<long long>(l), wall * 1e3, flops / wall / 1e9, cpu * 1e3,
              flops / cpu / 1e9);
  return 0;
}
