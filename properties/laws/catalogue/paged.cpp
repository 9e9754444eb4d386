// The paged K/V law (docs/spec.md "Paged KV", contract 1.2): the paged form
// of a problem has its dense form's answer (bit for bit for a subject that
// claims ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE, within the bound otherwise).
// The host builds the arena and the table from the case's form
// (subject::attend); draw_paged_form is the one drawing of a paged form, used
// by the page_table and ragged laws too.
#include <algorithm>

#include "attncheck/case_space.hpp"
#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

namespace {

// A page size: the production sizes and their awkward neighbours (1, 3, 16,
// 17, 64, 128, 256, 512), the subject's size hints +-1, or, in half the
// cases, one that ends a sequence exactly on a page boundary, one before it
// or one after it (n = k P, n = k P - 1, n = k P + 1).
std::int64_t draw_page_size(const attn_case& c, const subject& s, law_rng& rng) {
  std::vector<std::int64_t> sizes = {1, 3, 16, 17, 64, 128, 256, 512};
  for (std::int64_t h : hint_lengths(s))
    for (std::int64_t d : {-1, 0, 1})
      if (h + d >= 1 && h + d <= max_page_size) sizes.push_back(h + d);
  const std::int64_t n = c.valid_keys(rng.below(c.b));
  if (n >= 2 && rng.below(2) == 1) {
    const std::int64_t k = 1 + rng.below(std::min<std::int64_t>(n, 4));
    switch (rng.below(3)) {
      case 0: return std::clamp<std::int64_t>(n / k, 1, max_page_size);         // n a multiple of P when k divides n
      case 1: return std::clamp<std::int64_t>((n + 1) / k, 1, max_page_size);   // n = k P - 1 when k divides n + 1
      default: return std::clamp<std::int64_t>((n - 1) / k, 1, max_page_size);  // n = k P + 1 when k divides n - 1
    }
  }
  return sizes[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(sizes.size())))];
}

}  // namespace

void draw_paged_form(attn_case& c, const subject& s, std::uint64_t salt) {
  law_rng rng(c, salt);
  input_form& f = c.form;
  f.page_size = draw_page_size(c, s, rng);
  f.page_order = static_cast<page_order_kind>(rng.below(3));
  f.spare_pages = rng.below(2) == 0 ? 0 : 1 + rng.below(4);
  f.table_tail = static_cast<table_tail_kind>(rng.below(2));
  const std::int64_t pages = (c.lk + f.page_size - 1) / f.page_size;
  // A shared prefix in a third of the batches of two or more.
  f.shared_pages = c.b > 1 && rng.below(3) == 0 ? 1 + rng.below(std::min<std::int64_t>(pages, 3)) : 0;
}

void prepare_paged(attn_case& c, const subject& s) {
  if (s.has_v3(ATTNCHECK_FEATURE3_PAGED)) draw_paged_form(c, s, 0x9a6ed);
}

std::string declares_paged(const subject& s) {
  return s.has_v3(ATTNCHECK_FEATURE3_PAGED) ? "" : "subject does not declare paged K/V (ATTNCHECK_FEATURE3_PAGED)";
}

namespace {

std::string form_text(const attn_case& c) {
  const input_form& f = c.form;
  return "pages=" + std::to_string(f.page_size) + " " + std::string(name(f.page_order)) +
         (f.spare_pages ? " spare_pages=" + std::to_string(f.spare_pages) : "") + " tail " + std::string(name(f.table_tail)) +
         (f.shared_pages ? " shared_pages=" + std::to_string(f.shared_pages) : "");
}

law_outcome paged_equals_dense(const subject& s, const attn_case& c) {
  law_outcome o;
  attn_case dense = c;
  dense.form = input_form{};
  const auto paged_out = s.attend(c), dense_out = s.attend(dense);
  if (run_failed(paged_out, o, "paged form") || run_failed(dense_out, o, "dense form")) return o;
  const std::string what = form_text(c) + " against the dense form";
  if (s.claims_v3(ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE)) {
    o.add(what + " (claimed bit for bit)", compare_bitwise(dense, dense_out, paged_out));
  } else {
    const oracle_result ref = fast_bound(s, dense);
    o.add(what, compare_within_bounds(dense, paged_out, ref, dense_out, ref));
  }
  return o;
}

}  // namespace

std::vector<law> paged_laws() {
  return {law_entry("paged.equals_dense", paged_equals_dense, 0.5,
                    "K and V through a block table (pages of 1..512 keys in any physical order, shared prefixes, stale or "
                    "invalid table tails) give the dense form's output: bit for bit when claimed, else within the bound")
              .applies_when(declares_paged)
              .prepared_by(prepare_paged)
              .input_form()};
}

}  // namespace attncheck::laws
