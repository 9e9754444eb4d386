// The shift law: a constant added to every score of a row changes nothing
// beyond the bound (softmax is shift-invariant).
#include <algorithm>
#include <bit>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

law_outcome constant_score_shift_changes_nothing(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto base = s.attend(c);
  if (run_failed(base, o, "base run")) return o;
  // An extra head dimension: Q[..., D] = t (per row), K[..., D] = 1 adds scale * t to every score of the row.
  law_rng rng(c, 0x5f1f7);
  attn_case p = c;
  p.d = c.d + 1;
  p.scale = c.effective_scale();
  std::vector<double> shift(static_cast<std::size_t>(c.b * c.lq * c.hq));
  // Half the cases: small dyadic shifts in [-8, 8] (exact in every type) with
  // K[..., D] = 1. The other half: shifts of 1e3..1e4 in score units, far
  // past exp's range (a kernel without the max shift overflows or
  // underflows): K[..., D] = kappa, a power of two, Q[..., D] = t with 4
  // significant bits, so scale * kappa * t is exact and both are normal.
  double kappa = 1.0;
  const double sc = std::fabs(static_cast<double>(c.effective_scale()));
  const bool big = rng.below(2) == 1 && sc > 0;
  const double tiny = c.type == dtype::f16 ? 0x1p-14 : 0x1p-126, top = largest_finite(c.type) / 2;
  if (big)
    kappa = std::clamp(std::exp2(std::round(std::log2(std::sqrt(3e3 / sc)))), c.type == dtype::f16 ? 0x1p-14 : 0x1p-100,
                       c.type == dtype::f16 ? 0x1p14 : 0x1p100);
  std::int64_t big_rows = 0;
  for (auto& t : shift) {
    t = static_cast<double>(rng.below(33) - 16) / 2;
    if (!big) continue;
    const double target = (1e3 + 9e3 * static_cast<double>(rng.below(1024)) / 1024.0) * (rng.below(2) ? -1 : 1);
    const double want = target / (sc * kappa);
    const int e = std::ilogb(want);
    const double q = std::ldexp(std::round(std::ldexp(want, 3 - e)), e - 3);  // 4 significant bits
    if (std::fabs(q) >= tiny && std::fabs(q) <= top) t = q, ++big_rows;
  }
  p.q = remake(c.type, {c.b, c.lq, c.hq, c.d + 1}, c.layout, [&](auto b, auto i, auto h, auto x) {
    return x < c.d ? c.q.bits_at(b, i, h, x) : encode(c.type, shift[static_cast<std::size_t>((b * c.lq + i) * c.hq + h)]);
  });
  p.k = remake(c.type, {c.b, c.lk, c.hkv, c.d + 1}, c.layout,
               [&](auto b, auto j, auto g, auto x) { return x < c.d ? c.k.bits_at(b, j, g, x) : encode(c.type, kappa); });
  const auto out = s.attend(p);
  if (run_failed(out, o, "shifted run")) return o;
  subject_output a = base, b = out;
  a.lse.clear(), b.lse.clear();  // LSE moves by the shift; O must not
  o.add(std::string("scores shifted by scale * t per row") +
            (big_rows ? " (" + std::to_string(big_rows) + " rows by 1e3..1e4)" : ""),
        compare_within_own_bounds(s, c, a, p, b));
  return o;
}

}  // namespace attncheck::laws
