// The fully-masked law: rows that see no key give O = 0 and LSE = -inf.
#include <bit>
#include <limits>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

void prepare_fully_masked(attn_case& c, const subject& s) {
  if (s.has(ATTNCHECK_FEATURE_PADDING)) {
    if (c.key_len.empty()) c.key_len.assign(static_cast<std::size_t>(c.b), c.lk);
    c.key_len[static_cast<std::size_t>(c.seed % static_cast<std::uint64_t>(c.b))] = 0;  // an empty cache
  } else if (s.has(ATTNCHECK_FEATURE_CAUSAL)) {
    c.causal = true;
    c.lq = c.lk + 1 + static_cast<std::int64_t>(c.seed % 3);  // first rows precede every key
    if (c.has_mask() && c.mask_shape[2] != 1) c.mask_shape[2] = c.lq;
  } else if (s.has(ATTNCHECK_FEATURE_MASK)) {
    c.mask_shape = {c.b, c.hq, c.lq, c.lk};  // materialize draws some all-false rows
  }
}

law_outcome fully_masked_rows_are_zero(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto out = s.attend(c);
  if (run_failed(out, o, "run")) return o;
  comparison z;
  const bool any_empty = empty_rows_are_zero(c, out, z);
  if (!any_empty) o.nothing_to_judge("no row is fully masked");
  o.add("fully masked rows", z);
  return o;
}

}  // namespace attncheck::laws
