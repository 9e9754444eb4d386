// A plain double-precision attention straight from SPEC.md, with the SPEC
// first-order error bound for the kernel's declared exp ulps and nb. Used
// where the multiprecision oracle would be too slow (large D, many heads).
#pragma once

#include <vector>

#include "support.hpp"

namespace attnimpl_test {

struct naive_result {
  std::vector<double> o, bound;  // (b, i, h, e)
  std::vector<double> lse;       // (b, h, i)
};

/// nb and c_exp come from the kernel's own declarations (key_blocks, exp_ulps).
naive_result naive_attention(const problem& p, const attnimpl::config& cfg);

}  // namespace attnimpl_test
