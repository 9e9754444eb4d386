// Instantiates the oracle's loops for cpp_bin_float_100, the self-check backend
// that shares no code with MPFR.
#include "oracle_backends.hpp"

namespace attncheck::oracle_detail {
template naive_result<cpp_bin100> naive_attention(const attn_case&);
}  // namespace attncheck::oracle_detail
