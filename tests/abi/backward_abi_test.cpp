// The backward entry point of ABI v3 through the host (subject::backward):
// naive's gradients arrive within the backward bound of the oracle in every
// layout, and the host's poison and guard bands show what a subject left
// unwritten or wrote outside dQ, dK and dV.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>

#include "attncheck/backward_inputs.hpp"
#include "attncheck/backward_oracle.hpp"
#include "attncheck/subject_host.hpp"
#include "test_instance.hpp"

namespace attncheck {
namespace {

TEST(backward_abi, naive_and_builtin_declare_backward_and_their_blocks) {
  const auto naive = subject::load("naive");
  EXPECT_EQ(naive->abi(), 4u);  // version 4: it claims scale_exact (docs/abi.md "Version 4")
  EXPECT_TRUE(naive->has_backward());
  EXPECT_TRUE(naive->claims_v3(ATTNCHECK_CLAIM3_BACKWARD_DETERMINISTIC));
  attn_case c = parse_line("ATTN(b=1,hq=2,hkv=1,lq=3,lk=5,d=2,dv=2,f32)");
  EXPECT_EQ(naive->backward_blocks(c), (std::pair<std::int64_t, std::int64_t>{1, 1}));
  // The builtin: attnimpl's backward, blocks of its own tiles (64 and 64 at
  // the production tiles; tiny: 2 query rows, 3 keys), dK and dV summed
  // over the G = 2 query heads' blocks.
  const auto builtin = subject::load("builtin");
  EXPECT_TRUE(builtin->has_backward());
  EXPECT_TRUE(builtin->claims_v3(ATTNCHECK_CLAIM3_BACKWARD_DETERMINISTIC));
  EXPECT_EQ(builtin->backward_blocks(c), (std::pair<std::int64_t, std::int64_t>{1, 2}));
  EXPECT_EQ(subject::load("builtin:tiles=tiny")->backward_blocks(c), (std::pair<std::int64_t, std::int64_t>{2, 4}));
  // A subject without the feature is refused by the host, not called.
  attncheck_instance none = f32_test_instance(ATTNCHECK_SUBJECT_ABI_VERSION_3, "no-backward");
  none.attend = [](void*, const attncheck_problem*, char*, std::size_t) { return 0; };
  none.destroy = [](attncheck_instance*) {};
  const auto plain = subject::adopt(&none, "no-backward");
  EXPECT_FALSE(plain->has_backward());
  materialize(c);
  backward_inputs in;
  const auto out = plain->backward(c, in);
  EXPECT_FALSE(out.ok());
  EXPECT_NE(out.error.find("no backward"), std::string::npos) << out.error;
}

class round_trip : public ::testing::TestWithParam<const char*> {};

TEST_P(round_trip, is_within_the_bound_in_every_layout_and_dtype) {
  const auto s = subject::load(GetParam());
  int judged = 0;
  for (const char* base :
       {"ATTN(b=2,hq=4,hkv=2,lq=3,lk=5,d=3,dv=2,causal,kpad=[5,2]", "ATTN(b=1,hq=3,hkv=1,lq=4,lk=4,d=4,dv=3,mask=1x3x4x4",
        "ATTN(b=1,hq=2,hkv=2,lq=1,lk=7,d=2,dv=5,scale=-0.5"}) {
    for (const char* type : {"f32", "f16", "bf16"})
      for (const char* layout : {"bshd", "bhsd", "padded"})
        for (const char* grad : {"dyadic", "normal", "adversarial"}) {
          attn_case c = parse_line(std::string(base) + "," + type + ",layout=" + layout + ",grad=" + grad + ",seed=11)");
          materialize(c);
          const tensor d_o = draw_grad_output(c, *c.grad);
          backward_bound_params bp;
          bp.u_compute = s->desc().compute_unit_roundoff;
          bp.exp_ulps = s->desc().exp_ulps;
          std::tie(bp.dq_blocks, bp.dkv_blocks) = s->backward_blocks(c);
          const backward_result r = reference_backward(c, d_o, bp);
          const auto out = s->backward(c, handed_inputs(c, r.o, r.lse, d_o));
          const std::string line = to_line(c);
          ASSERT_TRUE(out.ok()) << line << ": " << out.error << out.guard_report;
          EXPECT_EQ(out.dq.shape, c.q.shape);
          EXPECT_EQ(out.dk.stride, c.k.stride) << "dK in K's layout";
          const auto check = [&](const tensor& got, const std::vector<double>& want, const std::vector<double>& bound,
                                 const dims4& shape, const char* what) {
            for (std::int64_t a = 0; a < shape[0]; ++a)
              for (std::int64_t b = 0; b < shape[1]; ++b)
                for (std::int64_t x = 0; x < shape[2]; ++x)
                  for (std::int64_t y = 0; y < shape[3]; ++y) {
                    const std::size_t k = backward_result::index(shape, a, b, x, y);
                    if (!std::isfinite(bound[k])) continue;
                    ++judged;
                    EXPECT_LE(std::fabs(got.at(a, b, x, y) - want[k]), bound[k])
                        << line << " " << what << "[" << a << "," << b << "," << x << "," << y << "]";
                  }
          };
          check(out.dq, r.dq, r.dq_bound, r.dq_shape, "dQ");
          check(out.dk, r.dk, r.dk_bound, r.dk_shape, "dK");
          check(out.dv, r.dv, r.dv_bound, r.dv_shape, "dV");
          // Padded keys of batch element 1 in the first case: exactly 0.
          if (c.has_padding())
            for (std::int64_t j = c.key_len[1]; j < c.lk; ++j)
              for (std::int64_t g = 0; g < c.hkv; ++g) {
                for (std::int64_t x = 0; x < c.d; ++x) EXPECT_EQ(out.dk.at(1, j, g, x), 0.0) << line;
                for (std::int64_t e = 0; e < c.dv; ++e) EXPECT_EQ(out.dv.at(1, j, g, e), 0.0) << line;
              }
        }
  }
  EXPECT_GT(judged, 5000);
}

INSTANTIATE_TEST_SUITE_P(subjects, round_trip, ::testing::Values("naive", "builtin", "builtin:tiles=tiny"));

// The builtin claims CLAIM3_BACKWARD_DETERMINISTIC and computes its backward
// with multiplies and adds in one fixed order: the same bits on every
// instruction set this CPU runs and at every thread count, at each tile
// configuration (the tiles set the order, so they are compared within one).
TEST(backward_abi, builtin_backward_same_bits_on_every_isa_and_thread_count) {
  int compared = 0;
  for (const char* tiles : {"", "tiles=tiny,", "q_tile=5,k_tile=7,"})
    for (const char* line : {"ATTN(b=2,hq=4,hkv=2,lq=9,lk=13,d=5,dv=3,causal,kpad=[13,6],f32,layout=bhsd,grad=normal,seed=5)",
                             "ATTN(b=1,hq=3,hkv=1,lq=70,lk=67,d=9,dv=17,mask=1x3x70x67,bf16,grad=adversarial,seed=6)",
                             "ATTN(b=1,hq=2,hkv=2,lq=1,lk=131,d=16,dv=8,f16,layout=padded,grad=dyadic,seed=7)"}) {
      attn_case c = parse_line(line);
      materialize(c);
      const tensor d_o = draw_grad_output(c, *c.grad);
      const backward_result r = reference_backward(c, d_o, backward_bound_params{});
      const backward_inputs in = handed_inputs(c, r.o, r.lse, d_o);
      const auto first = subject::load(std::string("builtin:") + tiles + "simd=portable")->backward(c, in, 1);
      ASSERT_TRUE(first.ok()) << line << ": " << first.error;
      for (const char* simd : {"portable", "avx2", "avx512"}) {
        std::shared_ptr<subject> s;
        try {
          s = subject::load(std::string("builtin:") + tiles + "simd=" + simd);
        } catch (const std::exception&) {
          continue;  // this CPU does not run that instruction set
        }
        for (int threads : {0, 1, 2, 3, 8}) {
          const auto again = s->backward(c, in, threads);
          ASSERT_TRUE(again.ok()) << again.error;
          const auto same = [&](const tensor& a, const tensor& b, const char* what) {
            for (std::int64_t x0 = 0; x0 < a.shape[0]; ++x0)
              for (std::int64_t x1 = 0; x1 < a.shape[1]; ++x1)
                for (std::int64_t x2 = 0; x2 < a.shape[2]; ++x2)
                  for (std::int64_t x3 = 0; x3 < a.shape[3]; ++x3, ++compared)
                    ASSERT_EQ(a.bits_at(x0, x1, x2, x3), b.bits_at(x0, x1, x2, x3))
                        << line << " " << tiles << simd << " threads " << threads << " " << what << "[" << x0 << "," << x1 << ","
                        << x2 << "," << x3 << "]";
          };
          same(first.dq, again.dq, "dQ");
          same(first.dk, again.dk, "dK");
          same(first.dv, again.dv, "dV");
        }
      }
    }
  EXPECT_GT(compared, 100000);
}

// A version 3 instance whose backward misbehaves as `mode` says.
int mode = 0;
int ok_attend(void*, const attncheck_problem*, char*, std::size_t) { return 0; }
int bad_backward(void*, const attncheck_backward_problem* p, char* err, std::size_t len) {
  const attncheck_problem* f = p->forward;
  auto* dq = static_cast<float*>(p->dq);
  auto* dk = static_cast<float*>(p->dk);
  auto* dv = static_cast<float*>(p->dv);
  // Writes every element of the three views (dense bshd here) as 1, then misbehaves.
  for (std::int64_t x = 0; x < f->b * f->lq * f->hq * f->d; ++x) dq[x] = 1.0f;
  for (std::int64_t x = 0; x < f->b * f->lk * f->hkv * f->d; ++x) dk[x] = 1.0f;
  for (std::int64_t x = 0; x < f->b * f->lk * f->hkv * f->dv; ++x) dv[x] = 1.0f;
  switch (mode) {
    case 1: dq[-1] = 0.0f; break;                             // before dQ
    case 2: dv[f->b * f->lk * f->hkv * f->dv] = 0.0f; break;  // past dV
    case 3:
      std::memset(dk, 0xff, sizeof(float));
      dk[1] = std::nanf("");
      break;
    case 4: std::snprintf(err, len, "no gradients today"); return 7;
    default: break;
  }
  return 0;
}
void no_destroy(attncheck_instance*) {}

attncheck_instance bad_instance() {
  attncheck_instance x = f32_test_instance(ATTNCHECK_SUBJECT_ABI_VERSION_3, "bad-backward");
  x.attend = ok_attend;
  x.destroy = no_destroy;
  x.features_v3 = ATTNCHECK_FEATURE3_BACKWARD;
  x.attend_backward = bad_backward;
  return x;
}

TEST(backward_abi, guard_bands_and_poison_show_what_a_subject_did) {
  attncheck_instance inst = bad_instance();
  const auto s = subject::adopt(&inst, "bad-backward");
  attn_case c = parse_line("ATTN(b=1,hq=2,hkv=1,lq=2,lk=3,d=2,dv=2,f32,grad=normal,seed=3)");
  materialize(c);
  backward_inputs in;
  in.o = make_output(c);
  in.lse.assign(static_cast<std::size_t>(c.b * c.hq * c.lq), 0.0f);
  in.d_o = draw_grad_output(c, grad_kind::normal);
  mode = 0;
  auto out = s->backward(c, in);
  EXPECT_TRUE(out.ok()) << out.guard_report;
  EXPECT_EQ(out.dk.at(0, 2, 0, 1), 1.0);
  mode = 1;
  out = s->backward(c, in);
  EXPECT_TRUE(out.guard_violated);
  EXPECT_NE(out.guard_report.find("before the start of dQ"), std::string::npos) << out.guard_report;
  mode = 2;
  out = s->backward(c, in);
  EXPECT_TRUE(out.guard_violated);
  EXPECT_NE(out.guard_report.find("past the end of dV"), std::string::npos) << out.guard_report;
  mode = 3;
  out = s->backward(c, in);
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(std::isnan(out.dk.at(0, 0, 0, 0)));
  mode = 4;
  out = s->backward(c, in);
  EXPECT_EQ(out.status, 7);
  EXPECT_EQ(out.error, "no gradients today");
  mode = 0;
}

TEST(backward_abi, unwritten_outputs_keep_the_hosts_poison) {
  attncheck_instance inst = bad_instance();
  inst.attend_backward = [](void*, const attncheck_backward_problem*, char*, std::size_t) { return 0; };
  const auto s = subject::adopt(&inst, "lazy-backward");
  attn_case c = parse_line("ATTN(b=1,hq=1,hkv=1,lq=1,lk=2,d=1,dv=1,f32,layout=padded,seed=3)");
  materialize(c);
  backward_inputs in;
  in.o = make_output(c);
  in.lse.assign(1, 0.0f);
  in.d_o = draw_grad_output(c, grad_kind::dyadic);
  const auto out = s->backward(c, in);
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(std::isnan(out.dq.at(0, 0, 0, 0)));
  EXPECT_TRUE(std::isnan(out.dk.at(0, 1, 0, 0)));
  EXPECT_TRUE(std::isnan(out.dv.at(0, 0, 0, 0)));
}

TEST(backward_abi, a_declaration_without_its_entry_point_is_refused) {
  attncheck_instance inst = bad_instance();
  inst.attend_backward = nullptr;
  EXPECT_THROW(subject::adopt(&inst, "half-declared"), input_error);
  attncheck_instance undeclared = bad_instance();
  undeclared.features_v3 = 0;
  EXPECT_THROW(subject::adopt(&undeclared, "undeclared"), input_error);
}

}  // namespace
}  // namespace attncheck
