// attnimpl's backward (FlashAttention 2's algorithm, impl/src/backward) against
// the MPFR backward oracle within the backward bound, at the block counts it
// declares, with tiles that cross block boundaries and with the defaults.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/backward_oracle.hpp"
#include "attnimpl/backward.hpp"

namespace attncheck {
namespace {

attnimpl::dtype to_impl(dtype t) {
  return t == dtype::f32 ? attnimpl::dtype::f32 : t == dtype::f16 ? attnimpl::dtype::f16 : attnimpl::dtype::bf16;
}

// A strided input over a tensor's packed storage (kept alive by `bytes`).
attnimpl::tensor_in in_of(const tensor& t, std::vector<unsigned char>& bytes) {
  bytes = t.packed_storage();
  attnimpl::tensor_in x;
  x.data = bytes.data() + static_cast<std::size_t>(t.offset) * size_of(t.type);
  x.type = to_impl(t.type);
  for (int a = 0; a < 4; ++a) x.stride[a] = t.stride[a];
  return x;
}

// A dense output of `shape` in type t.
struct dense_out {
  dims4 shape;
  dtype type;
  std::vector<unsigned char> bytes;
  dense_out(dims4 s, dtype t) : shape(s), type(t), bytes(static_cast<std::size_t>(s[0] * s[1] * s[2] * s[3]) * size_of(t)) {}
  attnimpl::tensor_out view() {
    attnimpl::tensor_out x;
    x.data = bytes.data();
    x.type = to_impl(type);
    x.stride = {shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1};
    return x;
  }
  double at(std::size_t k) const {
    std::uint32_t u = 0;
    std::memcpy(&u, bytes.data() + k * size_of(type), size_of(type));
    return decode(type, u);
  }
};

// The backward arguments of case c as the host hands them: Q, K, V, O and dO
// staged (their bytes kept alive in `bytes`), LSE dense (B, Hq, Lq), the
// scale, causal, padding and the boolean mask; the outputs are the caller's.
struct staged_args {
  std::vector<unsigned char> q, k, v, o, d_o;
  std::vector<float> lse;
  attnimpl::backward_args a;
  staged_args(const attn_case& c, const tensor& o_in, std::vector<float> lse_in, const tensor& d_o_in) : lse(std::move(lse_in)) {
    a.dims = attnimpl::shape{c.b, c.hq, c.hkv, c.lq, c.lk, c.d, c.dv};
    a.q = in_of(c.q, q), a.k = in_of(c.k, k), a.v = in_of(c.v, v), a.o = in_of(o_in, o), a.d_o = in_of(d_o_in, d_o);
    a.lse = lse.data();
    a.lse_stride = {c.hq * c.lq, c.lq, 1};
    a.scale = c.effective_scale();
    a.causal = c.causal;
    if (c.has_padding()) a.key_len = c.key_len.data();
    if (c.has_mask()) {
      const auto& ms = c.mask_shape;
      const std::int64_t dense[4] = {ms[1] * ms[2] * ms[3], ms[2] * ms[3], ms[3], 1};
      a.mask.data = c.mask.data();
      for (int x = 0; x < 4; ++x) a.mask.stride[x] = ms[x] == 1 ? 0 : dense[x];
    }
  }
};

// Runs attnimpl's backward on case c with cfg, handed the oracle's O (in the
// storage type) and LSE (f32) from r, as the host hands them; returns false
// (with a test failure) when the call fails.
bool run_impl(const attn_case& c, const tensor& d_o, const backward_result& r, const attnimpl::backward_config& cfg,
              dense_out& dq, dense_out& dk, dense_out& dv) {
  tensor o = make_output(c);
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t e = 0; e < c.dv; ++e)
          o.set(bi, i, h, e, r.o[static_cast<std::size_t>(((bi * c.lq + i) * c.hq + h) * c.dv + e)]);
  staged_args staged(c, o, std::vector<float>(r.lse.begin(), r.lse.end()), d_o);
  attnimpl::backward_args& a = staged.a;
  a.dq = dq.view(), a.dk = dk.view(), a.dv = dv.view();
  const attnimpl::status st = attnimpl::attention_backward(a, cfg);
  EXPECT_TRUE(st.ok()) << st.message;
  return st.ok();
}

// The oracle's gradients of c with the bound at the block counts cfg
// declares and the kernel's declared exp accuracy.
backward_result oracle_for(const attn_case& c, const tensor& d_o, const attnimpl::backward_config& cfg) {
  const auto [dq_blocks, dkv_blocks] = attnimpl::backward_blocks(attnimpl::shape{c.b, c.hq, c.hkv, c.lq, c.lk, c.d, c.dv}, cfg);
  backward_bound_params bp;
  bp.exp_ulps = attnimpl::exp_ulps();
  bp.dq_blocks = dq_blocks;
  bp.dkv_blocks = dkv_blocks;
  return reference_backward(c, d_o, bp);
}

// Every element with a finite bound within it; returns how many were judged.
int judge(const attn_case& c, const backward_result& r, const attnimpl::backward_config& cfg, const dense_out& dq,
          const dense_out& dk, const dense_out& dv) {
  int judged = 0;
  const std::string line = to_line(c) + " q_tile=" + std::to_string(cfg.q_tile) + " k_tile=" + std::to_string(cfg.k_tile);
  const auto check = [&](const dense_out& got, const std::vector<double>& want, const std::vector<double>& bound,
                         const char* what) {
    for (std::size_t k = 0; k < want.size(); ++k) {
      if (std::isnan(bound[k]) || std::isinf(bound[k])) continue;
      ++judged;
      EXPECT_LE(std::fabs(got.at(k) - want[k]), bound[k]) << line << " " << what << " element " << k;
    }
  };
  check(dq, r.dq, r.dq_bound, "dQ");
  check(dk, r.dk, r.dk_bound, "dK");
  check(dv, r.dv, r.dv_bound, "dV");
  return judged;
}

// The case of a one-line form through the oracle and attnimpl's backward at
// cfg: the gradients returned, whether the call succeeded (a test failure
// when not) and how many of their elements the bound judged.
struct judged_run {
  attn_case c;
  tensor d_o;
  backward_result r;
  dense_out dq, dk, dv;
  bool ran;
  int judged;
  judged_run(const std::string& line, const attnimpl::backward_config& cfg)
      : c(materialized(line)),
        d_o(draw_grad_output(c, *c.grad)),
        r(oracle_for(c, d_o, cfg)),
        dq(r.dq_shape, c.type),
        dk(r.dk_shape, c.type),
        dv(r.dv_shape, c.type),
        ran(run_impl(c, d_o, r, cfg, dq, dk, dv)),
        judged(ran ? judge(c, r, cfg, dq, dk, dv) : 0) {}
  static attn_case materialized(const std::string& line) {
    attn_case c = parse_line(line);
    materialize(c);
    return c;
  }
};

// Every concatenation of one string from each list, the last list varying fastest.
std::vector<std::string> product(std::initializer_list<std::initializer_list<const char*>> lists) {
  std::vector<std::string> out{""};
  for (const auto& list : lists) {
    std::vector<std::string> longer;
    for (const std::string& head : out)
      for (const char* tail : list) longer.push_back(head + tail);
    out = std::move(longer);
  }
  return out;
}

// Each case line `stem,seed=N)` (N counting up from `seed`, one per run) run
// under each config and judged against the oracle's bound; `each` sees every
// run. Returns how many elements the bound judged.
template <class Each>
int judged_sweep(const std::vector<std::string>& stems, std::uint64_t seed, std::initializer_list<attnimpl::backward_config> cfgs,
                 Each each) {
  int judged = 0;
  for (const std::string& stem : stems)
    for (const attnimpl::backward_config& cfg : cfgs) {
      const judged_run run(stem + ",seed=" + std::to_string(seed++) + ")", cfg);
      EXPECT_TRUE(run.ran) << to_line(run.c);
      if (!run.ran) return judged;
      judged += run.judged;
      each(run, cfg);
    }
  return judged;
}

TEST(impl_backward, within_the_backward_bound_of_the_oracle) {
  const std::vector<std::string> stems =
      product({{"ATTN(b=2,hq=4,hkv=2,lq=5,lk=7,d=3,dv=2,causal,kpad=[7,4]", "ATTN(b=1,hq=3,hkv=1,lq=4,lk=9,d=4,dv=3,mask=1x3x4x9",
                "ATTN(b=1,hq=2,hkv=2,lq=1,lk=13,d=8,dv=5,scale=-0.5", "ATTN(b=1,hq=2,hkv=1,lq=6,lk=6,d=2,dv=2,causal"},
               {",f32", ",f16", ",bf16"},
               {",layout=bshd", ",layout=padded"},
               {",grad=dyadic", ",grad=normal", ",grad=adversarial"}});
  const int judged = judged_sweep(stems, 1, {attnimpl::backward_config{2, 3}, attnimpl::backward_config{}},
                                  [](const judged_run&, const attnimpl::backward_config&) {});
  EXPECT_GT(judged, 20000);
}

// Shapes past the register blocks and the production tiles: several key and
// query blocks of 64, row counts that leave a partial register block, head
// dimensions of more than one column chunk with a narrow tail (80 = 64 +
// 16 floats), causal diagonals and padded keys that make blocks partly
// visible, and a mask. Within the bound, and the same bits on every
// instruction set this CPU runs and at 1 and 3 threads.
TEST(impl_backward, larger_shapes_within_the_bound_and_the_same_bits_everywhere) {
  const std::vector<std::string> stems =
      product({{"ATTN(b=1,hq=2,hkv=1,lq=70,lk=67,d=20,dv=36,causal", "ATTN(b=2,hq=1,hkv=1,lq=13,lk=80,d=70,dv=9,kpad=[75,80]",
                "ATTN(b=1,hq=2,hkv=2,lq=66,lk=65,d=17,dv=16,mask=1x2x66x65", "ATTN(b=1,hq=1,hkv=1,lq=130,lk=20,d=8,dv=8,causal"},
               {",f32,grad=normal", ",bf16,grad=normal"}});
  const auto same_bits_everywhere = [](const judged_run& run, const attnimpl::backward_config& cfg) {
    for (const attnimpl::isa simd : {attnimpl::isa::portable, attnimpl::isa::avx2, attnimpl::isa::avx512})
      for (const int threads : {1, 3}) {
        if (!attnimpl::isa_supported(simd)) continue;
        attnimpl::backward_config other = cfg;
        other.simd = simd;
        other.threads = threads;
        dense_out dq2(run.r.dq_shape, run.c.type), dk2(run.r.dk_shape, run.c.type), dv2(run.r.dv_shape, run.c.type);
        const std::string what = to_line(run.c) + " simd " + std::to_string(static_cast<int>(simd)) + " threads " +
                                 std::to_string(threads) + " q_tile " + std::to_string(cfg.q_tile);
        ASSERT_TRUE(run_impl(run.c, run.d_o, run.r, other, dq2, dk2, dv2)) << what;
        EXPECT_TRUE(dq2.bytes == run.dq.bytes) << what << ": dQ";
        EXPECT_TRUE(dk2.bytes == run.dk.bytes) << what << ": dK";
        EXPECT_TRUE(dv2.bytes == run.dv.bytes) << what << ": dV";
      }
  };
  const int judged =
      judged_sweep(stems, 100, {attnimpl::backward_config{}, attnimpl::backward_config{5, 7}}, same_bits_everywhere);
  EXPECT_GT(judged, 50000);
}

// ---------------------------------------------------------------------------
// The contract 1.1 score variants. Written while the MPFR backward oracle
// took contract 1.0 cases only, these tests carry their own reference (the
// gate's backward.variant_gradients_within_bound_of_oracle now judges the
// same code against the oracle through the builtin subject): the
// formulas of docs/spec.md ("Variants", "Backward") in double precision, per
// row, from the case's stored values, and an a-priori bound on the f32
// kernel's error carried alongside each value (first order, see
// variant_reference).

// attnimpl's view of a case's variants; the bias's bytes live in `bias`.
struct variant_view {
  std::vector<unsigned char> bias;
  attnimpl::variants var;
  explicit variant_view(const attn_case& c) {
    const score_variants& w = c.variants;
    var.window_left = w.window_left;
    var.window_right = w.window_right;
    var.chunk = w.chunk;
    var.softcap = w.softcap;
    var.alibi = w.has_alibi() ? w.alibi_slopes.data() : nullptr;
    var.sinks = w.has_sinks() ? w.sink_logits.data() : nullptr;
    if (w.has_bias()) {
      bias = w.bias.packed_storage();
      var.bias.data = bias.data() + static_cast<std::size_t>(w.bias.offset) * size_of(w.bias_type);
      var.bias.type = to_impl(w.bias_type);
      const auto& bs = w.bias_shape;
      const std::int64_t dense[4] = {bs[1] * bs[2] * bs[3], bs[2] * bs[3], bs[3], 1};
      for (int a = 0; a < 4; ++a) var.bias.stride[a] = bs[a] == 1 ? 0 : dense[a];
    }
  }
};

// What a variant case hands the kernel (O in the storage type, LSE in f32)
// and what it should get back, in double, with the bound of each result.
struct variant_reference {
  tensor o;                                 // the forward's O, rounded to the storage type
  std::vector<float> lse;                   // the forward's LSE, rounded to f32 (b, h, i)
  std::vector<double> dq, dk, dv, d_sinks;  // dense (b, lq, hq, d), (b, lk, hkv, d), (b, lk, hkv, dv), hq
  std::vector<double> dq_tol, dk_tol, dv_tol, sink_tol;
  std::vector<char> key_seen;  // (b, lk, hkv): some row of the KV head sees the key
  std::vector<char> row_sees;  // (b, lq, hq)
};

// The reference, from the case's stored Q, K, V, dO, bias, slopes and sinks.
//
// Forward, per row (b, h, i), in double: s_j = softcap(scale q.k_j) +
// alibi + bias over the visible keys (attn_case::visible: padding, causal,
// mask, window, chunk, bias != -inf), LSE = log(exp(sink) + sum exp(s_j)),
// O = sum exp(s_j - LSE) V_j; O is then rounded to the storage type and LSE
// to f32, as a host hands them, and the backward below uses those handed
// values (D = dO . O_in, P = exp(s - LSE_in)), as the kernel must.
//
// The bound. Each step of the kernel is an f32 operation (u = 2^-24) or a
// chain of FMAs; to first order its error is u times the magnitudes it
// combines. Per visible pair, with A = |scale| sum_e |q_e k_e|:
//  - x = scale q.k: an FMA chain over d terms and a product, |dx| <= (d + 1) u A;
//  - s: x / c, tanh (2.5 ulps, attnimpl::tanh_ulps(); |tanh'| <= 1), c t,
//    the ALiBi product and sum, the bias sum and the subtraction of LSE each
//    round once: |d(s - LSE)| <= |dx| + 8 u (|x| + |alibi| + |bias| + |LSE|);
//  - P = exp(s - LSE), the kernel's exp (1.02 ulps): relative error
//    eP <= |d(s - LSE)| + 2 u;
//  - dP = dO.V_j and D = dO.O: chains over dv terms, errors <= (dv + 1) u B_j
//    and (dv + 1) u C with B_j = sum |dO V_j|, C = sum |dO O|;
//  - dS = P (dP - D): |ddS| <= P (eP |dP - D| + (dv + 2) u (B_j + C));
//  - softcap: dX = dS (1 - t^2), t off by |dx| / c + 3 u |t|, so
//    |ddX| <= |ddS| (1 - t^2) + |dS| (2 |t| (|dx| / c + 3 u |t|) + 3 u);
//    without it dX = dS;
//  - dQ, dK, dV, d_sinks: sums of n terms (FMA chains per block, block
//    partials added, one scale product): each term's error above plus
//    (n + 4) u times the sum of the terms' magnitudes, n = Lk for dQ,
//    G Lq for dK and dV (the rows of a KV head), B Lq for d_sinks, whose
//    P_sink = exp(sink - LSE) has relative error 8 u (|sink| + |LSE|) + 2 u.
// The tolerance is twice that first-order bound (room for the second-order
// terms and the reference's own double rounding, both far smaller), plus
// the final rounding to the storage type, u_s (|ref| + bound) with u_s =
// 2^-24, 2^-11 or 2^-8 for f32, f16, bf16, plus an absolute floor for
// results in the storage type's subnormal range (2^-25 for f16, 2^-149
// otherwise) and for the f32 subnormals of the products (2^-126 times the term
// count). Nothing in it was adjusted to make a case pass.
variant_reference variant_reference_of(const attn_case& c, const tensor& d_o) {
  constexpr double u = 0x1p-24;
  const auto sz = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  const score_variants& w = c.variants;
  const double scale = c.effective_scale();
  const double u_s = c.type == dtype::f32 ? 0x1p-24 : c.type == dtype::f16 ? 0x1p-11 : 0x1p-8;
  const double floor_s = c.type == dtype::f16 ? 0x1p-25 : 0x1p-149;
  const std::int64_t G = c.group();
  variant_reference r;
  r.o = make_output(c);
  r.lse.assign(sz(c.b * c.hq * c.lq), 0.0f);
  r.dq.assign(sz(c.b * c.lq * c.hq * c.d), 0.0), r.dq_tol = r.dq;
  r.dk.assign(sz(c.b * c.lk * c.hkv * c.d), 0.0), r.dk_tol = r.dk;
  r.dv.assign(sz(c.b * c.lk * c.hkv * c.dv), 0.0), r.dv_tol = r.dv;
  r.d_sinks.assign(sz(c.hq), 0.0), r.sink_tol = r.d_sinks;
  r.key_seen.assign(sz(c.b * c.lk * c.hkv), 0);
  r.row_sees.assign(sz(c.b * c.lq * c.hq), 0);
  std::vector<double> dq_mag(r.dq.size()), dk_mag(r.dk.size()), dv_mag(r.dv.size()), sink_mag(r.d_sinks.size());
  std::vector<double> s(sz(c.lk)), x(sz(c.lk)), a_mag(sz(c.lk)), p(sz(c.lk)), e_arg(sz(c.lk));
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::int64_t g = c.kv_head(h);
        const double sink = c.sink_of(h);
        // Forward.
        bool any = false;
        double m = sink;
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(bi, h, i, j)) continue;
          any = true;
          double dot = 0, mag = 0;
          for (std::int64_t e = 0; e < c.d; ++e) {
            dot += c.q.at(bi, i, h, e) * c.k.at(bi, j, g, e);
            mag += std::fabs(c.q.at(bi, i, h, e) * c.k.at(bi, j, g, e));
          }
          x[sz(j)] = scale * dot;
          a_mag[sz(j)] = std::fabs(scale) * mag;
          const double capped = w.has_softcap() ? w.softcap * std::tanh(x[sz(j)] / w.softcap) : x[sz(j)];
          s[sz(j)] = capped + c.alibi_at(bi, h, i, j) + c.bias_at(bi, h, i, j);
          m = std::max(m, s[sz(j)]);
        }
        const std::size_t lse_at = sz((bi * c.hq + h) * c.lq + i);
        if (!any) {  // O = 0, LSE = sink; the row adds nothing to the backward
          r.lse[lse_at] = static_cast<float>(sink);
          continue;
        }
        r.row_sees[sz((bi * c.lq + i) * c.hq + h)] = 1;
        double l = std::isinf(sink) ? 0.0 : std::exp(sink - m);
        for (std::int64_t j = 0; j < c.lk; ++j)
          if (c.visible(bi, h, i, j)) l += std::exp(s[sz(j)] - m);
        const double lse_exact = m + std::log(l);
        for (std::int64_t e = 0; e < c.dv; ++e) {
          double acc = 0;
          for (std::int64_t j = 0; j < c.lk; ++j)
            if (c.visible(bi, h, i, j)) acc += std::exp(s[sz(j)] - lse_exact) * c.v.at(bi, j, g, e);
          r.o.set(bi, i, h, e, acc);  // rounded to the storage type
        }
        const float lse_f = static_cast<float>(lse_exact);
        r.lse[lse_at] = lse_f;
        const double lse = lse_f;
        // Backward, from the handed O and LSE.
        double big_d = 0, c_mag = 0;
        for (std::int64_t e = 0; e < c.dv; ++e) {
          big_d += d_o.at(bi, i, h, e) * r.o.at(bi, i, h, e);
          c_mag += std::fabs(d_o.at(bi, i, h, e) * r.o.at(bi, i, h, e));
        }
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(bi, h, i, j)) continue;
          r.key_seen[sz((bi * c.lk + j) * c.hkv + g)] = 1;
          const double pj = std::exp(s[sz(j)] - lse);
          double dp = 0, b_mag = 0;
          for (std::int64_t e = 0; e < c.dv; ++e) {
            dp += d_o.at(bi, i, h, e) * c.v.at(bi, j, g, e);
            b_mag += std::fabs(d_o.at(bi, i, h, e) * c.v.at(bi, j, g, e));
          }
          const double dx_err = (static_cast<double>(c.d) + 1) * u * a_mag[sz(j)];
          const double e_p = dx_err +
                             8 * u *
                                 (std::fabs(x[sz(j)]) + std::fabs(c.alibi_at(bi, h, i, j)) + std::fabs(c.bias_at(bi, h, i, j)) +
                                  std::fabs(lse)) +
                             2 * u;
          const double ds = pj * (dp - big_d);
          const double e_ds = pj * (e_p * std::fabs(dp - big_d) + (static_cast<double>(c.dv) + 2) * u * (b_mag + c_mag));
          double dxv = ds, e_dx = e_ds;
          if (w.has_softcap()) {
            const double t = std::tanh(x[sz(j)] / w.softcap);
            dxv = ds * (1 - t * t);
            e_dx = e_ds * (1 - t * t) +
                   std::fabs(ds) * (2 * std::fabs(t) * (dx_err / std::fabs(w.softcap) + 3 * u * std::fabs(t)) + 3 * u);
          }
          for (std::int64_t e = 0; e < c.d; ++e) {
            const std::size_t qa = sz(((bi * c.lq + i) * c.hq + h) * c.d + e), ka = sz(((bi * c.lk + j) * c.hkv + g) * c.d + e);
            const double kv = c.k.at(bi, j, g, e), qv = c.q.at(bi, i, h, e);
            r.dq[qa] += scale * dxv * kv;
            r.dq_tol[qa] += std::fabs(scale) * e_dx * std::fabs(kv);
            dq_mag[qa] += std::fabs(scale * dxv * kv);
            r.dk[ka] += scale * dxv * qv;
            r.dk_tol[ka] += std::fabs(scale) * e_dx * std::fabs(qv);
            dk_mag[ka] += std::fabs(scale * dxv * qv);
          }
          for (std::int64_t e = 0; e < c.dv; ++e) {
            const std::size_t va = sz(((bi * c.lk + j) * c.hkv + g) * c.dv + e);
            const double dov = d_o.at(bi, i, h, e);
            r.dv[va] += pj * dov;
            r.dv_tol[va] += pj * e_p * std::fabs(dov);
            dv_mag[va] += std::fabs(pj * dov);
          }
        }
        if (!std::isinf(sink)) {
          const double ps = std::exp(sink - lse);
          r.d_sinks[sz(h)] -= ps * big_d;
          r.sink_tol[sz(h)] += ps * ((8 * u * (std::fabs(sink) + std::fabs(lse)) + 2 * u) * std::fabs(big_d) +
                                     (static_cast<double>(c.dv) + 1) * u * c_mag);
          sink_mag[sz(h)] += std::fabs(ps * big_d);
        }
      }
  const auto finish = [&](std::vector<double>& tol, const std::vector<double>& ref, const std::vector<double>& mag, double n,
                          double us, double fl) {
    for (std::size_t k = 0; k < tol.size(); ++k) {
      const double first = tol[k] + (n + 4) * u * mag[k];
      tol[k] = 2 * first + us * (std::fabs(ref[k]) + first) + fl + n * 0x1p-126;
    }
  };
  finish(r.dq_tol, r.dq, dq_mag, static_cast<double>(c.lk), u_s, floor_s);
  finish(r.dk_tol, r.dk, dk_mag, static_cast<double>(G * c.lq), u_s, floor_s);
  finish(r.dv_tol, r.dv, dv_mag, static_cast<double>(G * c.lq), u_s, floor_s);
  finish(r.sink_tol, r.d_sinks, sink_mag, static_cast<double>(c.b * c.lq), u, 0x1p-149);
  return r;
}

// One backward call on a variant case: dQ, dK, dV (dense, the storage type)
// and d_sinks.
struct variant_run {
  dense_out dq, dk, dv;
  std::vector<float> d_sinks;
  attnimpl::status st;
  explicit variant_run(const attn_case& c)
      : dq({c.b, c.lq, c.hq, c.d}, c.type),
        dk({c.b, c.lk, c.hkv, c.d}, c.type),
        dv({c.b, c.lk, c.hkv, c.dv}, c.type),
        d_sinks(static_cast<std::size_t>(c.hq), std::nanf("")) {}
  bool same_bits(const variant_run& o) const {
    return dq.bytes == o.dq.bytes && dk.bytes == o.dk.bytes && dv.bytes == o.dv.bytes &&
           std::memcmp(d_sinks.data(), o.d_sinks.data(), d_sinks.size() * sizeof(float)) == 0;
  }
};

// Runs the kernel on c with the reference's O and LSE handed in.
variant_run run_variant(const attn_case& c, const tensor& d_o, const variant_reference& r, const attnimpl::backward_config& cfg) {
  variant_run out(c);
  const variant_view vv(c);
  staged_args staged(c, r.o, r.lse, d_o);
  attnimpl::backward_args& a = staged.a;
  a.var = vv.var;
  a.d_sinks = out.d_sinks.data();
  a.dq = out.dq.view(), a.dk = out.dk.view(), a.dv = out.dv.view();
  out.st = attnimpl::attention_backward(a, cfg);
  return out;
}

std::string config_text(const attnimpl::backward_config& cfg) {
  return " q_tile=" + std::to_string(cfg.q_tile) + " k_tile=" + std::to_string(cfg.k_tile) +
         " simd=" + attnimpl::isa_name(cfg.simd) + " threads=" + std::to_string(cfg.threads);
}

// Every result within its tolerance, hidden keys and blind rows exactly 0;
// returns how many elements were judged.
int judge_variant(const attn_case& c, const variant_reference& r, const variant_run& got, const std::string& what) {
  int judged = 0;
  const auto check = [&](const dense_out& out, const std::vector<double>& want, const std::vector<double>& tol,
                         const char* name) {
    for (std::size_t k = 0; k < want.size(); ++k, ++judged)
      EXPECT_LE(std::fabs(out.at(k) - want[k]), tol[k])
          << what << " " << name << " element " << k << ": got " << out.at(k) << ", want " << want[k];
  };
  check(got.dq, r.dq, r.dq_tol, "dQ");
  check(got.dk, r.dk, r.dk_tol, "dK");
  check(got.dv, r.dv, r.dv_tol, "dV");
  for (std::int64_t h = 0; h < (c.variants.has_sinks() ? c.hq : 0); ++h, ++judged) {  // written with sinks only
    const std::size_t k = static_cast<std::size_t>(h);
    EXPECT_LE(std::fabs(got.d_sinks[k] - r.d_sinks[k]), r.sink_tol[k])
        << what << " d_sinks[" << h << "]: got " << got.d_sinks[k] << ", want " << r.d_sinks[k];
  }
  // Exact zeros: keys no row sees (dK = dV = 0), rows that see no key (dQ = 0),
  // heads whose sink is -inf (d_sinks = +0).
  const auto expect_zero_row = [&](const dense_out& out, std::int64_t row, std::int64_t width, const char* name,
                                   std::int64_t index) {
    for (std::int64_t e = 0; e < width; ++e)
      EXPECT_EQ(out.at(static_cast<std::size_t>(row * width + e)), 0.0) << what << " " << name << " " << index;
  };
  for (std::int64_t bi = 0; bi < c.b; ++bi) {
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g) {
        const std::int64_t key = (bi * c.lk + j) * c.hkv + g;
        if (r.key_seen[static_cast<std::size_t>(key)]) continue;
        expect_zero_row(got.dk, key, c.d, "dK of hidden key", j);
        expect_zero_row(got.dv, key, c.dv, "dV of hidden key", j);
      }
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h) {
        const std::int64_t row = (bi * c.lq + i) * c.hq + h;
        if (r.row_sees[static_cast<std::size_t>(row)]) continue;
        expect_zero_row(got.dq, row, c.d, "dQ of blind row", i);
      }
  }
  if (c.variants.has_sinks())
    for (std::int64_t h = 0; h < c.hq; ++h)
      if (std::isinf(c.sink_of(h))) {
        std::uint32_t bits = 1;
        std::memcpy(&bits, &got.d_sinks[static_cast<std::size_t>(h)], 4);
        EXPECT_EQ(bits, 0u) << what << " d_sinks[" << h << "] of a -inf sink";
      }
  return judged;
}

// Variant cases, each alone and combined: GQA, causal, padding, a mask,
// Lq != Lk, every storage type, layouts with gaps, tiles that cross blocks
// (3 and 5, 2 and 7) and the defaults. Within the tolerance of the reference
// and the same bits on every instruction set this CPU runs at 1, 2 and 3 threads.
TEST(impl_backward, variants_within_tolerance_of_a_double_reference_and_the_same_bits_everywhere) {
  int judged = 0, cases = 0;
  std::uint64_t seed = 500;
  for (const char* base : {
           "ATTN(b=1,hq=2,hkv=1,lq=5,lk=9,d=4,dv=3,softcap=2",
           "ATTN(b=2,hq=4,hkv=2,lq=4,lk=11,d=3,dv=5,causal,softcap=0.75",
           "ATTN(b=1,hq=4,hkv=2,lq=6,lk=8,d=4,dv=4,alibi=random",
           "ATTN(b=2,hq=3,hkv=1,lq=3,lk=10,d=5,dv=2,kpad=[7,10],causal,alibi=standard",
           "ATTN(b=1,hq=2,hkv=2,lq=5,lk=12,d=3,dv=3,bias=1x2x5x12",
           "ATTN(b=2,hq=4,hkv=2,lq=4,lk=9,d=4,dv=3,bias=2x1x4x9,bias_type=bf16,bias_values=masking",
           "ATTN(b=1,hq=2,hkv=1,lq=7,lk=7,d=3,dv=3,bias=1x2x1x7,bias_type=f16,bias_values=masking,causal",
           "ATTN(b=2,hq=4,hkv=2,lq=3,lk=6,d=3,dv=4,sinks=normal",
           "ATTN(b=2,hq=4,hkv=1,lq=5,lk=7,d=2,dv=3,kpad=[2,7],sinks=mixed",
           "ATTN(b=1,hq=2,hkv=1,lq=4,lk=9,d=3,dv=2,sinks=high,causal",
           "ATTN(b=1,hq=2,hkv=1,lq=9,lk=13,d=4,dv=4,window=[2,1]",
           "ATTN(b=2,hq=4,hkv=2,lq=8,lk=8,d=3,dv=3,causal,window=[3,-1],kpad=[8,5]",
           "ATTN(b=1,hq=1,hkv=1,lq=4,lk=15,d=3,dv=2,window=[0,0]",
           "ATTN(b=1,hq=2,hkv=1,lq=10,lk=12,d=3,dv=3,chunk=4,causal",
           "ATTN(b=2,hq=2,hkv=2,lq=5,lk=11,d=4,dv=2,chunk=3,mask=2x2x5x11",
           "ATTN(b=2,hq=4,hkv=2,lq=3,lk=7,d=2,dv=3,causal,window=[3,0],chunk=4,softcap=30,sinks=mixed,alibi=random,"
           "bias=1x4x1x7,bias_type=bf16,bias_values=masking",
           "ATTN(b=1,hq=4,hkv=2,lq=11,lk=13,d=5,dv=4,window=[4,2],softcap=5,sinks=normal,alibi=standard,bias=1x4x11x13",
           "ATTN(b=2,hq=2,hkv=1,lq=6,lk=17,d=3,dv=3,kpad=[17,9],causal,window=[5,-1],softcap=3,sinks=low,alibi=random,"
           "bias=2x2x6x17,bias_type=f16,bias_values=masking",
       })
    for (const char* type : {"f32", "f16", "bf16"})
      for (const attnimpl::backward_config cfg :
           {attnimpl::backward_config{3, 5}, attnimpl::backward_config{2, 7}, attnimpl::backward_config{}}) {
        const char* layout = seed % 2 ? "bshd" : "padded";
        attn_case c = parse_line(std::string(base) + "," + type + ",layout=" + layout +
                                 ",grad=normal,seed=" + std::to_string(seed++) + ")");
        materialize(c);
        const tensor d_o = draw_grad_output(c, *c.grad);
        const variant_reference r = variant_reference_of(c, d_o);
        const variant_run got = run_variant(c, d_o, r, cfg);
        ASSERT_TRUE(got.st.ok()) << got.st.message;
        const std::string line = to_line(c) + config_text(cfg);
        judged += judge_variant(c, r, got, line);
        ++cases;
        for (const attnimpl::isa simd : {attnimpl::isa::portable, attnimpl::isa::avx2, attnimpl::isa::avx512})
          for (const int threads : {1, 2, 3}) {
            if (!attnimpl::isa_supported(simd)) continue;
            attnimpl::backward_config other = cfg;
            other.simd = simd;
            other.threads = threads;
            const variant_run again = run_variant(c, d_o, r, other);
            ASSERT_TRUE(again.st.ok()) << again.st.message;
            EXPECT_TRUE(again.same_bits(got)) << line << ": other bits at" << config_text(other);
          }
      }
  EXPECT_EQ(cases, 18 * 9);
  EXPECT_GT(judged, 30000);
}

// A window that holds no key for some rows (their aligned position before
// key 0): those rows get dQ = 0 exactly and add nothing, so a NaN written
// into their dO changes no bit of dK, dV or d_sinks; a sink of -inf gives
// d_sinks = +0.
TEST(impl_backward, variants_rows_that_see_no_key_add_nothing) {
  for (const char* line :
       {"ATTN(b=2,hq=2,hkv=1,lq=5,lk=6,d=3,dv=2,kpad=[2,6],window=[0,0],sinks=normal,f32,grad=normal,seed=7)",
        "ATTN(b=1,hq=2,hkv=2,lq=6,lk=3,d=2,dv=3,window=[1,0],sinks=neginf,softcap=4,bf16,grad=normal,seed=8)",
        "ATTN(b=1,hq=2,hkv=1,lq=6,lk=9,d=2,dv=2,chunk=3,window=[0,-1],kpad=[4],sinks=mixed,f16,grad=normal,seed=9)"}) {
    attn_case c = parse_line(line);
    materialize(c);
    tensor d_o = draw_grad_output(c, *c.grad);
    const variant_reference r = variant_reference_of(c, d_o);
    int blind = 0;
    for (char x : r.row_sees) blind += x == 0;
    ASSERT_GT(blind, 0) << line;
    for (const attnimpl::backward_config cfg : {attnimpl::backward_config{3, 5}, attnimpl::backward_config{}}) {
      const variant_run got = run_variant(c, d_o, r, cfg);
      ASSERT_TRUE(got.st.ok()) << got.st.message;
      judge_variant(c, r, got, std::string(line) + config_text(cfg));
      tensor poisoned = d_o;
      for (std::int64_t bi = 0; bi < c.b; ++bi)
        for (std::int64_t i = 0; i < c.lq; ++i)
          for (std::int64_t h = 0; h < c.hq; ++h)
            if (!r.row_sees[static_cast<std::size_t>((bi * c.lq + i) * c.hq + h)])
              for (std::int64_t e = 0; e < c.dv; ++e) poisoned.set(bi, i, h, e, std::nan(""));
      const variant_run again = run_variant(c, poisoned, r, cfg);
      ASSERT_TRUE(again.st.ok()) << again.st.message;
      EXPECT_TRUE(again.same_bits(got)) << line << config_text(cfg) << ": the blind rows' dO changed a result";
    }
  }
}

TEST(impl_backward, variants_refused_naming_the_field_writing_nothing) {
  attn_case c = parse_line("ATTN(b=1,hq=2,hkv=1,lq=3,lk=4,d=2,dv=2,sinks=normal,alibi=random,f32,grad=normal,seed=3)");
  materialize(c);
  const tensor d_o = draw_grad_output(c, *c.grad);
  const variant_reference r = variant_reference_of(c, d_o);
  const variant_view vv(c);
  std::vector<float> lse = r.lse, d_sinks(2, 7.0f);
  std::vector<unsigned char> qb, kb, vb, ob, dob;
  dense_out dq({1, 3, 2, 2}, dtype::f32), dk({1, 4, 1, 2}, dtype::f32), dv({1, 4, 1, 2}, dtype::f32);
  std::fill(dq.bytes.begin(), dq.bytes.end(), 0x55), std::fill(dk.bytes.begin(), dk.bytes.end(), 0x55);
  std::fill(dv.bytes.begin(), dv.bytes.end(), 0x55);
  const auto untouched_q = dq.bytes, untouched_kv = dk.bytes;
  attnimpl::backward_args good;
  good.dims = attnimpl::shape{1, 2, 1, 3, 4, 2, 2};
  good.q = in_of(c.q, qb), good.k = in_of(c.k, kb), good.v = in_of(c.v, vb), good.o = in_of(r.o, ob), good.d_o = in_of(d_o, dob);
  good.lse = lse.data();
  good.lse_stride = {6, 3, 1};
  good.dq = dq.view(), good.dk = dk.view(), good.dv = dv.view();
  good.var = vv.var;
  good.d_sinks = d_sinks.data();
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> bad_slopes{0.5f, nan}, bad_sinks{inf, 0.0f};
  const std::pair<const char*, std::function<void(attnimpl::backward_args&)>> cases[] = {
      {"d_sinks", [](attnimpl::backward_args& a) { a.d_sinks = nullptr; }},
      {"window_left", [](attnimpl::backward_args& a) { a.var.window_left = -2; }},
      {"window_right", [](attnimpl::backward_args& a) { a.var.window_right = -5; }},
      {"chunk", [](attnimpl::backward_args& a) { a.var.chunk = -1; }},
      {"softcap", [](attnimpl::backward_args& a) { a.var.softcap = -1.0f; }},
      {"softcap", [&](attnimpl::backward_args& a) { a.var.softcap = inf; }},
      {"alibi[1]", [&](attnimpl::backward_args& a) { a.var.alibi = bad_slopes.data(); }},
      {"sinks[0]", [&](attnimpl::backward_args& a) { a.var.sinks = bad_sinks.data(); }},
      {"bias.type",
       [](attnimpl::backward_args& a) {
         static const float zeros[24] = {};
         a.var.bias = {zeros, static_cast<attnimpl::dtype>(7), {0, 12, 4, 1}};
       }},
  };
  for (const auto& [field, spoil] : cases) {
    attnimpl::backward_args a = good;
    spoil(a);
    const attnimpl::status st = attnimpl::attention_backward(a);
    EXPECT_FALSE(st.ok()) << field;
    EXPECT_NE(st.message.find(field), std::string::npos) << field << ": " << st.message;
    EXPECT_TRUE(dq.bytes == untouched_q && dk.bytes == untouched_kv && dv.bytes == untouched_kv) << field << ": wrote a result";
    EXPECT_EQ(d_sinks[0], 7.0f) << field;
    EXPECT_EQ(d_sinks[1], 7.0f) << field;
  }
  EXPECT_TRUE(attnimpl::attention_backward(good).ok());
  EXPECT_NE(d_sinks[0], 7.0f);
}

TEST(impl_backward, refuses_bad_arguments_naming_them) {
  attnimpl::backward_args a;
  EXPECT_FALSE(attnimpl::attention_backward(a).ok());
  a.dims.hq = 3, a.dims.hkv = 2;
  const auto st = attnimpl::attention_backward(a);
  EXPECT_NE(st.message.find("hq"), std::string::npos) << st.message;
}

}  // namespace
}  // namespace attncheck
