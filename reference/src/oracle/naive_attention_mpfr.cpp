// Instantiates the oracle's loops for MPFR at 50 (default) and 100 digits.
#include "oracle_backends.hpp"

namespace attncheck::oracle_detail {
template naive_result<mpfr50> naive_attention(const attn_case&);
template naive_result<mpfr100> naive_attention(const attn_case&);
}  // namespace attncheck::oracle_detail
