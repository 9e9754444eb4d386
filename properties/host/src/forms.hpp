// The call adapter of contract 1.2's input forms (docs/spec.md "Paged KV",
// "Ragged batches"): a case in the paged or ragged form handed to attend.
#pragma once

#include "attncheck/case.hpp"
#include "attncheck/subject.h"
#include "attncheck/subject_host.hpp"

namespace attncheck::host {

// A call in the paged or ragged form. O and LSE come back in the usual dense
// form (O in the case's layout, LSE (B, Hq, Lq)); the dense rows that are not
// part of a ragged problem hold the host's NaN sentinel, as an unwritten row does.
// With `masked_by_zero` (the subject weights masked slots by zero) the paged
// arena's unreached slots hold the finite fill (masked_fill.hpp), not a NaN canary.
subject_output attend_in_form(const attncheck_instance& inst, const attn_case& c, const call_layout& how, bool want_lse,
                              bool masked_by_zero);

}  // namespace attncheck::host
