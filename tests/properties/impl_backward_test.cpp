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
            attnimpl::shape dims{c.b, c.hq, c.hkv, c.lq, c.lk, c.d, c.dv};
            const auto [dq_blocks, dkv_blocks] = attnimpl::backward_blocks(dims, cfg);
            backward_bound_params bp;
            bp.dq_blocks = dq_blocks;
            bp.dkv_blocks = dkv_blocks;
            const backward_result r = reference_backward(c, d_o, bp);
            // The forward handed in: the oracle's O in the storage type, LSE in f32.
            tensor o = make_output(c);
            for (std::int64_t bi = 0; bi < c.b; ++bi)
              for (std::int64_t i = 0; i < c.lq; ++i)
                for (std::int64_t h = 0; h < c.hq; ++h)
                  for (std::int64_t e = 0; e < c.dv; ++e)
                    o.set(bi, i, h, e, r.o[static_cast<std::size_t>(((bi * c.lq + i) * c.hq + h) * c.dv + e)]);
            std::vector<float> lse(r.lse.begin(), r.lse.end());
            std::vector<unsigned char> qb, kb, vb, ob, dob;
            attnimpl::backward_args a;
            a.dims = dims;
            a.q = in_of(c.q, qb), a.k = in_of(c.k, kb), a.v = in_of(c.v, vb), a.o = in_of(o, ob), a.d_o = in_of(d_o, dob);
            a.lse = lse.data();
            a.lse_stride = {c.hq * c.lq, c.lq, 1};
            a.scale = c.effective_scale();
            a.causal = c.causal;
            if (c.has_padding()) a.key_len = c.key_len.data();
            std::vector<std::uint8_t> mask;
            if (c.has_mask()) {
              const auto& ms = c.mask_shape;
              const std::int64_t dense[4] = {ms[1] * ms[2] * ms[3], ms[2] * ms[3], ms[3], 1};
              a.mask.data = c.mask.data();
              for (int x = 0; x < 4; ++x) a.mask.stride[x] = ms[x] == 1 ? 0 : dense[x];
            }
            dense_out dq(r.dq_shape, c.type), dk(r.dk_shape, c.type), dv(r.dv_shape, c.type);
            a.dq = dq.view(), a.dk = dk.view(), a.dv = dv.view();
            const attnimpl::status st = attnimpl::attention_backward(a, cfg);
            ASSERT_TRUE(st.ok()) << st.message;
            const std::string line =
                to_line(c) + " q_tile=" + std::to_string(cfg.q_tile) + " k_tile=" + std::to_string(cfg.k_tile);
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
          }
  EXPECT_GT(judged, 20000);
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
