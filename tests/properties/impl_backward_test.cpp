// attnimpl's backward (FlashAttention 2's algorithm, impl/src/backward) against
// the MPFR backward oracle within the backward bound, at the block counts it
// declares, with tiles that cross block boundaries and with the defaults.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
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
  std::vector<float> lse(r.lse.begin(), r.lse.end());
  std::vector<unsigned char> qb, kb, vb, ob, dob;
  attnimpl::backward_args a;
  a.dims = attnimpl::shape{c.b, c.hq, c.hkv, c.lq, c.lk, c.d, c.dv};
  a.q = in_of(c.q, qb), a.k = in_of(c.k, kb), a.v = in_of(c.v, vb), a.o = in_of(o, ob), a.d_o = in_of(d_o, dob);
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

TEST(impl_backward, within_the_backward_bound_of_the_oracle) {
  int judged = 0;
  std::uint64_t seed = 1;
  for (const char* base :
       {"ATTN(b=2,hq=4,hkv=2,lq=5,lk=7,d=3,dv=2,causal,kpad=[7,4]", "ATTN(b=1,hq=3,hkv=1,lq=4,lk=9,d=4,dv=3,mask=1x3x4x9",
        "ATTN(b=1,hq=2,hkv=2,lq=1,lk=13,d=8,dv=5,scale=-0.5", "ATTN(b=1,hq=2,hkv=1,lq=6,lk=6,d=2,dv=2,causal"})
    for (const char* type : {"f32", "f16", "bf16"})
      for (const char* layout : {"bshd", "padded"})
        for (const char* grad : {"dyadic", "normal", "adversarial"})
          for (const attnimpl::backward_config cfg : {attnimpl::backward_config{2, 3}, attnimpl::backward_config{}}) {
            attn_case c = parse_line(std::string(base) + "," + type + ",layout=" + layout + ",grad=" + grad +
                                     ",seed=" + std::to_string(seed++) + ")");
            materialize(c);
            const tensor d_o = draw_grad_output(c, *c.grad);
            const backward_result r = oracle_for(c, d_o, cfg);
            dense_out dq(r.dq_shape, c.type), dk(r.dk_shape, c.type), dv(r.dv_shape, c.type);
            ASSERT_TRUE(run_impl(c, d_o, r, cfg, dq, dk, dv));
            judged += judge(c, r, cfg, dq, dk, dv);
          }
  EXPECT_GT(judged, 20000);
}

// Shapes past the register blocks and the production tiles: several key and
// query blocks of 64, row counts that leave a partial register block, head
// dimensions of more than one column chunk with a narrow tail (80 = 64 +
// 16 floats), causal diagonals and padded keys that make blocks partly
// visible, and a mask. Within the bound, and the same bits on every
// instruction set this CPU runs and at 1 and 3 threads.
TEST(impl_backward, larger_shapes_within_the_bound_and_the_same_bits_everywhere) {
  int judged = 0;
  std::uint64_t seed = 100;
  for (const char* base :
       {"ATTN(b=1,hq=2,hkv=1,lq=70,lk=67,d=20,dv=36,causal", "ATTN(b=2,hq=1,hkv=1,lq=13,lk=80,d=70,dv=9,kpad=[75,80]",
        "ATTN(b=1,hq=2,hkv=2,lq=66,lk=65,d=17,dv=16,mask=1x2x66x65", "ATTN(b=1,hq=1,hkv=1,lq=130,lk=20,d=8,dv=8,causal"})
    for (const char* type : {"f32", "bf16"})
      for (const attnimpl::backward_config cfg : {attnimpl::backward_config{}, attnimpl::backward_config{5, 7}}) {
        attn_case c = parse_line(std::string(base) + "," + type + ",grad=normal,seed=" + std::to_string(seed++) + ")");
        materialize(c);
        const tensor d_o = draw_grad_output(c, *c.grad);
        const backward_result r = oracle_for(c, d_o, cfg);
        dense_out dq(r.dq_shape, c.type), dk(r.dk_shape, c.type), dv(r.dv_shape, c.type);
        ASSERT_TRUE(run_impl(c, d_o, r, cfg, dq, dk, dv));
        judged += judge(c, r, cfg, dq, dk, dv);
        for (const attnimpl::isa simd : {attnimpl::isa::portable, attnimpl::isa::avx2, attnimpl::isa::avx512})
          for (const int threads : {1, 3}) {
            if (!attnimpl::isa_supported(simd)) continue;
            attnimpl::backward_config other = cfg;
            other.simd = simd;
            other.threads = threads;
            dense_out dq2(r.dq_shape, c.type), dk2(r.dk_shape, c.type), dv2(r.dv_shape, c.type);
            ASSERT_TRUE(run_impl(c, d_o, r, other, dq2, dk2, dv2));
            const std::string what = to_line(c) + " simd " + std::to_string(static_cast<int>(simd)) + " threads " +
                                     std::to_string(threads) + " q_tile " + std::to_string(cfg.q_tile);
            EXPECT_TRUE(dq2.bytes == dq.bytes) << what << ": dQ";
            EXPECT_TRUE(dk2.bytes == dk.bytes) << what << ": dK";
            EXPECT_TRUE(dv2.bytes == dv.bytes) << what << ": dV";
          }
      }
  EXPECT_GT(judged, 50000);
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
