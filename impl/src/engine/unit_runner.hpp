// One work unit (batch, KV head, query tile) through its key blocks: the class;
// its parts are defined in rows.hpp (query rows), blocks.hpp (key blocks),
// scores.hpp (Q K^T), softmax.hpp (online softmax, rescale, merge, output)
// and values.hpp (P.V).
// Part of engine/kernel.hpp, included there only: everything stays in its anonymous
// namespace (one translation unit, the same inlining as one file).
#pragma once

#include <algorithm>
#include <cmath>

#include "../convert.hpp"
#include "../mutation.hpp"
#include "../lanes.hpp"
#include "state.hpp"

namespace attnimpl::engine {
namespace {

/// A row's score variants over one block (contract 1.1: S = softcap(x) +
/// m_h (j - p) + Bias), applied to score vectors by lane offset c.
struct score_terms {
  bool softcap = false, cap_first = true, alibi = false;
  float cap = 0.0f, slope = 0.0f;
  std::int64_t rel = 0;         // j - p of lane 0
  const float* bias = nullptr;  // lane 0's entry; null: no bias
  std::int64_t bias_lanes = 0;  // lanes [0, bias_lanes) may be read

  /// Bias lanes [c, c + n); those past bias_lanes read as 0 (masked lanes).
  template <int N>
  void bias_tail(std::int64_t c, float* out) const {
    for (int x = 0; x < N; ++x) out[x] = c + x < bias_lanes ? bias[c + x] : 0.0f;
  }

  /// The terms of lanes c .. c + L::n - 1 added to x (ALiBi's j - p exact:
  /// lane offsets below 16 added to an integer below 2^24 in magnitude), the
  /// same operations lane by lane at either width.
  template <class L>
  typename L::v apply(typename L::v x, std::int64_t c) const {
    const typename L::v capv = L::set1(cap);
    if (softcap && cap_first) x = L::mul(capv, simd::tanh_lanes<L>(L::div(x, capv)));
    if (alibi) x = L::add(x, L::mul(L::set1(slope), L::add(L::set1(static_cast<float>(rel + c)), L::iota())));
    if (bias) {
      if (c + L::n <= bias_lanes) {
        x = L::add(x, L::load(bias + c));
      } else {
        float t[L::n];
        bias_tail<L::n>(c, t);
        x = L::add(x, L::load(t));
      }
    }
    if (softcap && !cap_first) x = L::mul(capv, simd::tanh_lanes<L>(L::div(x, capv)));
    return x;
  }
};

class unit_runner {
 public:
  unit_runner(const problem& p, const geometry& g, workspace& ws) : p_(p), g_(g), ws_(ws) {}

  unit_rows setup(std::int64_t u);

  void chunk(const unit_rows& ur, std::int64_t c0, std::int64_t c1, const row_state& st);

  void finish(const unit_rows& ur, const row_state& st);

  void fold(const unit_rows& ur, const row_state& total, const row_state& part, bool first);

 private:
#ifdef ATTNIMPL_MUTATION
  /// mean(V) over the keys of the batch element (mutant masked_row_mean).
  void mean_values(const unit_rows& ur, float* out) {
    float* row = ws_.tmp.data() + g_.dv8;
    for (std::int64_t j = 0; j < ur.keys; ++j) {
      convert::load_row(row,
                        static_cast<const char*>(p_.kv.v) + p_.kv.v_offset(ur.b, ur.kv_head, j) * convert::size_of(p_.kv.type),
                        p_.kv.type, p_.kv.vs[3], p_.dims.dv);
      for (std::int64_t e = 0; e < p_.dims.dv; ++e) out[e] += row[e] / static_cast<float>(ur.keys);
    }
  }
  /// Row r's sum taken over the unit's query positions of its head (mutant softmax_wrong_axis).
  float query_axis_sum(const unit_rows& ur, const row_state& st, std::int64_t r) {
    float sum = 0.0f;
    for (std::int64_t x = r % g_.group; x < ur.rows; x += g_.group)
      if (st.m[x] != neg_inf) sum += st.l[x] * simd::exp1(st.m[x] - st.m[r]);
    return sum;
  }
  /// kv head = h / Hkv, for the group's last query head (clamped: the real
  /// bug reads past the last KV head) (mutant gqa_wrong_divisor).
  std::int64_t load_head(const unit_rows& ur) const {
    if (ATTNIMPL_MUTANT(gqa_wrong_divisor))
      return std::min(p_.dims.hkv - 1, (ur.kv_head * g_.group + g_.group - 1) / p_.dims.hkv);
    return ur.kv_head;
  }
#else
  std::int64_t load_head(const unit_rows& ur) const { return ur.kv_head; }
  void mean_values(const unit_rows&, float*) {}
  float query_axis_sum(const unit_rows&, const row_state& st, std::int64_t r) { return st.l[r]; }
#endif

  std::int64_t classify(const unit_rows& ur, std::int64_t j0, std::int64_t kc);

  const float* bias_of(const unit_rows& ur, std::int64_t r, std::int64_t j0, std::int64_t from, std::int64_t to);

  score_terms terms_of(std::int64_t r, std::int64_t j0) const;

  bool sees_any(std::int64_t r0, std::int64_t nr) const;

  /// Rows of at most this many (decode: the G heads of one position) take
  /// their scores straight from the caller's K rows (direct_scores); more
  /// rows share one transposed copy of the block (pack_k, scores).
  static constexpr std::int64_t direct_rows = 8;

  void locate(const unit_rows& ur, std::int64_t j0, std::int64_t count, const char** k, const char** v) const;

  void pack_k(std::int64_t kpack);

  dtype pack_v(const unit_rows& ur, std::int64_t kpack);

  void direct_scores(const unit_rows& ur, std::int64_t kpack, std::int64_t next);

  template <dtype T>
  void direct_scores_as(const unit_rows& ur, std::int64_t kpack, std::int64_t next);

  /// Rows of the next block to request while a group of keys computes.
  struct prefetch_set {
    const char* const* k;
    const char* const* v;
    std::int64_t count, kbytes, vbytes;
  };

  template <int NR, dtype T>
  void score_group(const char* const rows_in[8], std::int64_t r0, std::int64_t jj, const prefetch_set& pf);

  /// K stored keys-across (key stride 1: the cache's pages, a caller's K^T):
  /// scores with no transpose (across_scores), 16 keys per pass.
  void across_scores(const unit_rows& ur, std::int64_t kpack, std::int64_t next);

  template <dtype T>
  void across_scores_as(const unit_rows& ur, std::int64_t kpack, std::int64_t next);

  /// The next block's lines one pass of across_scores requests: K of its 16
  /// keys (k1 null when k0's lines hold them), V rows v[0 .. v_rows).
  struct across_prefetch {
    const char* k0;
    const char* k1;
    std::int64_t k_every;
    const char* const* v;
    std::int64_t v_rows, vbytes;
  };

  template <int NR, dtype T, bool TWO>
  void across_group(const char* a, std::int64_t sa, const char* b, std::int64_t sb, std::int64_t r0, std::int64_t jj,
                    const across_prefetch& pf);

  const char* key_group(std::int64_t j, std::int64_t kpack, char* gather, std::int64_t& stride) const;

  template <int NR>
  void score_rows(std::int64_t r0);

  /// Rows [begin, end) of the unit; begin a multiple of 4 (P.V's row groups).
  struct row_range {
    std::int64_t begin, end;
  };

  /// Row r's scores of the block: every slice reuses the first slice's rows.
  float* score_row(std::int64_t r) const { return ws_.s.data() + r % slice_rows * g_.k_tile8; }

  void scores(row_range rr);

  void softmax(row_range rr, const row_state& st, std::int64_t j0);

  template <dtype T, int NR, int NE>
  void values_block(std::int64_t r0, std::int64_t e0, std::int64_t k0, std::int64_t k1, const row_state& st);

  template <dtype T>
  void weighted_values(row_range rr, std::int64_t kpack, const row_state& st);

  template <dtype T>
  void values_wide(std::int64_t nr, std::int64_t ne, std::int64_t r0, std::int64_t e0, std::int64_t k0, std::int64_t kc,
                   const row_state& st);

  template <dtype T>
  void values_dispatch(std::int64_t nr, std::int64_t ne, std::int64_t r0, std::int64_t e0, std::int64_t k0, std::int64_t kc,
                       const row_state& st);

  const problem& p_;
  const geometry& g_;
  workspace& ws_;
};

}  // namespace
}  // namespace attnimpl::engine
