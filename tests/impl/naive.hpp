// The kernel's tests judge it by the suite's own oracle and error bound
// (reference/, docs/spec.md "The error bound"): the same bound the gate
// applies, with the kernel's declared exp ulps and key blocks, at the
// oracle's auto tier (binary64 wherever its own error is negligible next to
// the bound, which it then includes; MPFR elsewhere).
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "support.hpp"

namespace attnimpl_test {

struct naive_result {
  std::vector<double> o, bound;        // (b, i, h, e)
  std::vector<double> lse, lse_bound;  // (b, h, i)
};

/// The oracle's O, LSE and their bounds for this problem; nb and the exp ulps
/// come from the kernel's own declarations (key_blocks, exp_ulps).
naive_result naive_attention(const problem& p, const attnimpl::config& cfg);

/// Every element of p's O finite (NaN and inf fail before any bound) and
/// within its bound of ref.o: success, or the first element that is not,
/// with the case line, expected, got and bound.
testing::AssertionResult o_within_bound(const problem& p, const naive_result& ref);

}  // namespace attnimpl_test
