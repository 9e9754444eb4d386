// The ragged batch law (docs/spec.md "Ragged batches", contract 1.2): a
// packed batch, whose sequences have their own query and key counts (zero
// included on either side), gives each sequence the rows of its dense form:
// bit for bit for a subject that claims ATTNCHECK_CLAIM3_RAGGED_EQUALS_DENSE,
// within the bound otherwise. The host packs the case (subject::attend) and
// poisons the rows of the packed output it must not write.
#include <algorithm>
#include <cmath>

#include "attncheck/input_forms.hpp"
#include "forms.hpp"
#include "law_support.hpp"
#include "registry.hpp"

namespace attncheck::laws {

// Each sequence's queries: all Lq, none, one or any count, so batches mix
// zero, one and long sequences; a quarter of the cases keep Lq everywhere.
// Key counts and batch widths as draw_sequences draws them (zero keys
// included). With paged K/V declared too, a third of the cases also page K
// and V (the paged form's own drawing then adds nothing to the sequences).
void prepare_ragged(attn_case& c, const subject& s) {
  if (!s.has_v3(ATTNCHECK_FEATURE3_RAGGED)) return;
  law_rng rng(c, 0x7a66ed);
  draw_sequences(c, s, rng);
  input_form& f = c.form;
  f.ragged = true;
  if (rng.below(4) != 0)
    for (std::int64_t b = 0; b < c.b; ++b) {
      const std::int64_t pick = rng.below(4);
      f.q_len.push_back(pick == 0 ? c.lq : pick == 1 ? 0 : pick == 2 ? 1 : rng.below(c.lq + 1));
    }
  if (s.has_v3(ATTNCHECK_FEATURE3_PAGED) && rng.below(3) == 0) draw_paged_form(c, s, 0x7a66ed9a, false);
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

// Every case of the zero-length law has three sequences or more: one with no
// query, one with no key (a subject taking key padding) and queries, and one
// with both; the bias, if any, is broadcast over the batch (the law compares
// the batch with one that lacks the empty sequences).
void prepare_zero_length(attn_case& c, const subject& s) {
  if (!s.has_v3(ATTNCHECK_FEATURE3_RAGGED)) return;
  prepare_ragged(c, s);
  law_rng rng(c, 0x2e80);
  if (c.b < 3) {
    const std::int64_t nb = 3 + rng.below(3);
    set_batch(c, nb, rng);
    input_form& f = c.form;
    if (!f.q_len.empty())
      while (static_cast<std::int64_t>(f.q_len.size()) < nb) f.q_len.push_back(rng.below(c.lq + 1));
  }
  input_form& f = c.form;
  if (f.q_len.empty()) f.q_len.assign(static_cast<std::size_t>(c.b), c.lq);
  const auto at = [](std::int64_t b) { return static_cast<std::size_t>(b); };
  const std::int64_t no_query = rng.below(c.b), no_key = (no_query + 1 + rng.below(c.b - 1)) % c.b;
  std::int64_t both = rng.below(c.b);
  while (both == no_query || both == no_key) both = (both + 1) % c.b;
  f.q_len[at(no_query)] = 0;
  f.q_len[at(both)] = std::max<std::int64_t>(1, f.q_len[at(both)]);
  f.q_len[at(no_key)] = std::max<std::int64_t>(1, f.q_len[at(no_key)]);
  if (s.has(ATTNCHECK_FEATURE_PADDING)) {
    if (c.key_len.empty()) c.key_len.assign(static_cast<std::size_t>(c.b), c.lk);
    c.key_len[at(no_key)] = 0;
    c.key_len[at(both)] = std::max<std::int64_t>(1, c.key_len[at(both)]);
  }
  if (c.variants.has_bias()) c.variants.bias_shape[0] = 1;
  if (c.form.paged()) {
    const std::int64_t pages = (c.lk + c.form.page_size - 1) / c.form.page_size;
    c.form.shared_pages = std::min(c.form.shared_pages, pages);
  }
}

namespace {

// The sequences keep of a case (the mask's batch dim gathered; the bias is
// broadcast over the batch by prepare_zero_length).
attn_case keep_sequences(const attn_case& c, const std::vector<std::int64_t>& keep) {
  attn_case r = c;
  r.b = static_cast<std::int64_t>(keep.size());
  const auto at = [](std::int64_t b) { return static_cast<std::size_t>(b); };
  if (!c.key_len.empty()) {
    r.key_len.clear();
    for (std::int64_t b : keep) r.key_len.push_back(c.key_len[at(b)]);
  }
  if (!c.form.q_len.empty()) {
    r.form.q_len.clear();
    for (std::int64_t b : keep) r.form.q_len.push_back(c.form.q_len[at(b)]);
  }
  if (c.has_mask() && c.mask_shape[0] != 1) {
    const std::int64_t per = c.mask_shape[1] * c.mask_shape[2] * c.mask_shape[3];
    r.mask_shape[0] = r.b;
    r.mask.clear();
    for (std::int64_t b : keep) r.mask.insert(r.mask.end(), c.mask.begin() + b * per, c.mask.begin() + (b + 1) * per);
  }
  const auto gather = [&](const tensor& t) {
    return remake(t.type, {r.b, t.shape[1], t.shape[2], t.shape[3]}, c.layout,
                  [&](auto b, auto j, auto g, auto x) { return t.bits_at(keep[at(b)], j, g, x); });
  };
  r.q = gather(c.q), r.k = gather(c.k), r.v = gather(c.v);
  return r;
}

}  // namespace

// A batch with sequences of zero queries and of zero keys: the rows that see
// no key (those of the sequence without keys, and any other) are O = 0 and
// LSE = -inf exactly (a head with a finite sink: O = 0, its LSE is left to
// the other laws); the sequences with queries and keys get the rows of the
// same batch without the empty sequences, bit for bit when a packed sequence
// is claimed to give its batch-of-one bits, else within the bound
// (docs/spec.md "Zero-length sequences"). Writes outside the rows a sequence
// owns are the host's guard report.
law_outcome zero_length_sequences_are_inert(const subject& s, const attn_case& c) {
  law_outcome o;
  const auto out = s.attend(c);
  if (run_failed(out, o, "ragged form")) return o;
  comparison z;
  const bool any_empty = empty_rows_are_zero(c, out, z);
  if (any_empty) o.add("rows that see no key", z);
  std::vector<std::int64_t> keep;
  for (std::int64_t b = 0; b < c.b; ++b)
    if (c.queries(b) > 0 && c.valid_keys(b) > 0) keep.push_back(b);
  if (keep.empty() || static_cast<std::int64_t>(keep.size()) == c.b) {
    if (!any_empty) o.nothing_to_judge("no empty sequence and no row without keys");
    return o;
  }
  const attn_case alone = keep_sequences(c, keep);
  const auto rest = s.attend(alone);
  if (run_failed(rest, o, "the batch without its empty sequences")) return o;
  subject_output mine;
  mine.empty_rows = out.empty_rows;
  mine.o = remake(c.type, {alone.b, c.lq, c.hq, c.dv}, c.layout,
                  [&](auto b, auto i, auto h, auto e) { return out.o.bits_at(keep[static_cast<std::size_t>(b)], i, h, e); });
  if (!out.lse.empty())
    for (std::int64_t b : keep)
      mine.lse.insert(mine.lse.end(), out.lse.begin() + b * c.hq * c.lq, out.lse.begin() + (b + 1) * c.hq * c.lq);
  const auto rows = [&alone](std::int64_t b, std::int64_t, std::int64_t i) { return alone.row_in_problem(b, i); };
  attn_case dense = alone;
  dense.form = input_form{};
  const std::string what = std::to_string(keep.size()) + " of " + std::to_string(c.b) +
                           " sequences against the batch without the empty ones" + (c.form.paged() ? " (K, V paged)" : "");
  if (s.claims_v3(ATTNCHECK_CLAIM3_RAGGED_EQUALS_DENSE)) {
    o.add(what + " (claimed bit for bit)", rows_bitwise(dense, rest, mine, rows));
  } else {
    within_bounds_options opt;
    opt.keep = rows;
    const oracle_result ref = fast_bound(s, dense);
    o.add(what, compare_within_bounds(dense, mine, ref, rest, ref, opt));
  }
  return o;
}

std::string declares_ragged(const subject& s) {
  return s.has_v3(ATTNCHECK_FEATURE3_RAGGED) ? "" : "subject does not declare ragged batches (ATTNCHECK_FEATURE3_RAGGED)";
}

}  // namespace attncheck::laws

namespace attncheck {

void draw_input_form(attn_case& c, const subject& s, const std::string& form) {
  if (form == "paged") {
    if (const std::string why = laws::declares_paged(s); !why.empty()) throw input_error("--form", "paged: " + why);
    laws::prepare_paged(c, s);
  } else if (form == "ragged") {
    if (const std::string why = laws::declares_ragged(s); !why.empty()) throw input_error("--form", "ragged: " + why);
    laws::prepare_ragged(c, s);
  } else {
    throw input_error("--form", "'" + form + "' is not one of paged, ragged");
  }
}

}  // namespace attncheck

namespace attncheck::laws {}  // namespace attncheck::laws
