// The attention layer: its attention output is within the bound of docs/bound.md of the
// reference applied to the projected tensors (prefill, cross-attention with
// its own widths, and step-by-step decode through the paged cache); its output
// is exactly the O projection of that; and GQA/MQA equal, bit for bit, the MHA
// layer whose K/V weights repeat each KV head G times.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "attncheck/case.hpp"
#include "attncheck/oracle.hpp"
#include "attnimpl/layer.hpp"

namespace {

using attnimpl::layer_dims;
using attnimpl::layer_weights;

std::vector<float> random_vector(std::size_t n, std::mt19937_64& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

layer_weights random_weights(const layer_dims& d, std::uint64_t seed, bool biases) {
  std::mt19937_64 rng(seed);
  layer_weights w;
  w.wq = random_vector(static_cast<std::size_t>(d.dim_q * d.hq * d.d), rng, 0.3f);
  w.wk = random_vector(static_cast<std::size_t>(d.dim_k * d.hkv * d.d), rng, 0.3f);
  w.wv = random_vector(static_cast<std::size_t>(d.dim_v * d.hkv * d.dv), rng, 0.3f);
  w.wo = random_vector(static_cast<std::size_t>(d.hq * d.dv * d.d_out), rng, 0.3f);
  if (biases) {
    w.bq = random_vector(static_cast<std::size_t>(d.hq * d.d), rng, 0.1f);
    w.bk = random_vector(static_cast<std::size_t>(d.hkv * d.d), rng, 0.1f);
    w.bv = random_vector(static_cast<std::size_t>(d.hkv * d.dv), rng, 0.1f);
    w.bo = random_vector(static_cast<std::size_t>(d.d_out), rng, 0.1f);
  }
  return w;
}

attnimpl::attention_layer make_layer(const layer_dims& d, layer_weights w) {
  std::optional<attnimpl::attention_layer> l;
  const attnimpl::status st = attnimpl::attention_layer::create(d, std::move(w), l);
  EXPECT_TRUE(st.ok()) << st.message;
  return *l;
}

attncheck::tensor as_tensor(const std::vector<float>& x, attncheck::dims4 shape) {
  attncheck::tensor t = attncheck::tensor::contiguous(attncheck::dtype::f32, shape);
  for (std::size_t i = 0; i < x.size(); ++i) t.bits[i] = std::bit_cast<std::uint32_t>(x[i]);
  return t;
}

/// attn_out (b, lq, hq, dv) against the reference on projected q, k, v.
void expect_within_reference(const layer_dims& d, std::int64_t b, std::int64_t lq, std::int64_t lk, bool causal,
                             const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                             const std::vector<float>& attn_out, const attnimpl::config& cfg) {
  attncheck::attn_case c;
  c.b = b;
  c.hq = d.hq;
  c.hkv = d.hkv;
  c.lq = lq;
  c.lk = lk;
  c.d = d.d;
  c.dv = d.dv;
  c.causal = causal;
  c.q = as_tensor(q, {b, lq, d.hq, d.d});
  c.k = as_tensor(k, {b, lk, d.hkv, d.d});
  c.v = as_tensor(v, {b, lk, d.hkv, d.dv});
  attncheck::oracle_options opt;
  opt.bound.exp_ulps = attnimpl::exp_ulps();
  opt.bound.key_blocks = std::max<std::int64_t>(1, attnimpl::key_blocks(lk, cfg));
  const attncheck::oracle_result ref = attncheck::reference(c, opt);
  ASSERT_EQ(ref.o.size(), attn_out.size());
  for (std::size_t i = 0; i < attn_out.size(); ++i) {
    ASSERT_FALSE(std::isnan(attn_out[i])) << "element " << i;
    ASSERT_FALSE(std::isnan(ref.o_bound[i])) << "element " << i;
    ASSERT_LE(std::fabs(attn_out[i] - ref.o[i]), ref.o_bound[i])
        << attncheck::to_line(c) << " element " << i << " expected " << ref.o[i] << " got " << attn_out[i];
  }
}

void check_prefill(const layer_dims& d, std::int64_t b, std::int64_t lq, std::int64_t lk, bool causal, bool self,
                   std::uint64_t seed) {
  const attnimpl::attention_layer layer = make_layer(d, random_weights(d, seed, true));
  std::mt19937_64 rng(seed + 1);
  const auto xq = random_vector(static_cast<std::size_t>(b * lq * d.dim_q), rng, 1.0f);
  const auto xk = self ? xq : random_vector(static_cast<std::size_t>(b * lk * d.dim_k), rng, 1.0f);
  const auto xv = self ? xq : random_vector(static_cast<std::size_t>(b * lk * d.dim_v), rng, 1.0f);
  const attnimpl::config cfg{.threads = 2, .q_tile = 2, .k_tile = 3};
  std::vector<float> out(static_cast<std::size_t>(b * lq * d.d_out)), attn(static_cast<std::size_t>(b * lq * d.hq * d.dv));
  ASSERT_TRUE(layer.forward(b, lq, lk, xq.data(), xk.data(), xv.data(), causal, out.data(), cfg, attn.data()).ok());
  std::vector<float> q(static_cast<std::size_t>(b * lq * d.hq * d.d)), k(static_cast<std::size_t>(b * lk * d.hkv * d.d)),
      v(static_cast<std::size_t>(b * lk * d.hkv * d.dv)), projected(out.size());
  layer.project(0, xq.data(), b * lq, q.data());
  layer.project(1, xk.data(), b * lk, k.data());
  layer.project(2, xv.data(), b * lk, v.data());
  expect_within_reference(d, b, lq, lk, causal, q, k, v, attn, cfg);
  layer.project(3, attn.data(), b * lq, projected.data());
  for (std::size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(projected[i])) << i;
}

TEST(layer, single_head_self_attention_within_bound) {
  check_prefill({.dim_q = 8, .dim_k = 8, .dim_v = 8, .hq = 1, .hkv = 1, .d = 8, .dv = 8, .d_out = 8}, 2, 5, 5, true, true, 1);
}

TEST(layer, gqa_self_attention_within_bound) {
  check_prefill({.dim_q = 12, .dim_k = 12, .dim_v = 12, .hq = 6, .hkv = 2, .d = 3, .dv = 5, .d_out = 7}, 2, 7, 7, true, true, 2);
}

TEST(layer, cross_attention_with_its_own_widths_within_bound) {
  // The seed's cross-attention: query, key and value sources of different
  // widths, Lq != Lk, an output width of its own.
  check_prefill({.dim_q = 16, .dim_k = 12, .dim_v = 6, .hq = 4, .hkv = 4, .d = 4, .dv = 4, .d_out = 3}, 3, 2, 4, false, false, 3);
}

/// The MHA weights that make an hq-head MHA layer compute what the GQA layer
/// computes: each KV head's K/V columns repeated for its G query heads.
layer_weights repeated_kv(const layer_dims& gqa, const layer_weights& w) {
  const std::int64_t group = gqa.hq / gqa.hkv;
  layer_weights m = w;
  const auto repeat = [&](const std::vector<float>& src, std::int64_t rows, std::int64_t width) {
    std::vector<float> dst;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t h = 0; h < gqa.hq; ++h)
        for (std::int64_t e = 0; e < width; ++e)
          dst.push_back(src[static_cast<std::size_t>((r * gqa.hkv + h / group) * width + e)]);
    return dst;
  };
  m.wk = repeat(w.wk, gqa.dim_k, gqa.d);
  m.wv = repeat(w.wv, gqa.dim_v, gqa.dv);
  m.bk = repeat(w.bk, 1, gqa.d);
  m.bv = repeat(w.bv, 1, gqa.dv);
  return m;
}

TEST(layer, gqa_and_mqa_equal_mha_with_repeated_kv_weights_bit_for_bit) {
  for (std::int64_t hkv : {1, 2, 6}) {  // MQA, GQA, and MHA against itself
    const layer_dims g{.dim_q = 10, .dim_k = 10, .dim_v = 10, .hq = 6, .hkv = hkv, .d = 4, .dv = 3, .d_out = 5};
    layer_dims m = g;
    m.hkv = g.hq;
    const layer_weights w = random_weights(g, 40 + static_cast<std::uint64_t>(hkv), true);
    const attnimpl::attention_layer gqa = make_layer(g, w), mha = make_layer(m, repeated_kv(g, w));
    std::mt19937_64 rng(5);
    const std::int64_t b = 2, l = 6;
    const auto x = random_vector(static_cast<std::size_t>(b * l * g.dim_q), rng, 1.0f);
    std::vector<float> out_g(static_cast<std::size_t>(b * l * g.d_out)), out_m(out_g.size());
    std::vector<float> attn_g(static_cast<std::size_t>(b * l * g.hq * g.dv)), attn_m(attn_g.size());
    const attnimpl::config cfg{.threads = 2, .q_tile = 2, .k_tile = 2};
    ASSERT_TRUE(gqa.forward(b, l, l, x.data(), x.data(), x.data(), true, out_g.data(), cfg, attn_g.data()).ok());
    ASSERT_TRUE(mha.forward(b, l, l, x.data(), x.data(), x.data(), true, out_m.data(), cfg, attn_m.data()).ok());
    for (std::size_t i = 0; i < attn_g.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(attn_g[i]), std::bit_cast<std::uint32_t>(attn_m[i])) << "hkv " << hkv;
    for (std::size_t i = 0; i < out_g.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out_g[i]), std::bit_cast<std::uint32_t>(out_m[i])) << "hkv " << hkv;
  }
}

TEST(layer, step_by_step_decode_through_the_cache_within_bound) {
  const layer_dims d{.dim_q = 9, .dim_k = 9, .dim_v = 9, .hq = 4, .hkv = 2, .d = 5, .dv = 3, .d_out = 4};
  const attnimpl::attention_layer layer = make_layer(d, random_weights(d, 9, true));
  const std::int64_t b = 2, steps[] = {3, 1, 1, 2}, total = 7;
  std::optional<attnimpl::paged_kv_cache> cache;
  ASSERT_TRUE(attnimpl::paged_kv_cache::create({.batch = b, .hkv = d.hkv, .d = d.d, .dv = d.dv, .page_size = 3, .pages = 8},
                                               {7, 2, 5, 0, 1, 6, 3, 4}, cache)
                  .ok());
  std::mt19937_64 rng(10);
  // Projected tensors of all tokens, in (b, position, head, dim) order, built
  // from the same projection calls (same row counts) the layer makes.
  std::vector<float> q(static_cast<std::size_t>(b * total * d.hq * d.d)), k(static_cast<std::size_t>(b * total * d.hkv * d.d)),
      v(static_cast<std::size_t>(b * total * d.hkv * d.dv)), attn(static_cast<std::size_t>(b * total * d.hq * d.dv));
  std::int64_t done = 0;
  const attnimpl::config cfg{.threads = 3, .q_tile = 2, .k_tile = 2, .split_keys = 4};
  for (std::int64_t n : steps) {
    const auto x = random_vector(static_cast<std::size_t>(b * n * d.dim_q), rng, 1.0f);
    std::vector<float> out(static_cast<std::size_t>(b * n * d.d_out)), step_attn(static_cast<std::size_t>(b * n * d.hq * d.dv));
    ASSERT_TRUE(layer.forward_cached(*cache, n, x.data(), x.data(), x.data(), out.data(), cfg, step_attn.data()).ok());
    std::vector<float> sq(static_cast<std::size_t>(b * n * d.hq * d.d)), sk(static_cast<std::size_t>(b * n * d.hkv * d.d)),
        sv(static_cast<std::size_t>(b * n * d.hkv * d.dv));
    layer.project(0, x.data(), b * n, sq.data());
    layer.project(1, x.data(), b * n, sk.data());
    layer.project(2, x.data(), b * n, sv.data());
    const auto place = [&](std::vector<float>& all, const std::vector<float>& step, std::int64_t width) {
      for (std::int64_t s = 0; s < b; ++s)
        for (std::int64_t t = 0; t < n; ++t)
          for (std::int64_t e = 0; e < width; ++e)
            all[static_cast<std::size_t>((s * total + done + t) * width + e)] =
                step[static_cast<std::size_t>((s * n + t) * width + e)];
    };
    place(q, sq, d.hq * d.d);
    place(k, sk, d.hkv * d.d);
    place(v, sv, d.hkv * d.dv);
    place(attn, step_attn, d.hq * d.dv);
    done += n;
  }
  expect_within_reference(d, b, total, total, true, q, k, v, attn, cfg);
}

TEST(layer, bad_sizes_are_rejected) {
  std::optional<attnimpl::attention_layer> l;
  layer_dims d{.dim_q = 4, .dim_k = 4, .dim_v = 4, .hq = 3, .hkv = 2, .d = 2, .dv = 2, .d_out = 2};
  EXPECT_FALSE(attnimpl::attention_layer::create(d, {}, l).ok());
  d.hkv = 1;
  layer_weights w = random_weights(d, 1, false);
  w.wo.pop_back();
  EXPECT_FALSE(attnimpl::attention_layer::create(d, w, l).ok());
}

}  // namespace
