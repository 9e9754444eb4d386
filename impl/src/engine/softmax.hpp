// Online softmax: a chunk of key blocks, the masked max and sum with the
// rescale on a rising max, the merge of split chunks by LSE, and O and LSE out.
// Part of engine/kernel.hpp, included there only: everything stays in its anonymous
// namespace (one translation unit, the same inlining as one file).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "../convert.hpp"
#include "../mutation.hpp"
#include "../lanes.hpp"
#include "unit_runner.hpp"

namespace attnimpl::engine {
namespace {

/// Online softmax of the unit's rows over keys [c0, c1) into st.
inline void unit_runner::chunk(const unit_rows& ur, std::int64_t c0, std::int64_t c1, const row_state& st) {
  reset_state(st, g_, ur.rows);
  std::int64_t end = std::min({c1, ur.max_hi, ur.keys});
  if (ATTNIMPL_MUTANT(split_boundary_key_dropped)) end = std::min({c1 - 1, ur.max_hi, ur.keys});
  // Blocks wholly before every row's window or chunk are never visited (nor
  // loaded): the walk starts at the block holding the first key any row sees.
  const std::int64_t start = ur.min_lo > c0 ? c0 + (ur.min_lo - c0) / g_.k_tile * g_.k_tile : c0;
  for (std::int64_t j0 = start; j0 < end; j0 += g_.k_tile) {
    const std::int64_t kc = std::min(g_.k_tile, end - j0);
    const std::int64_t kpack = classify(ur, j0, kc);
    if (kpack == 0) continue;
    locate(ur, j0, kpack, ws_.krows.data(), ws_.vsrc.data());
    // The next block may lie in the next chunk: the same unit reads it next
    // unless split-KV hands that chunk to another thread.
    const std::int64_t next = std::clamp<std::int64_t>(std::min(ur.max_hi, ur.keys) - j0 - g_.k_tile, 0, g_.k_tile);
    if (next > 0) locate(ur, j0 + g_.k_tile, next, ws_.knext.data(), ws_.vnext.data());
    const dtype vt = pack_v(ur, kpack);
    const bool packed = !(ur.rows <= direct_rows && (p_.kv.ks[3] == 1 || p_.kv.ks[1] == 1));
    if (!packed && p_.kv.ks[3] == 1) {
      direct_scores(ur, kpack, next);
    } else if (!packed) {
      across_scores(ur, kpack, next);
    } else {
      pack_k(kpack);
      prefetch_keys(p_.kv, ws_.knext.data(), next, p_.dims.d);
      prefetch_rows(ws_.vnext.data(), next, p_.dims.dv * p_.kv.vs[3] * convert::size_of(p_.kv.type));
    }
    // The rest of the block a slice of rows at a time: one packed K and V
    // serve every slice, and a slice's scores stay in L1/L2 from the score
    // kernel through the softmax to P.V.
    for (std::int64_t rb = 0; rb < ur.rows; rb += slice_rows) {
      const row_range rr{rb, std::min(ur.rows, rb + slice_rows)};
      if (packed) scores(rr);
      softmax(rr, st, j0);
      with_dtype(
          vt, [&](auto t) __attribute__((always_inline)) { weighted_values<decltype(t)::value>(rr, kpack, st); });
    }
    if (ATTNIMPL_MUTANT(low_precision_acc))  // the accumulator kept in bf16
      for (std::int64_t x = 0; x < ur.rows * g_.dv8; ++x) st.acc[x] = convert::from_bf16(convert::to_bf16(st.acc[x]));
  }
}

/// Masks scores by selection (never arithmetic), updates max and sum,
/// rescales on a rising max, leaves P in the score buffer.
inline void unit_runner::softmax(row_range rr, const row_state& st, std::int64_t j0) {
  const std::int64_t ld = g_.k_tile8;
  const simd::vf ninf = simd::set1(neg_inf);
  const bool variant_scores = p_.var.softcap > 0.0f || p_.var.alibi || p_.var.bias.data;
  for (std::int64_t r = rr.begin; r < rr.end; ++r) {
    if (ws_.kind[r] == row_kind::none) continue;
    float* s = score_row(r);
    const std::uint8_t* vis = ws_.vis.data() + r * ld;
    simd::vf mx = ninf;
    // Rows that see keys [0, prefix) need no per-lane mask there; lanes past
    // it (holes, keys beyond the block, padding lanes) are selected to -inf.
    // The variants' terms are applied in the same pass, to lanes [0, cols)
    // (those past every visible key are masked anyway); the max is taken 8
    // lanes at a time in lane order on every path.
    const std::int64_t whole = ws_.prefix[r] / 8 * 8;
    const std::int64_t cols = variant_scores ? round8(ws_.reach[r]) : 0;
    const score_terms terms = variant_scores ? terms_of(r, j0) : score_terms{};
    std::int64_t c = 0;
#if ATTNIMPL_ISA_AVX512
    const simd::vf16 ninf16 = simd::set1_16(neg_inf);
    for (; c + 16 <= whole; c += 16) {
      simd::vf16 x = simd::load16(s + c);
      if (variant_scores) {
        x = terms.apply<simd::lanes16>(x, c);
        simd::store16(s + c, x);
      }
      mx = simd::max_halves(mx, x);
    }
#endif
    for (; c < whole; c += 8) {
      simd::vf x = simd::load(s + c);
      if (variant_scores) {
        x = terms.apply<simd::lanes8>(x, c);
        simd::store(s + c, x);
      }
      mx = simd::max(mx, x);
    }
#if ATTNIMPL_ISA_AVX512
    for (; c + 16 <= ld; c += 16) {
      simd::vf16 x = simd::load16(s + c);
      if (c < cols) x = terms.apply<simd::lanes16>(x, c);
      x = simd::select_flagged16(vis + c, x, ninf16);
      simd::store16(s + c, x);
      mx = simd::max_halves(mx, x);
    }
#endif
    for (; c < ld; c += 8) {
      simd::vf x = simd::load(s + c);
      if (c < cols) x = terms.apply<simd::lanes8>(x, c);
      x = simd::select_flagged(vis + c, x, ninf);
      simd::store(s + c, x);
      mx = simd::max(mx, x);
    }
    const float mb = simd::hmax(mx);
    const float m_old = st.m[r];
    float m_new = mb > m_old ? mb : m_old;
    if (m_new == neg_inf) {
      // No finite maximum: every visible score is -inf (all weights 0), or
      // NaN (a NaN in a visible Q or K), which max_ps can drop. A NaN score
      // makes the row NaN (docs/spec.md: a non-finite visible input gives a
      // non-finite row, never finite garbage); the NaN maximum carries it
      // through later blocks, the merge and the final division.
      bool nan_score = false;
      for (std::int64_t c = 0; c < ld; ++c) nan_score = nan_score || std::isnan(s[c]);
      // Otherwise visible keys whose scores are all -inf (an infinite Q or
      // K element): they weigh 0 if a finite score comes later, else
      // exp(-inf - -inf) makes the whole row NaN. m stays -inf; a NaN l
      // marks the row (finish, fold); the first finite score clears it.
      if (nan_score)
        st.m[r] = std::numeric_limits<float>::quiet_NaN();
      else
        st.l[r] = std::numeric_limits<float>::quiet_NaN();
      ws_.kind[r] = row_kind::none;
      ws_.prefix[r] = 0;  // its scores must not reach the P.V kernel
      continue;
    }
    if (ATTNIMPL_MUTANT(no_max_shift)) m_new = 0.0f;  // p = exp(s)
    float* acc = st.acc + r * g_.dv8;
    if (m_new > m_old) {
      if (m_old == neg_inf) st.l[r] = 0.0f;  // drops the all -inf mark: those keys weigh 0
      if (m_old != neg_inf) {
        float alpha = simd::exp1(m_old - m_new);
        if (ATTNIMPL_MUTANT(rescale_inverted)) alpha = simd::exp1(m_new - m_old);
        const simd::vf av = simd::set1(alpha);
        for (std::int64_t e = 0; e < g_.dv8 && !ATTNIMPL_MUTANT(rescale_skipped); e += 8)
          simd::store(acc + e, simd::mul(simd::load(acc + e), av));
        if (!ATTNIMPL_MUTANT(rescale_sum_skipped)) st.l[r] *= alpha;
      }
      st.m[r] = m_new;
    }
    const simd::vf mv = simd::set1(m_new);
    simd::vf sum = simd::zero();
    c = 0;
#if ATTNIMPL_ISA_AVX512
    // 16 scores per exp, the sum still taken 8 lanes at a time in order.
    const simd::vf16 mw = _mm512_set1_ps(m_new), nw = _mm512_set1_ps(neg_inf);
    for (; c + 16 <= ld; c += 16) {
      const simd::vf16 x = simd::load16(s + c);
      const __mmask16 live = _mm512_cmp_ps_mask(x, nw, _CMP_NEQ_UQ);
      const simd::vf16 pv = _mm512_maskz_mov_ps(live, simd::exp16(_mm512_sub_ps(x, mw)));
      simd::store16(s + c, pv);
      sum = simd::add(sum, simd::low8(pv));
      sum = simd::add(sum, simd::high8(pv));
    }
#endif
    for (; c < ld; c += 8) {
      const simd::vf x = simd::load(s + c);
      const simd::vm live = simd::not_equal(x, ninf);
      const simd::vf pv = simd::keep(simd::exp8(simd::sub(x, mv)), live);
      simd::store(s + c, pv);
      sum = simd::add(sum, pv);
    }
    st.l[r] += simd::hsum(sum);
  }
}

/// total <- merge(total, part) for every row, by LSE; fixed operation order.
inline void unit_runner::fold(const unit_rows& ur, const row_state& total, const row_state& part, bool first) {
  for (std::int64_t r = 0; r < ur.rows; ++r) {
    float* ta = total.acc + r * g_.dv8;
    const float* pa = part.acc + r * g_.dv8;
    const float mp = part.m[r];
    if (first || total.m[r] == neg_inf) {
      // Both without a finite score: the all -inf mark (NaN l) of either side.
      const bool marked = !first && std::isnan(total.l[r]) && mp == neg_inf;
      total.m[r] = mp;
      total.l[r] = marked ? total.l[r] : part.l[r];
      std::copy(pa, pa + g_.dv8, ta);
      continue;
    }
    if (mp == neg_inf) continue;
    const float mt = total.m[r];
    float mn = mp > mt ? mp : mt;
    if (ATTNIMPL_MUTANT(merge_min_not_max)) mn = mp < mt ? mp : mt;
    float a = simd::exp1(mt - mn), c = simd::exp1(mp - mn);
    if (ATTNIMPL_MUTANT(merge_unscaled)) a = c = 1.0f;
    const simd::vf av = simd::set1(a), cv = simd::set1(c);
    for (std::int64_t e = 0; e < g_.dv8; e += 8)
      simd::store(ta + e, simd::fmadd(simd::load(pa + e), cv, simd::mul(simd::load(ta + e), av)));
    total.l[r] = simd::fma1(part.l[r], c, total.l[r] * a);
    total.m[r] = mn;
    // mutant: each split-KV partial carried the sink in its sum, so the merge counts it once per extra chunk
    if (ATTNIMPL_MUTANT(sink_counted_per_split) && p_.var.sinks && p_.var.sinks[ws_.head[r]] != neg_inf)
      total.l[r] += simd::exp1(p_.var.sinks[ws_.head[r]] - mn);
  }
}

/// Writes O and LSE of the unit's rows from a final state.
inline void unit_runner::finish(const unit_rows& ur, const row_state& st) {
  const std::int64_t dv = p_.dims.dv;
  const std::int64_t osize = convert::size_of(p_.o.type);
  float* out = ws_.tmp.data();
  for (std::int64_t r = 0; r < ur.rows; ++r) {
    const std::int64_t h = ws_.head[r], i = ws_.pos[r];
    float m = st.m[r];
    float lse = neg_inf;
    // The sink (contract 1.1) joins the denominator once, merged after every
    // key as one more block with no value: the bound's nb + 1.
    bool sinks = p_.var.sinks && !ATTNIMPL_MUTANT(sinks_ignored);
    if (ATTNIMPL_MUTANT(sinks_decode_only)) sinks = sinks && p_.dims.lq == 1;  // prefill rows lose their sink
    const float sink = sinks ? p_.var.sinks[h] : neg_inf;
    float l_sink = st.l[r], a_sink = 1.0f;
    if (sink != neg_inf && m != neg_inf) {
      const float mn = sink > m ? sink : m;  // m NaN: stays NaN
      a_sink = simd::exp1(m - mn);
      l_sink = simd::fma1(st.l[r], a_sink, simd::exp1(sink - mn));
      m = mn;
    }
    if (m == neg_inf && std::isnan(st.l[r])) {
      // Visible keys, every score -inf: exp(-inf - -inf) is NaN, so is the row.
      std::fill(out, out + dv, std::numeric_limits<float>::quiet_NaN());
      lse = std::numeric_limits<float>::quiet_NaN();
    } else if (m == neg_inf && !ATTNIMPL_MUTANT(masked_row_nan)) {
      std::fill(out, out + dv, 0.0f);                              // no visible key: O = 0, LSE = -inf
      if (ATTNIMPL_MUTANT(masked_row_mean)) mean_values(ur, out);  // what a finite -1e9 fill gives
      if (ATTNIMPL_MUTANT(empty_row_lse_zero)) lse = 0.0f;
      lse = sink == neg_inf ? lse : sink;  // only the sink: LSE = sigma
    } else {
      const float* acc = st.acc + r * g_.dv8;
      float l_row = l_sink;
      if (ATTNIMPL_MUTANT(softmax_wrong_axis)) l_row = query_axis_sum(ur, st, r);
      const simd::vf l = simd::set1(l_row);
      if (a_sink != 1.0f) {
        const simd::vf av = simd::set1(a_sink);
        for (std::int64_t e = 0; e < g_.dv8; e += 8) simd::store(out + e, simd::div(simd::mul(simd::load(acc + e), av), l));
      } else {
        for (std::int64_t e = 0; e < g_.dv8; e += 8) simd::store(out + e, simd::div(simd::load(acc + e), l));
      }
      lse = m + std::log(l_sink);
      if (ATTNIMPL_MUTANT(lse_missing_max)) lse = std::log(l_sink);
    }
    char* dst = static_cast<char*>(p_.o.data) + (ur.b * p_.o.stride[0] + i * p_.o.stride[1] + h * p_.o.stride[2]) * osize;
    convert::store_row(dst, p_.o.type, p_.o.stride[3], out, dv);
    if (p_.lse.data) p_.lse.data[ur.b * p_.lse.stride[0] + h * p_.lse.stride[1] + i * p_.lse.stride[2]] = lse;
  }
}

}  // namespace
}  // namespace attnimpl::engine
