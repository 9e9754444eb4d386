// Q, K and V of a case decoded once into dense double arrays, so the bound and
// the fast tier read contiguous memory instead of decoding strided storage per
// element. Decoding is exact (f32, f16 and bf16 are subsets of double), so
// every sum formed from these arrays equals the one formed from tensor::at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attncheck/case.hpp"

namespace attncheck::oracle_detail {

struct dense_inputs {
  std::int64_t d = 0, dv = 0;
  std::vector<double> q;  ///< (B, Lq, Hq, D): row (b, i, h) at q_row()
  std::vector<double> k;  ///< (B, Hkv, Lk, D): a KV head's keys are contiguous
  std::vector<double> v;  ///< (B, Hkv, Lk, Dv)
  /// Per key (B, Hkv, Lk): sum_d |K_jd| and max_d |K_jd| (the bound's underflow
  /// and overflow terms), summed in d order.
  std::vector<double> k_abs_sum, k_abs_max;

  const double* q_row(const attn_case& c, std::int64_t bi, std::int64_t i, std::int64_t h) const {
    return &q[static_cast<std::size_t>(((bi * c.lq + i) * c.hq + h) * d)];
  }
  /// First key of KV head g in batch element bi; key j is at + j * d.
  std::size_t key_base(const attn_case& c, std::int64_t bi, std::int64_t g) const {
    return static_cast<std::size_t>((bi * c.hkv + g) * c.lk);
  }
};

/// Decodes every element of Q, K and V (masked slots included: decoding does
/// no arithmetic, and only visible pairs are ever read afterwards).
dense_inputs decode_dense(const attn_case& c);

/// The visible keys of row (bi, h, i) in increasing order, into keys.
void visible_keys(const attn_case& c, std::int64_t bi, std::int64_t h, std::int64_t i, std::vector<std::int64_t>& keys);

}  // namespace attncheck::oracle_detail
