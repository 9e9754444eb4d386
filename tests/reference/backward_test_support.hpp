// Helpers shared by the backward tests: the rest of a random backward case
// after its shape and storage.
#pragma once

#include <array>
#include <cstdint>

#include "attncheck/backward_oracle.hpp"
#include "attncheck/case.hpp"

namespace attncheck::oracle_testing {

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

}  // namespace attncheck::oracle_testing
