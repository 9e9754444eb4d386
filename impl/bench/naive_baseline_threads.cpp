// Threads and score buffers for the naive baseline (built for the baseline
// ISA; the AVX2 arithmetic is in naive_baseline.cpp).
#include <thread>
#include <vector>

#include "attnimpl/attention.hpp"
#include "naive_baseline.hpp"

namespace attnimpl::bench {

bool naive_attention_f32(const float* q, const float* k, const float* v, float* o, std::int64_t b, std::int64_t hq,
                         std::int64_t hkv, std::int64_t lq, std::int64_t lk, std::int64_t d, bool causal, int threads) {
  if (!isa_supported(isa::avx2)) return false;
  const naive_problem p{q, k, v, o, b, hq, hkv, lq, lk, d, causal};
  std::vector<std::vector<float>> scores(static_cast<std::size_t>(threads),
                                         std::vector<float>(static_cast<std::size_t>(lq * lk)));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&p, &scores, t, threads] { naive_heads_avx2(p, t, threads, scores[static_cast<std::size_t>(t)].data()); });
  for (auto& th : pool) th.join();
  return true;
}

}  // namespace attnimpl::bench
