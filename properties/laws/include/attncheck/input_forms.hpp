// Contract 1.2's input forms as the laws draw them (docs/spec.md "Paged KV",
// "Ragged batches"), for the campaign's --form.
#pragma once

#include <string>

#include "attncheck/case.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {

/// "paged" or "ragged": puts a generated case in that form as the laws
/// paged.placement_changes_nothing and ragged.equals_dense_per_sequence
/// draw it: page sizes, boundaries, table tails, spare and shared pages;
/// zero, one and long sequences, up to 64 of them (paged.equals_dense's
/// long-context decodes left out: the campaign's oracle may fall back to
/// MPFR on them). Before materialize(). Throws input_error
/// (field "--form") for another name or a subject that does not declare the form.
void draw_input_form(attn_case& c, const subject& s, const std::string& form);

}  // namespace attncheck
