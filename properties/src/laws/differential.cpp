// Laws judged directly against the high-precision oracle.
#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

law_outcome output_within_bound(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto out = s.attend(c);
  if (run_failed(out, o, "run")) return o;
  const oracle_result ref = reference(c, oracle_options_for(s, c, oracle_precision::mpfr50));
  o.add("O and LSE against the oracle", compare_with_reference(c, out, ref));
  return o;
}

void prepare_extreme(attn_case& c, const subject&) {
  // Large logits (or one dominant key) on every case of this law.
  c.values = (c.seed & 1) ? value_kind::dominant : value_kind::large_logits;
}

law_outcome extreme_logits_stay_within_bound(const subject& s, const attn_case& c) {
  law_outcome o = output_within_bound(s, c);
  return o;
}

}  // namespace attncheck::laws
