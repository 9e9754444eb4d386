// A backward run in the bound's class (docs/bound.md, "Backward"): what the
// bound takes from a subject's declaration, and what the subject is handed.
// Shared by the backward laws and `attncheck campaign --backward`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attncheck/backward_oracle.hpp"
#include "attncheck/case.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {

/// The backward bound's parameters a subject declares for case c: its compute
/// unit roundoff, exp ulps and backward_blocks.
backward_bound_params backward_bound_for(const subject& s, const attn_case& c);

/// What a backward subject is handed: O (dense (B, Lq, Hq, Dv) doubles, as
/// backward_result::o) rounded once to the storage type in c's layout, LSE
/// ((B, Hq, Lq)) rounded to f32, and dO.
backward_inputs handed_inputs(const attn_case& c, const std::vector<double>& o, const std::vector<double>& lse,
                              const tensor& d_o);

/// The name of a gradient element, as every backward verdict prints it:
/// gradient g (0 dQ, 1 dK, 2 dV) at dense index (x0, x1, x2, x3) of its
/// shape, e.g. "dK[b=0,j=3,g=1,d=2]"; and "dSink[h=1]".
std::string gradient_where(int g, std::int64_t x0, std::int64_t x1, std::int64_t x2, std::int64_t x3);
std::string sink_where(std::int64_t h);

}  // namespace attncheck
