// The real types the oracle runs in, and which translation unit instantiates
// each (Boost.Multiprecision compiles slowly: one instantiation, one place).
#pragma once

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/multiprecision/mpfr.hpp>

#include "naive_attention.hpp"

namespace attncheck::oracle_detail {

/// Default oracle type: MPFR, 50 decimal digits (168 bits), exp/log correctly
/// rounded. Stack storage: the same arithmetic as mpfr_float_50 without a heap
/// allocation per temporary; 10-75% faster in our runs (docs/oracle.md, Cost).
using mpfr50 = boost::multiprecision::static_mpfr_float_50;
/// Self-check: the same library at twice the precision.
using mpfr100 = boost::multiprecision::mpfr_float_100;
/// Self-check: another backend (its own exp/log), 100 decimal digits.
using cpp_bin100 = boost::multiprecision::cpp_bin_float_100;

}  // namespace attncheck::oracle_detail

// Instantiated in naive_attention_mpfr.cpp, naive_attention_cpp_bin.cpp and
// naive_attention_binary64.cpp.
extern template attncheck::oracle_detail::naive_result<attncheck::oracle_detail::mpfr50>
attncheck::oracle_detail::naive_attention(const attncheck::attn_case&);
extern template attncheck::oracle_detail::naive_result<attncheck::oracle_detail::mpfr100>
attncheck::oracle_detail::naive_attention(const attncheck::attn_case&);
extern template attncheck::oracle_detail::naive_result<attncheck::oracle_detail::cpp_bin100>
attncheck::oracle_detail::naive_attention(const attncheck::attn_case&);
extern template attncheck::oracle_detail::naive_result<double> attncheck::oracle_detail::naive_attention(
    const attncheck::attn_case&);
