// The page table law (docs/spec.md "Paged KV", "What is unspecified and must
// not be read", contract 1.2): table entries past ceil(n[b] / P), spare
// pages and the canaries in unused slots never change a bit.
#include "forms.hpp"
#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

// The same pages in the same places (in order), once with a stale table tail,
// no spare page and NaN canaries, once with spare pages, a tail of -1 and
// out-of-range entries or (half the cases) a stale tail that now also names
// spare pages, and huge finite canaries (a kernel that reads them gets finite
// garbage, not a NaN that shows): every bit the same (docs/spec.md "What is
// unspecified and must not be read"). The host fills the canaries by the
// case's poison (NaN, or huge for poison big); Q, K and V stay the case's
// own (their unused slots are the masked-slot law's), so nothing is drawn twice.
law_outcome unspecified_entries_never_matter(const subject& s, const attn_case& c) {
  law_outcome o;
  law_rng rng(c, 0x57a1e);
  attn_case a = c, b = c;
  a.form.page_order = b.form.page_order = page_order_kind::in_order;
  a.form.spare_pages = 0;
  a.form.table_tail = table_tail_kind::stale;
  b.form.spare_pages = 1 + rng.below(4);
  b.form.table_tail = rng.below(2) == 0 ? table_tail_kind::invalid : table_tail_kind::stale;
  a.poison = poison_kind::nan;
  b.poison = poison_kind::big;
  const auto x = s.attend(a), y = s.attend(b);
  if (run_failed(x, o, "stale tail, NaN canaries") || run_failed(y, o, "spare pages, huge canaries")) return o;
  // A subject that weights masked slots by zero gets finite canaries, the
  // fill at full and at half magnitudes (masked_fill.hpp), never NaN.
  const bool by_zero = s.weights_masked_by_zero();
  o.add("pages=" + std::to_string(c.form.page_size) + ": stale tail, no spare page, " +
            (by_zero ? "finite fill canaries (largest magnitudes)" : "NaN canaries") + " against " +
            (b.form.table_tail == table_tail_kind::invalid ? "-1 and out-of-range entries, "
                                                           : "a stale tail naming spare pages, ") +
            std::to_string(b.form.spare_pages) + " spare pages, " +
            (by_zero ? "finite fill canaries (half magnitudes)" : "huge finite canaries"),
        compare_claimed(s, ATTNCHECK_CLAIM_DETERMINISTIC, a, x, y));
  return o;
}

}  // namespace attncheck::laws
