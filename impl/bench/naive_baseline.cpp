#include "naive_baseline.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace attnimpl::bench {

void naive_attention_f32(const float* q, const float* k, const float* v, float* o, std::int64_t b, std::int64_t hq,
                         std::int64_t hkv, std::int64_t lq, std::int64_t lk, std::int64_t d, bool causal, int threads) {
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using cmap = Eigen::Map<const mat, 0, Eigen::OuterStride<>>;
  using map = Eigen::Map<mat, 0, Eigen::OuterStride<>>;
  const std::int64_t group = hq / hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const std::int64_t heads = b * hq;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      mat s(lq, lk);
      for (std::int64_t bh = t; bh < heads; bh += threads) {
        const std::int64_t bi = bh / hq, h = bh % hq, g = h / group;
        cmap qh(q + (bi * lq * hq + h) * d, lq, d, Eigen::OuterStride<>(hq * d));
        cmap kh(k + (bi * lk * hkv + g) * d, lk, d, Eigen::OuterStride<>(hkv * d));
        cmap vh(v + (bi * lk * hkv + g) * d, lk, d, Eigen::OuterStride<>(hkv * d));
        map oh(o + (bi * lq * hq + h) * d, lq, d, Eigen::OuterStride<>(hq * d));
        s.noalias() = (qh * kh.transpose()) * scale;
        for (std::int64_t i = 0; i < lq; ++i) {
          auto row = s.row(i);
          if (causal)
            for (std::int64_t j = std::max<std::int64_t>(0, lk - lq + i + 1); j < lk; ++j)
              row(j) = -std::numeric_limits<float>::infinity();
          const float m = row.maxCoeff();
          row = (row.array() - m).exp();
          row /= row.sum();
        }
        oh.noalias() = s * vh;
      }
    });
  for (auto& th : pool) th.join();
}

}  // namespace attnimpl::bench
