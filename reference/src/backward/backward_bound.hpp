// The a-priori per-element bound of dQ, dK and dV (docs/bound.md, "Backward"),
// evaluated from the MPFR backward oracle's values. Private to reference/.
#pragma once

#include "../oracle/oracle_backends.hpp"
#include "attncheck/backward_oracle.hpp"
#include "attncheck/case.hpp"

namespace attncheck::oracle_detail {

/// Throws input_error naming the field of an invalid declaration.
void check_backward_bound_params(const backward_bound_params& bp);

/// Fills r.dq_bound, r.dk_bound and r.dv_bound (shapes of r.dq, r.dk, r.dv)
/// for a validated contract 1.0 case, its dO and the forward oracle's mpfr50
/// result `fwd` (naive_attention(c)), for a subject of the class of
/// docs/bound.md "Backward" declaring bp. r.dq, r.dk and r.dv must be filled.
/// handed: the errors of the O and LSE the subject is handed, sizes checked;
/// nullptr for the oracle's rounded once to the storage type and to f32.
void fill_backward_bounds(const attn_case& c, const tensor& d_o, const naive_result<mpfr50>& fwd, const backward_bound_params& bp,
                          backward_result& r, const backward_handed_errors* handed = nullptr);

}  // namespace attncheck::oracle_detail
