// A multi-head attention layer on the kernel: Q/K/V/O projections (Eigen
// GEMM, optional biases) around attention(). One class covers the seed
// tutorials' modules: single-head self-attention (hq = hkv = 1), MHA
// (hkv = hq), MQA (hkv = 1), GQA, a cached decoder (forward_cached), and
// cross-attention whose query, key and value sources have their own widths
// (dim_q, dim_k, dim_v) and an output width of its own (d_out).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "attnimpl/attention.hpp"
#include "attnimpl/kv_cache.hpp"

namespace attnimpl {

struct layer_dims {
  std::int64_t dim_q = 1, dim_k = 1, dim_v = 1;  ///< widths of the query, key and value sources
  std::int64_t hq = 1, hkv = 1, d = 1, dv = 1;   ///< heads and head sizes
  std::int64_t d_out = 1;                        ///< output width
};

/// Row-major f32 weights, y = x W + bias (x a row): wq (dim_q x hq*d),
/// wk (dim_k x hkv*d), wv (dim_v x hkv*dv), wo (hq*dv x d_out). Empty bias: none.
struct layer_weights {
  std::vector<float> wq, wk, wv, wo;
  std::vector<float> bq, bk, bv, bo;
};

class attention_layer {
 public:
  /// Checks every size (hq % hkv, weight and bias lengths).
  static status create(const layer_dims& dims, layer_weights weights, std::optional<attention_layer>& out);

  const layer_dims& dims() const { return dims_; }

  /// out = x w + bias for `rows` dense rows: the projection every path uses.
  /// which: 0 q, 1 k, 2 v, 3 o. Q/K/V are computed one head (column block) at
  /// a time, so a head's bits do not depend on the layer's head counts.
  void project(int which, const float* x, std::int64_t rows, float* out) const;

  /// Attention over dense row-major sources: xq (b, lq, dim_q), xk (b, lk, dim_k),
  /// xv (b, lk, dim_v); out (b, lq, d_out). attn_out, when given, receives the
  /// attention output before the O projection, (b, lq, hq, dv). Self-attention
  /// passes the same x as all three sources.
  status forward(std::int64_t b, std::int64_t lq, std::int64_t lk, const float* xq, const float* xk, const float* xv, bool causal,
                 float* out, const config& cfg = {}, float* attn_out = nullptr) const;

  /// Decode step: projects lq new tokens of every sequence of the cache,
  /// appends their K/V, attends with their queries (bottom-right causal) and
  /// projects the result. The cache must match hkv, d and dv.
  status forward_cached(paged_kv_cache& cache, std::int64_t lq, const float* xq, const float* xk, const float* xv, float* out,
                        const config& cfg = {}, float* attn_out = nullptr) const;

 private:
  attention_layer() = default;
  layer_dims dims_;
  layer_weights w_;
};

}  // namespace attnimpl
