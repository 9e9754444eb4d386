// Instantiates the backward oracle's loops for its one precision, mpfr50.
#include "naive_backward.hpp"

namespace attncheck::oracle_detail {
template naive_grads<mpfr50> naive_backward(const attn_case&, const tensor&, const naive_result<mpfr50>&);
}  // namespace attncheck::oracle_detail
