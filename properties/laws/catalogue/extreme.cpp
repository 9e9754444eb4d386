// The extreme law: the differential law on logits near the type's limits,
// with one dominant key, or with Q in the subnormal range, where a missing max
// shift, an overflow or an input flushed to zero shows.

#include <algorithm>
#include <cmath>
#include <string>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// A third of the cases move Q down into the subnormal range (extreme_within_bound).
bool subnormal_q(const attn_case& c) { return c.seed % 3 == 2; }

}  // namespace

void prepare_extreme(attn_case& c, const subject&) {
  // Large logits, one dominant key, or unit-scale values whose Q the check
  // moves into the subnormal range, on every case of this law.
  switch (c.seed % 3) {
    case 0: c.values = value_kind::large_logits; break;
    case 1: c.values = value_kind::dominant; break;
    default: c.values = value_kind::normal, c.poison = poison_kind::nan; break;
  }
}

// Q * 2^-a with K * 2^a, a chosen so that Q's largest element lands just
// under the type's smallest normal (2^-126, or f16's 2^-14) and K stays
// finite: every product q k keeps its value where the stored Q holds it
// exactly, and the oracle judges the stored values. A kernel that reads
// subnormal inputs as zero (x86's DAZ, a GPU's ftz on loading) loses most of
// Q, and fails unless it declares ATTNCHECK_FLUSH_INPUTS, for which the
// oracle reads them flushed too. The other cases are the differential law's.
law_outcome extreme_within_bound(const subject& s, const attn_case& c) {
  if (!subnormal_q(c)) return output_within_bound(s, c);
  const double q_max = max_abs_finite(c.q), k_max = max_abs_finite(c.k);
  if (q_max == 0 || k_max == 0) return output_within_bound(s, c);
  const double smallest_normal = c.type == dtype::f16 ? 0x1p-14 : 0x1p-126;
  const int a =
      std::min(std::ilogb(q_max) - std::ilogb(smallest_normal) + 1, std::ilogb(largest_finite(c.type)) - std::ilogb(k_max) - 1);
  if (a <= 0) return output_within_bound(s, c);
  attn_case t = c;
  t.q = scaled(c.q, -a, c.layout);
  t.k = scaled(c.k, a, c.layout);
  law_outcome o;
  const auto out = s.attend(t);
  if (run_failed(out, o, "Q * 2^-" + std::to_string(a) + ", K * 2^" + std::to_string(a))) return o;
  o.add("Q * 2^-" + std::to_string(a) + " (subnormal) and K * 2^" + std::to_string(a) + " against the oracle",
        compare_with_reference(t, out, reference(t, oracle_options_for(s, t, law_oracle))));
  return o;
}

}  // namespace attncheck::laws
