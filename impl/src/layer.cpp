// The attention layer: projections with Eigen GEMM around the kernel.
#include "attnimpl/layer.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <string>

#include "convert.hpp"

namespace attnimpl {
namespace {

using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using cmap = Eigen::Map<const matrix>;

}  // namespace

status attention_layer::create(const layer_dims& d, layer_weights w, std::optional<attention_layer>& out) {
  const std::int64_t cap = std::int64_t{1} << 24;
  for (std::int64_t x : {d.dim_q, d.dim_k, d.dim_v, d.hq, d.hkv, d.d, d.dv, d.d_out})
    if (x < 1 || x > cap) return status::invalid("layer sizes must be in [1, 2^24]");
  if (d.hq % d.hkv != 0)
    return status::invalid("hq (" + std::to_string(d.hq) + ") must be a multiple of hkv (" + std::to_string(d.hkv) + ")");
  const auto need = [](const std::vector<float>& v, std::int64_t n) { return static_cast<std::int64_t>(v.size()) == n; };
  const auto bias_ok = [](const std::vector<float>& v, std::int64_t n) {
    return v.empty() || static_cast<std::int64_t>(v.size()) == n;
  };
  if (!need(w.wq, d.dim_q * d.hq * d.d) || !need(w.wk, d.dim_k * d.hkv * d.d) || !need(w.wv, d.dim_v * d.hkv * d.dv) ||
      !need(w.wo, d.hq * d.dv * d.d_out))
    return status::invalid("weight sizes must be dim_q*hq*d, dim_k*hkv*d, dim_v*hkv*dv and hq*dv*d_out");
  if (!bias_ok(w.bq, d.hq * d.d) || !bias_ok(w.bk, d.hkv * d.d) || !bias_ok(w.bv, d.hkv * d.dv) || !bias_ok(w.bo, d.d_out))
    return status::invalid("bias sizes must be hq*d, hkv*d, hkv*dv and d_out (or empty)");
  attention_layer l;
  l.dims_ = d;
  l.w_ = std::move(w);
  out = std::move(l);
  return status::success();
}

void attention_layer::project(int which, const float* x, std::int64_t rows, float* out) const {
  const std::vector<float>* w = &w_.wq;
  const std::vector<float>* bias = &w_.bq;
  std::int64_t in = dims_.dim_q, width = dims_.hq * dims_.d;
  switch (which) {
    case 1: w = &w_.wk, bias = &w_.bk, in = dims_.dim_k, width = dims_.hkv * dims_.d; break;
    case 2: w = &w_.wv, bias = &w_.bv, in = dims_.dim_v, width = dims_.hkv * dims_.dv; break;
    case 3: w = &w_.wo, bias = &w_.bo, in = dims_.hq * dims_.dv, width = dims_.d_out; break;
    default: break;
  }
  // One GEMM per head (column block of the head size): a head's projection
  // then never depends on how many heads share the matrix, so GQA/MQA layers
  // equal, bit for bit, MHA layers whose K/V weights repeat each KV head.
  const std::int64_t block = which == 0 || which == 1 ? dims_.d : which == 2 ? dims_.dv : width;
  using strided = Eigen::Map<matrix, 0, Eigen::OuterStride<>>;
  using cstrided = Eigen::Map<const matrix, 0, Eigen::OuterStride<>>;
  const cmap xs(x, rows, in);
  for (std::int64_t c = 0; c < width; c += block) {
    strided y(out + c, rows, block, Eigen::OuterStride<>(width));
    y.noalias() = xs * cstrided(w->data() + c, in, block, Eigen::OuterStride<>(width));
    if (!bias->empty()) y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias->data() + c, block);
  }
}

status attention_layer::forward(std::int64_t b, std::int64_t lq, std::int64_t lk, const float* xq, const float* xk,
                                const float* xv, bool causal, float* out, const config& cfg, float* attn_out) const {
  if (b < 1 || lq < 0 || lk < 0) return status::invalid("b must be >= 1, lq and lk >= 0");
  if (!xq || !out || (lk > 0 && (!xk || !xv))) return status::invalid("inputs and output must not be null");
  const layer_dims& d = dims_;
  std::vector<float> q(static_cast<std::size_t>(b * lq * d.hq * d.d)), k(static_cast<std::size_t>(b * lk * d.hkv * d.d)),
      v(static_cast<std::size_t>(b * lk * d.hkv * d.dv)), o(static_cast<std::size_t>(b * lq * d.hq * d.dv));
  project(0, xq, b * lq, q.data());
  if (lk > 0) {
    project(1, xk, b * lk, k.data());
    project(2, xv, b * lk, v.data());
  }
  attention_args a;
  a.dims = {b, d.hq, d.hkv, lq, lk, d.d, d.dv};
  a.q = {q.data(), dtype::f32, {lq * d.hq * d.d, d.hq * d.d, d.d, 1}};
  a.k = {k.data(), dtype::f32, {lk * d.hkv * d.d, d.hkv * d.d, d.d, 1}};
  a.v = {v.data(), dtype::f32, {lk * d.hkv * d.dv, d.hkv * d.dv, d.dv, 1}};
  a.o = {o.data(), dtype::f32, {lq * d.hq * d.dv, d.hq * d.dv, d.dv, 1}};
  a.causal = causal;
  if (status st = attention(a, cfg); !st.ok()) return st;
  project(3, o.data(), b * lq, out);
  if (attn_out) std::copy(o.begin(), o.end(), attn_out);
  return status::success();
}

status attention_layer::forward_cached(paged_kv_cache& cache, std::int64_t lq, const float* xq, const float* xk, const float* xv,
                                       float* out, const config& cfg, float* attn_out) const {
  const layer_dims& d = dims_;
  const kv_cache_config& cc = cache.config_used();
  if (cc.hkv != d.hkv || cc.d != d.d || cc.dv != d.dv) return status::invalid("cache hkv, d, dv must match the layer");
  if (lq < 0) return status::invalid("lq must be >= 0");
  if (lq == 0) return status::success();
  if (!xq || !xk || !xv || !out) return status::invalid("inputs and output must not be null");
  const std::int64_t b = cc.batch;
  std::vector<float> q(static_cast<std::size_t>(b * lq * d.hq * d.d)), k(static_cast<std::size_t>(b * lq * d.hkv * d.d)),
      v(static_cast<std::size_t>(b * lq * d.hkv * d.dv)), o(static_cast<std::size_t>(b * lq * d.hq * d.dv));
  project(0, xq, b * lq, q.data());
  project(1, xk, b * lq, k.data());
  project(2, xv, b * lq, v.data());
  // The cache stores its own dtype: round the projected K/V once into it.
  const std::int64_t es = convert::size_of(cc.type);
  std::vector<unsigned char> k_store(k.size() * static_cast<std::size_t>(es)), v_store(v.size() * static_cast<std::size_t>(es));
  convert::store_row(k_store.data(), cc.type, 1, k.data(), static_cast<std::int64_t>(k.size()));
  convert::store_row(v_store.data(), cc.type, 1, v.data(), static_cast<std::int64_t>(v.size()));
  for (std::int64_t s = 0; s < b; ++s)
    if (cache.length(s) + lq > cc.max_pages_per_seq * cc.page_size)
      return status::invalid("sequence " + std::to_string(s) + " would exceed the cache");
  for (std::int64_t s = 0; s < b; ++s) {
    kv_tokens t{k_store.data() + s * lq * d.hkv * d.d * es,
                {d.hkv * d.d, d.d, 1},
                v_store.data() + s * lq * d.hkv * d.dv * es,
                {d.hkv * d.dv, d.dv, 1}};
    if (status st = cache.append(s, lq, t); !st.ok()) return st;
  }
  cache_attention_args a;
  a.hq = d.hq;
  a.lq = lq;
  a.q = {q.data(), dtype::f32, {lq * d.hq * d.d, d.hq * d.d, d.d, 1}};
  a.o = {o.data(), dtype::f32, {lq * d.hq * d.dv, d.hq * d.dv, d.dv, 1}};
  if (status st = cache.attend(a, cfg); !st.ok()) return st;
  project(3, o.data(), b * lq, out);
  if (attn_out) std::copy(o.begin(), o.end(), attn_out);
  return status::success();
}

}  // namespace attnimpl
