// The naive baseline, compiled with -mavx2 -mfma (impl/CMakeLists.txt): what
// a user's plain Eigen attention built for this machine would run. The rest of
// the project is built for the baseline ISA, so this file keeps its AVX2 code
// to itself: Eigen's namespace is renamed here (its templates become this
// file's own symbols), and the threads and buffers are made by the caller,
// in naive_baseline_threads.cpp. repo.isa_symbols checks that no weak symbol
// of this object holds a VEX instruction.
#define Eigen attnimpl_bench_avx2_Eigen
#include <Eigen/Dense>
#include <cmath>
#include <limits>

#include "naive_baseline.hpp"

namespace attnimpl::bench {

void naive_heads_avx2(const naive_problem& p, std::int64_t first, std::int64_t step, float* scores) {
  using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using cmap = Eigen::Map<const mat, 0, Eigen::OuterStride<>>;
  using map = Eigen::Map<mat, 0, Eigen::OuterStride<>>;
  const std::int64_t group = p.hq / p.hkv, lq = p.lq, lk = p.lk, d = p.d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  map s(scores, lq, lk, Eigen::OuterStride<>(lk));
  for (std::int64_t bh = first; bh < p.b * p.hq; bh += step) {
    const std::int64_t bi = bh / p.hq, h = bh % p.hq, g = h / group;
    cmap qh(p.q + (bi * lq * p.hq + h) * d, lq, d, Eigen::OuterStride<>(p.hq * d));
    cmap kh(p.k + (bi * lk * p.hkv + g) * d, lk, d, Eigen::OuterStride<>(p.hkv * d));
    cmap vh(p.v + (bi * lk * p.hkv + g) * d, lk, d, Eigen::OuterStride<>(p.hkv * d));
    map oh(p.o + (bi * lq * p.hq + h) * d, lq, d, Eigen::OuterStride<>(p.hq * d));
    s.noalias() = (qh * kh.transpose()) * scale;
    for (std::int64_t i = 0; i < lq; ++i) {
      auto row = s.row(i);
      if (p.causal)
        for (std::int64_t j = lk - lq + i + 1 > 0 ? lk - lq + i + 1 : 0; j < lk; ++j)
          row(j) = -std::numeric_limits<float>::infinity();
      const float m = row.maxCoeff();
      row = (row.array() - m).exp();
      row /= row.sum();
    }
    oh.noalias() = s * vh;
  }
}

}  // namespace attnimpl::bench
