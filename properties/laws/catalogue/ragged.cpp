// The ragged batch law (docs/spec.md "Ragged batches", contract 1.2): a
// packed batch, whose sequences have their own query and key counts (zero
// included on either side), gives each sequence the rows of its dense form:
// bit for bit for a subject that claims ATTNCHECK_CLAIM3_RAGGED_EQUALS_DENSE,
// within the bound otherwise. The host packs the case (subject::attend) and
// poisons the rows of the packed output it must not write.
#include <algorithm>

#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

void draw_paged_form(attn_case& c, const subject& s, std::uint64_t salt);  // paged.cpp

namespace {

// Each sequence's queries: all Lq, none, one or any count, so batches mix
// zero, one and long sequences; a quarter of the cases keep Lq everywhere.
// With paged K/V declared too, a third of the cases also page K and V.
void prepare_ragged(attn_case& c, const subject& s) {
  if (!s.has_v3(ATTNCHECK_FEATURE3_RAGGED)) return;
  law_rng rng(c, 0x7a66ed);
  input_form& f = c.form;
  f.ragged = true;
  if (rng.below(4) != 0)
    for (std::int64_t b = 0; b < c.b; ++b) {
      const std::int64_t pick = rng.below(4);
      f.q_len.push_back(pick == 0 ? c.lq : pick == 1 ? 0 : pick == 2 ? 1 : rng.below(c.lq + 1));
    }
  if (s.has_v3(ATTNCHECK_FEATURE3_PAGED) && rng.below(3) == 0) draw_paged_form(c, s, 0x7a66ed9a);
}

law_outcome ragged_equals_dense_per_sequence(const subject& s, const attn_case& c) {
  law_outcome o;
  attn_case dense = c;
  dense.form = input_form{};
  bool any_row = false;
  for (std::int64_t b = 0; b < c.b; ++b) any_row = any_row || c.queries(b) > 0;
  if (!any_row) o.nothing_to_judge("every sequence has zero queries");
  const auto packed = s.attend(c), plain = s.attend(dense);
  if (run_failed(packed, o, "ragged form") || run_failed(plain, o, "dense form")) return o;
  const auto keep = [&c](std::int64_t b, std::int64_t, std::int64_t i) { return c.row_in_problem(b, i); };
  std::string what = "packed";
  for (std::int64_t b = 0; b < c.b && b < 8; ++b) what += (b ? "," : " q=") + std::to_string(c.queries(b));
  if (c.b > 8) what += ",...";
  what += std::string(c.form.paged() ? " (K, V paged)" : "") + " against the dense rows";
  if (s.claims_v3(ATTNCHECK_CLAIM3_RAGGED_EQUALS_DENSE)) {
    o.add(what + " (claimed bit for bit)", rows_bitwise(dense, plain, packed, keep));
  } else {
    const oracle_result ref = fast_bound(s, dense);
    within_bounds_options opt;
    opt.keep = keep;
    o.add(what, compare_within_bounds(dense, packed, ref, plain, ref, opt));
  }
  return o;
}

std::string declares_ragged(const subject& s) {
  return s.has_v3(ATTNCHECK_FEATURE3_RAGGED) ? "" : "subject does not declare ragged batches (ATTNCHECK_FEATURE3_RAGGED)";
}

}  // namespace

std::vector<law> ragged_laws() {
  return {law_entry("ragged.equals_dense_per_sequence", ragged_equals_dense_per_sequence, 0.5,
                    "a packed batch (cu_seqlens, zero-length sequences on either side, K and V packed or paged) gives every "
                    "sequence its dense rows: bit for bit when claimed, else within the bound")
              .applies_when(declares_ragged)
              .prepared_by(prepare_ragged)
              .input_form()};
}

}  // namespace attncheck::laws
