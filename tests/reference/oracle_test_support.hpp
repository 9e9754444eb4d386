// Helpers shared by the oracle tests: hand-built dense cases and seeded
// random small cases.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attncheck/environment.hpp"
#include "attncheck/case.hpp"

namespace attncheck::oracle_testing {

/// Returns c with dense bshd Q, K, V of c's shapes and type, all +0, for set().
inline attn_case with_zero_tensors(attn_case c) {
  c.q = tensor::contiguous(c.type, {c.b, c.lq, c.hq, c.d});
  c.k = tensor::contiguous(c.type, {c.b, c.lk, c.hkv, c.d});
  c.v = tensor::contiguous(c.type, {c.b, c.lk, c.hkv, c.dv});
  return c;
}

/// The shape of a hand-built case (attn_case's defaults: all 1).
struct case_shape {
  std::int64_t b = 1, hq = 1, hkv = 1, lq = 1, lk = 1, d = 1, dv = 1;
};

/// A case header of that shape, every other field at attn_case's default.
inline attn_case shaped_case(const case_shape& s) {
  attn_case c;
  c.b = s.b, c.hq = s.hq, c.hkv = s.hkv, c.lq = s.lq, c.lk = s.lk, c.d = s.d, c.dv = s.dv;
  return c;
}

/// The one seed every random oracle test derives its cases from:
/// ATTNCHECK_SEED when set, else a fixed default. Tests print it.
inline std::uint64_t base_seed() {
  if (const auto& s = attncheck::environment("ATTNCHECK_SEED"); !s.empty()) return std::stoull(s);
  return 20261129;
}

/// Multiply-adds of one attention call: B Hq Lq Lk (D + Dv).
inline std::int64_t madds(const attn_case& c) { return c.b * c.hq * c.lq * c.lk * (c.d + c.dv); }

/// A forward subject's outputs in the layouts of oracle_result: o (B, Lq, Hq,
/// Dv) and lse (B, Hq, Lq).
struct subject_result {
  std::vector<double> o, lse;
};

/// c's subject_result, every element +0.
inline subject_result zero_result(const attn_case& c) {
  subject_result r;
  r.o.assign(static_cast<std::size_t>(c.b * c.lq * c.hq * c.dv), 0.0);
  r.lse.assign(static_cast<std::size_t>(c.b * c.hq * c.lq), 0.0);
  return r;
}

/// q . k of query head h's row i and key j in f32, summed in order over d
/// (each stored element widened to f32): the f32 subjects' dot product.
inline float f32_dot(const attn_case& c, std::int64_t bi, std::int64_t h, std::int64_t i, std::int64_t j) {
  const std::int64_t g = c.kv_head(h);
  float dot = 0;
  for (std::int64_t d = 0; d < c.d; ++d) dot += static_cast<float>(c.q.at(bi, i, h, d)) * static_cast<float>(c.k.at(bi, j, g, d));
  return dot;
}

/// below(n): a uniform draw in [0, n) from rng, as rng() % n (the draws every
/// seeded test's cases are made of).
struct uniform_below {
  std::mt19937_64& rng;
  std::int64_t operator()(std::int64_t n) const { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)); }
};

/// The rest of a random case: storage type, value kind, layout and poison
/// from below(n) (uniform in [0, n)), then the seed from rng, in this order;
/// returns c materialized.
template <class Below, class Rng>
attn_case with_random_storage(attn_case c, const Below& below, Rng& rng) {
  c.type = static_cast<dtype>(below(3));
  c.values = static_cast<value_kind>(below(8));
  c.layout = static_cast<layout_kind>(below(3));
  c.poison = static_cast<poison_kind>(below(3));
  c.seed = rng();
  materialize(c);
  return c;
}

/// The largest sizes random_shape draws.
struct shape_bounds {
  std::int64_t b = 1, hkv = 1, group = 1, lq = 1, lk = 1, d = 1, dv = 1;
};

/// A random case header from below(n) (uniform in [0, n)): B, Hkv, G (Hq =
/// Hkv G), Lq, Lk, D and Dv each uniform in [1, its bound] (a bound of 1 takes
/// no draw), in this order; causal on a coin; in one case of three each batch's
/// key length uniform in [0, Lk].
template <class Below>
attn_case random_shape(const shape_bounds& most, const Below& below) {
  const auto upto = [&](std::int64_t m) { return m > 1 ? 1 + below(m) : std::int64_t{1}; };
  attn_case c;
  c.b = upto(most.b);
  c.hkv = upto(most.hkv);
  c.hq = c.hkv * upto(most.group);
  c.lq = upto(most.lq);
  c.lk = upto(most.lk);
  c.d = upto(most.d);
  c.dv = upto(most.dv);
  c.causal = below(2) == 0;
  if (below(3) == 0) {
    c.key_len.resize(static_cast<std::size_t>(c.b));
    for (auto& n : c.key_len) n = below(c.lk + 1);
  }
  return c;
}

/// A small random case, materialized: B in [1,2], Hkv in [1,2], G in [1,3],
/// Lq in [1,4], Lk in [1,5], D and Dv in [1,4], causal, padding and broadcast
/// masks at random, every dtype, value kind, layout and poison. Sizes stay
/// this small so 1,000 cases in three precisions run in seconds.
inline attn_case any_small_case(std::uint64_t seed) {
  std::mt19937_64 rng(seed);  // mt19937_64 output is fixed by the standard
  const uniform_below below{rng};
  attn_case c = random_shape({.b = 2, .hkv = 2, .group = 3, .lq = 4, .lk = 5, .d = 4, .dv = 4}, below);
  if (below(4) == 0) {
    const std::int64_t full[4] = {c.b, c.hq, c.lq, c.lk};
    for (int a = 0; a < 4; ++a) c.mask_shape[static_cast<std::size_t>(a)] = below(2) ? full[a] : 1;
  }
  return with_random_storage(c, below, rng);
}

/// Draws each contract 1.1 variant onto c with its own coin (each about half
/// the time, the chunk a quarter; softcaps in [0.25, 0.25 + softcap_span]),
/// from below(n), a uniform draw in [0, n).
template <class Below>
void draw_variants(attn_case& c, const Below& below, double softcap_span) {
  score_variants& w = c.variants;
  if (below(2)) w.window_left = below(4) - 1;
  if (below(2)) w.window_right = below(4) - 1;
  if (below(4) == 0) w.chunk = 1 + below(4);
  if (below(2)) w.softcap = static_cast<float>(0.25 + softcap_span * static_cast<double>(below(1000)) / 1000.0);
  if (below(2)) w.sinks = static_cast<sink_kind>(1 + below(5));
  if (below(2)) w.alibi = static_cast<alibi_kind>(1 + below(3));
  if (below(2)) {
    const std::int64_t full[4] = {c.b, c.hq, c.lq, c.lk};
    for (int a = 0; a < 4; ++a) w.bias_shape[static_cast<std::size_t>(a)] = below(2) ? full[a] : 1;
    w.bias_type = static_cast<dtype>(below(3));
    w.bias_values = static_cast<bias_kind>(below(3));
  }
}

}  // namespace attncheck::oracle_testing
