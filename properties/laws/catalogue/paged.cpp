// The paged K/V law (docs/spec.md "Paged KV", contract 1.2): the paged form
// of a problem has its dense form's answer (bit for bit for a subject that
// claims ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE, within the bound otherwise).
// The host builds the arena and the table from the case's form
// (subject::attend); draw_paged_form is the one drawing of a paged form, used
// by the page_table and ragged laws too.
#include <algorithm>
#include <array>

#include "attncheck/case_space.hpp"
#include "forms.hpp"
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

// The values are drawn by materialize(); a new sequence's key count is drawn
// as draw_sequences draws them.
void set_batch(attn_case& c, std::int64_t nb, law_rng& rng) {
  if (nb == c.b) return;
  if (!c.key_len.empty()) {
    c.key_len.resize(static_cast<std::size_t>(std::min(c.b, nb)));
    while (static_cast<std::int64_t>(c.key_len.size()) < nb) c.key_len.push_back(sequence_length(c.lk, rng));
  }
  if (c.has_mask() && c.mask_shape[0] != 1) c.mask_shape[0] = nb;
  if (c.variants.has_bias() && c.variants.bias_shape[0] != 1) c.variants.bias_shape[0] = nb;
  c.b = nb;
}

void draw_sequences(attn_case& c, const subject& s, law_rng& rng) {
  // A quarter of the cases: 16, 33 or 64 sequences, within the input-form
  // laws' work cap (the heads cut to one first when they do not fit).
  if (rng.below(4) == 0) {
    constexpr std::int64_t widths[] = {16, 33, 64};
    const std::int64_t want = widths[rng.below(3)];
    if (want > c.b) {
      const auto per_sequence = [&c] { return std::max<std::int64_t>(1, case_work(c) / c.b); };
      const std::int64_t cap = run_default::variant_max_work;
      if (per_sequence() * want > cap && c.hq > 1) {
        c.hq = c.hkv = 1;
        if (c.has_mask() && c.mask_shape[1] != 1) c.mask_shape[1] = 1;
        if (c.variants.has_bias() && c.variants.bias_shape[1] != 1) c.variants.bias_shape[1] = 1;
      }
      const std::int64_t nb = std::min(want, cap / per_sequence());
      if (nb >= 16) set_batch(c, nb, rng);
    }
  }
  // Half the cases (a subject taking key padding): each sequence's key count
  // drawn from none, one, Lk and any, so batches mix zero, one and long ones.
  if (s.has(ATTNCHECK_FEATURE_PADDING) && rng.below(2) == 0) {
    c.key_len.clear();
    for (std::int64_t b = 0; b < c.b; ++b) c.key_len.push_back(sequence_length(c.lk, rng));
  }
}

void draw_paged_form(attn_case& c, const subject& s, std::uint64_t salt, bool with_sequences) {
  law_rng rng(c, salt);
  if (with_sequences) draw_sequences(c, s, rng);
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

std::int64_t arena_pages(const attn_case& c) {
  const input_form& f = c.form;
  std::int64_t most = 0, own = 0;
  for (std::int64_t b = 0; b < c.b; ++b) {
    const std::int64_t used = (c.valid_keys(b) + f.page_size - 1) / f.page_size;
    most = std::max(most, used);
    own += used - std::min(f.shared_pages, used);
  }
  return std::min(f.shared_pages, most) + own + f.spare_pages;
}

namespace {

std::string form_text(const attn_case& c) {
  const input_form& f = c.form;
  return "pages=" + std::to_string(f.page_size) + " " + std::string(name(f.page_order)) +
         (f.spare_pages ? " spare_pages=" + std::to_string(f.spare_pages) : "") + " tail " + std::string(name(f.table_tail)) +
         (f.shared_pages ? " shared_pages=" + std::to_string(f.shared_pages) : "");
}

}  // namespace

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

namespace {

// Two paged forms of one problem: bit for bit when the subject claims page
// placement (or the dense form's bits, which implies it), else within the
// bound of the dense form (docs/spec.md "Placement does not matter").
comparison same_problem(const subject& s, const attn_case& c, const subject_output& a, const subject_output& b) {
  if (s.claims_v3(ATTNCHECK_CLAIM3_PAGE_PLACEMENT) || s.claims_v3(ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE))
    return compare_bitwise(c, a, b);
  attn_case dense = c;
  dense.form = input_form{};
  const oracle_result ref = fast_bound(s, dense);
  return compare_within_bounds(dense, a, ref, b, ref);
}

}  // namespace

// The same pages at other physical places, the table renamed to match: in
// order against reversed (different wherever the arena holds two pages or
// more), and the case's own shuffle against in order.
law_outcome placement_changes_nothing(const subject& s, const attn_case& c) {
  law_outcome o;
  if (arena_pages(c) < 2) o.nothing_to_judge("one page in the arena: no other placement");
  attn_case in_order = c, reversed = c;
  in_order.form.page_order = page_order_kind::in_order;
  reversed.form.page_order = page_order_kind::reversed;
  const auto x = s.attend(in_order), y = s.attend(reversed);
  if (run_failed(x, o, "pages in order") || run_failed(y, o, "pages reversed")) return o;
  const std::string claimed = s.claims_v3(ATTNCHECK_CLAIM3_PAGE_PLACEMENT) || s.claims_v3(ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE)
                                  ? " (claimed bit for bit)"
                                  : "";
  const std::string pages = "pages=" + std::to_string(c.form.page_size) + ", " + std::to_string(arena_pages(c)) + " in the arena";
  o.add(pages + ": reversed against in order" + claimed, same_problem(s, c, x, y));
  if (c.form.page_order == page_order_kind::shuffled) {
    const auto z = s.attend(c);
    if (run_failed(z, o, "pages shuffled")) return o;
    o.add(pages + ": shuffled against in order" + claimed, same_problem(s, c, x, z));
  }
  return o;
}

// Every law case of this law shares a prefix: two sequences or more, the
// first 1..3 pages of each named once.
void prepare_shared(attn_case& c, const subject& s) {
  if (!s.has_v3(ATTNCHECK_FEATURE3_PAGED)) return;
  draw_paged_form(c, s, 0x5a4ed);
  law_rng rng(c, 0x5a4ed2);
  if (c.b < 2) set_batch(c, 2 + rng.below(3), rng);
  const std::int64_t pages = (c.lk + c.form.page_size - 1) / c.form.page_size;
  if (c.form.shared_pages == 0) c.form.shared_pages = 1 + rng.below(std::min<std::int64_t>(pages, 3));
}

// The shared prefix against private copies of it (the same keys and values,
// each sequence its own pages): the answer the sequences would get with
// private copies (docs/spec.md "Shared pages"), bit for bit when placement is claimed.
law_outcome shared_prefix_equals_private_copies(const subject& s, const attn_case& c) {
  law_outcome o;
  std::int64_t sharing = 0;
  for (std::int64_t b = 0; b < c.b; ++b) sharing += c.valid_keys(b) > 0 ? 1 : 0;
  if (c.form.shared_pages == 0 || sharing < 2) o.nothing_to_judge("fewer than two sequences reach a shared page");
  attn_case own = c;
  own.form.shared_pages = 0;  // the tensors stay: the prefix keys are equal, now copied into each sequence's pages
  const auto x = s.attend(c), y = s.attend(own);
  if (run_failed(x, o, "shared prefix") || run_failed(y, o, "private copies")) return o;
  const bool claimed = s.claims_v3(ATTNCHECK_CLAIM3_PAGE_PLACEMENT) || s.claims_v3(ATTNCHECK_CLAIM3_PAGED_EQUALS_DENSE);
  o.add("pages=" + std::to_string(c.form.page_size) + ": " + std::to_string(c.form.shared_pages) + " pages shared by " +
            std::to_string(sharing) + " sequences against private copies" + (claimed ? " (claimed bit for bit)" : ""),
        same_problem(s, c, x, y));
  return o;
}

// About an eighth of the cases of paged.equals_dense (a quarter of those of
// 16 keys or more) are long-context decodes (make_long_decode), through
// thousands of pages of the sizes drawn as ever. Half of those cross a
// width of the physical page number instead: pages of 1, 2 or 3 keys and a
// first sequence just past 2^15 (a third) or 2^16 pages (Lk up to 196,800), so a kernel
// that holds page numbers in 16 bits, signed or not, reads the wrong page.
// Drawn as the other long decodes, only 1 in 60 of them crossed 2^16 pages:
// a 16-bit page index passed the default gate on every seed tried.
void prepare_equals_dense(attn_case& c, const subject& s) {
  if (!s.has_v3(ATTNCHECK_FEATURE3_PAGED)) return;
  law_rng rng(c, 0x10e6), wide(c, 0x10e6b);
  const bool long_decode = c.lk >= 16 && rng.below(4) == 0;  // shorter cases stay: shrinking ends there (differential.cpp)
  const bool crossing = long_decode && wide.below(2) == 0;
  const std::int64_t page = 1 + wide.below(3), pages = (std::int64_t{1} << (wide.below(3) == 0 ? 15 : 16)) + 1 + wide.below(64);
  if (long_decode) make_long_decode(c, rng, crossing ? (pages - 1) * page + 1 + wide.below(page) : 0);
  draw_paged_form(c, s, 0x9a6ed, !long_decode);  // a long decode keeps its key counts
  if (crossing) c.form.page_size = page;
}

}  // namespace attncheck::laws
