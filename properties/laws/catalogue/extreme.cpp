// The extreme law: the differential law on logits near the type's limits or
// with one dominant key, where a missing max shift or an overflow shows.

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

void prepare_extreme(attn_case& c, const subject&) {
  // Large logits (or one dominant key) on every case of this law.
  c.values = (c.seed & 1) ? value_kind::dominant : value_kind::large_logits;
}

// The check is the differential law's: only the prepared values differ.

}  // namespace attncheck::laws
