// Helpers shared by the backward tests: the rest of a random backward case
// after its shape and storage.
#pragma once

#include <array>
#include <cstdint>
#include <random>

#include "attncheck/backward_oracle.hpp"
#include "attncheck/case.hpp"
#include "oracle_test_support.hpp"

namespace attncheck::oracle_testing {

/// Longer rows and wider heads than any_small_case, drawn from rng: B = 1,
/// Hkv and G in [1, 2], Lq in [1, 24], Lk in [1, 48], D and Dv in [1, 32],
/// causal and padding at random, then any storage (with_random_storage).
inline attn_case any_long_shape(std::mt19937_64& rng) {
  const uniform_below below{rng};
  const attn_case c = random_shape({.b = 1, .hkv = 2, .group = 2, .lq = 24, .lk = 48, .d = 32, .dv = 32}, below);
  return with_random_storage(c, below, rng);
}

/// A backward case's dO and the kind it was drawn with.
struct grad_draw {
  grad_kind grad = grad_kind::normal;
  tensor d_o;
};

/// Draws, from below(n) (uniform in [0, n)), any value kind and, in one case
/// of four, a scale of either sign into c; materializes c again; then draws a
/// dO kind and c's dO (draw_grad_output).
template <class Below>
grad_draw with_random_values_and_grad(attn_case& c, const Below& below) {
  c.values = static_cast<value_kind>(below(static_cast<std::int64_t>(value_kind::max_v) + 1));
  constexpr std::array<float, 4> scales{-0.5f, 2.0f, 0.125f, -3.0f};
  if (below(4) == 0) c.scale = scales[static_cast<std::size_t>(below(4))];
  materialize(c);
  grad_draw g;
  g.grad = static_cast<grad_kind>(below(3));
  g.d_o = draw_grad_output(c, g.grad);
  return g;
}

/// Draws the contract 1.1 variants onto c (draw_variants, softcaps in
/// [0.25, 0.25 + softcap_span]) until at least one is on.
template <class Below>
void draw_some_variants(attn_case& c, const Below& below, double softcap_span) {
  do {
    c.variants = score_variants{};
    draw_variants(c, below, softcap_span);
  } while (!c.variants.any());
}

}  // namespace attncheck::oracle_testing
