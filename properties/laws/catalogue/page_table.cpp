// The page table law (docs/spec.md "Paged KV", "What is unspecified and must
// not be read", contract 1.2): table entries past ceil(n[b] / P), spare
// pages and the canaries in unused slots never change a bit.
#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

// paged.cpp: the paged form's drawing and applicability.
void prepare_paged(attn_case& c, const subject& s);
std::string declares_paged(const subject& s);

namespace {

// The same pages in the same places (in order), once with a stale table tail
// and no spare page, once with an invalid tail (-1, out of range) and spare
// pages, and with the case's poison NaN in one and huge in the other (the
// canaries of unused slots follow it): every bit the same (docs/spec.md
// "What is unspecified and must not be read").
law_outcome unspecified_entries_never_matter(const subject& s, const attn_case& c) {
  law_outcome o;
  law_rng rng(c, 0x57a1e);
  attn_case a = c, b = c;
  a.form.page_order = b.form.page_order = page_order_kind::in_order;
  a.form.spare_pages = 0;
  a.form.table_tail = table_tail_kind::stale;
  b.form.spare_pages = 1 + rng.below(4);
  b.form.table_tail = table_tail_kind::invalid;
  if (c.poison != poison_kind::none) {
    a.poison = poison_kind::nan;
    b.poison = poison_kind::big;
    materialize(a);
    materialize(b);
  }
  const auto x = s.attend(a), y = s.attend(b);
  if (run_failed(x, o, "stale tail") || run_failed(y, o, "invalid tail, spare pages")) return o;
  o.add("pages=" + std::to_string(c.form.page_size) + ": stale tail, no spare page against -1 and out-of-range entries, " +
            std::to_string(b.form.spare_pages) + " spare pages" +
            (c.poison != poison_kind::none ? ", NaN against huge canaries" : ""),
        compare_bitwise(a, x, y));
  return o;
}

}  // namespace

std::vector<law> page_table_laws() {
  return {law_entry("page_table.unspecified_entries_never_matter", unspecified_entries_never_matter, 0.5,
                    "table entries past ceil(n[b] / P), spare pages and the canaries in unused slots change no bit")
              .applies_when(declares_paged)
              .prepared_by(prepare_paged)
              .input_form()};
}

}  // namespace attncheck::laws
