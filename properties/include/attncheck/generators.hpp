// rapidcheck generators of case headers. Every value of a case comes from its
// printed seed through materialize(); generators choose the header. They lean
// toward what hides bugs (tile +- 1, G != Hkv, Lq != Lk, B >= 2, odd and
// unequal D/Dv, partial masks) and shrink toward B = Hq = Hkv = Lq = Lk = D =
// Dv = 1, f32, dyadic values, no masks.
#pragma once

#include <rapidcheck.h>

#include "attncheck/case.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {

/// Caps that keep one case cheap for the oracle (about 2e5 multiply-adds).
struct gen_options {
  std::int64_t max_work = 200'000;  ///< B*Hq*Lq*Lk*(D+Dv) at most; larger shapes are cut down
  bool allow_masks = true;          ///< causal, padding, boolean masks
  bool allow_poison = true;
};

/// Any case the subject can take: shapes, masks, dtype, values, layout, poison, seed.
rc::Gen<attn_case> any_case(const subject& s, const gen_options& opt = {});

}  // namespace attncheck

namespace rc {
template <>
struct Arbitrary<attncheck::attn_case>;  // deliberately undefined: use any_case()
}  // namespace rc

namespace attncheck {
/// rapidcheck prints counterexamples with the one-line form.
inline void showValue(const attn_case& c, std::ostream& os) { os << to_line(c); }
}  // namespace attncheck
