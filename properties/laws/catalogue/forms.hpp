// The drawing of contract 1.2's input forms, shared by the paged, page_table
// and ragged law groups (paged.cpp defines them).
#pragma once

#include <cstdint>
#include <string>

#include "law_support.hpp"

namespace attncheck::laws {

/// Sets the batch to nb sequences (key counts, full-batch mask and bias dims follow).
void set_batch(attn_case& c, std::int64_t nb, law_rng& rng);
/// Batches of 16 to 64 sequences in a quarter of the cases (within
/// run_default::variant_max_work), and in half (with key padding) key counts
/// mixing zero, one and long sequences.
void draw_sequences(attn_case& c, const subject& s, law_rng& rng);
/// The one drawing of a paged form: the sequences (unless the caller drew
/// them), a page size, order, spare pages, table tail, shared prefix.
void draw_paged_form(attn_case& c, const subject& s, std::uint64_t salt, bool with_sequences = true);
/// The paged laws' preparation (a subject declaring paged K/V), and their applicability.
void prepare_paged(attn_case& c, const subject& s);
std::string declares_paged(const subject& s);
/// Pages in the arena the host builds for a paged case: the logical pages
/// (the shared prefix once) and the spare ones.
std::int64_t arena_pages(const attn_case& c);

}  // namespace attncheck::laws
