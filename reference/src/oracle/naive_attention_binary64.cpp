// Instantiates the oracle's loops in plain double: cost comparison and fast
// bound-only use, never the oracle (its errors are of the size it would judge).
#include "naive_attention.hpp"

namespace attncheck::oracle_detail {
template naive_result<double> naive_attention(const attn_case&);
}  // namespace attncheck::oracle_detail
