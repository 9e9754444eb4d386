// attnimpl_prefill: times a prefill of the bench's shape (B = 1, H = 16,
// D = 128, f32, dense (b, s, h, d) layout) and prints GFLOP/s by wall and by
// process-CPU time, so that a profile (perf record) sees the kernel alone.
// Usage: attnimpl_prefill THREADS L [causal [REPS [Q_TILE [K_TILE [VARIANT]]]]]
// VARIANT (contract 1.1): window=W (left W - 1, right 0), chunk=C,
// softcap=C, alibi, sinks, bias (f32, one (L, L) tensor broadcast over
// heads). With a variant the plain call (same causal) and the variant call
// alternate rep by rep and the line gives both, counting visible FLOPs, and
// their ratio: one run, the same load on both.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cpu_time.hpp"
#include "visible_pairs.hpp"
#include "attnimpl/attention.hpp"

int main(int argc, char** argv) {
  using attnimpl::dtype;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s THREADS L [causal [REPS [Q_TILE [K_TILE [VARIANT]]]]]\n", argv[0]);
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
  const std::string variant = argc > 7 ? argv[7] : "";
  attnimpl::variants var;
  std::vector<float> per_head(static_cast<std::size_t>(h)), bias;
  const auto number = [&](const char* prefix) { return std::atol(variant.c_str() + std::strlen(prefix)); };
  if (variant.rfind("window=", 0) == 0) {
    var.window_left = number("window=") - 1;
    var.window_right = 0;
  } else if (variant.rfind("chunk=", 0) == 0) {
    var.chunk = number("chunk=");
  } else if (variant.rfind("softcap=", 0) == 0) {
    var.softcap = static_cast<float>(number("softcap="));
  } else if (variant == "alibi" || variant == "sinks") {
    for (std::int64_t x = 0; x < h; ++x)
      per_head[static_cast<std::size_t>(x)] =
          static_cast<float>(std::exp2(-8.0 * static_cast<double>(x + 1) / static_cast<double>(h)));
    (variant == "alibi" ? var.alibi : var.sinks) = per_head.data();
  } else if (variant == "bias") {
    bias.resize(static_cast<std::size_t>(l * l));
    for (std::size_t x = 0; x < bias.size(); ++x) bias[x] = static_cast<float>(x % 7) * 0.125f - 0.375f;
    var.bias = {bias.data(), dtype::f32, {0, 0, l, 1}};
  } else if (!variant.empty()) {
    std::fprintf(stderr, "VARIANT must be window=W, chunk=C, softcap=C, alibi, sinks or bias\n");
    return 2;
  }
  const double pairs = attnimpl::tools::visible_pairs(l, causal, var),
               plain_pairs = attnimpl::tools::visible_pairs(l, causal, {});
  attnimpl::config cfg{.threads = threads, .q_tile = q_tile, .k_tile = k_tile};
  // The instruction set as the suite's builtin subject takes it (auto by default).
  if (const char* name = std::getenv("ATTNIMPL_ISA")) {
    const auto which = attnimpl::parse_isa(name);
    if (!which || !attnimpl::isa_supported(*which)) {
      std::fprintf(stderr, "ATTNIMPL_ISA must be auto, avx512, avx2 or portable, one this CPU runs (got '%s')\n", name);
      return 2;
    }
    cfg.simd = *which;
  }
  attnimpl::tools::best_times best, plain_best;
  const attnimpl::attention_args plain = a;
  a.var = var;
  for (int i = 0; i < reps; ++i) {
    if (!variant.empty() && !plain_best.time([&] { return attnimpl::attention(plain, cfg); }).ok()) return 1;
    const attnimpl::status s = best.time([&] { return attnimpl::attention(a, cfg); });
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message.c_str());
      return 1;
    }
  }
  const double wall = best.wall, cpu = best.cpu, plain_wall = plain_best.wall, plain_cpu = plain_best.cpu;
  // 4 * H * D FLOPs per visible (query, key) pair, as the bench counts them.
  const double flops = 4.0 * static_cast<double>(h * d) * pairs;
  std::printf(
      "prefill%s%s%s threads=%d L=%lld: best wall %.2f ms (%.1f GFLOP/s), best CPU %.2f ms (%.1f GFLOP/s per CPU-second)\n",
      causal ? " causal" : "", variant.empty() ? "" : " ", variant.c_str(), threads, static_cast<long long>(l), wall * 1e3,
      flops / wall / 1e9, cpu * 1e3, flops / cpu / 1e9);
  if (!variant.empty()) {
    // By CPU time too: on a shared machine the wall clock counts other work.
    const double plain_flops = 4.0 * static_cast<double>(h * d) * plain_pairs;
    std::printf(
        "  plain%s in the same run: %.1f GFLOP/s (%.1f per CPU-second); %s / plain = %.2f by wall, %.2f by CPU (visible FLOPs)\n",
        causal ? " causal" : "", plain_flops / plain_wall / 1e9, plain_flops / plain_cpu / 1e9, variant.c_str(),
        flops / wall / (plain_flops / plain_wall), flops / cpu / (plain_flops / plain_cpu));
  }
  return 0;
}
