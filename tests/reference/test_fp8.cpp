// fp8 storage with descales (docs/spec.md "fp8 storage"): the one-line form
// and validation of the new fields, the drawn values and descales, and the
// oracle on the dequantized values: an fp8 case whose values x * s are exact
// in f32 gives the f32 case's O and LSE bit for bit, and the bound grows by
// the descales' roundings only.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attncheck/case.hpp"
#include "attncheck/case_file.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck {
namespace {

attn_case fp8_case(const std::string& line) {
  attn_case c = parse_line(line);
  materialize(c);
  return c;
}

TEST(fp8, the_line_form_round_trips_every_field) {
  const std::string line =
      "ATTN(b=2,hq=4,hkv=2,lq=3,lk=5,d=8,dv=4,qtype=e4m3,ktype=e5m2,vtype=e4m3,qdescale=tensor,kdescale=head,"
      "vdescale=head,descales=spread,bf16,seed=7)";
  const attn_case c = parse_line(line);
  EXPECT_EQ(to_line(c), line);
  EXPECT_EQ(c.q_type(), dtype::e4m3);
  EXPECT_EQ(c.k_type(), dtype::e5m2);
  EXPECT_EQ(c.type, dtype::bf16);
  EXPECT_EQ(c.quant.k_scale, descale_granularity::head);
  // K and V only, without descales: the stored values are the values.
  EXPECT_EQ(to_line(parse_line("ATTN(b=1,hq=1,hkv=1,lq=1,lk=2,d=2,dv=2,ktype=e4m3,vtype=e4m3,f16)")),
            "ATTN(b=1,hq=1,hkv=1,lq=1,lk=2,d=2,dv=2,ktype=e4m3,vtype=e4m3,f16)");
}

TEST(fp8, bad_fields_name_the_field_and_the_rule) {
  const auto field_of = [](const std::string& line) {
    try {
      parse_line(line);
    } catch (const input_error& e) {
      return e.field() + ": " + e.what();
    }
    return std::string("accepted");
  };
  const std::string head = "ATTN(b=1,hq=2,hkv=1,lq=1,lk=2,d=2,dv=2,";
  EXPECT_NE(field_of(head + "qtype=bf16)").find("qtype"), std::string::npos);
  EXPECT_NE(field_of(head + "kdescale=head)").find("kdescale"), std::string::npos);       // K not in fp8
  EXPECT_NE(field_of(head + "descales=wide)").find("descales"), std::string::npos);       // no fp8 input
  EXPECT_NE(field_of(head + "e4m3)").find("dtype"), std::string::npos);                   // O is never fp8
  EXPECT_NE(field_of(head + "ktype=e4m3,pages=2)").find("fp8"), std::string::npos);       // not built with the paged form
  EXPECT_NE(field_of(head + "ktype=e4m3,grad=normal)").find("grad"), std::string::npos);  // nor with the backward
  EXPECT_NE(field_of(head + "ktype=e4m3,kdescale=none)").find("kdescale"), std::string::npos);
  attn_case c = fp8_case(head + "ktype=e4m3,kdescale=head)");
  ASSERT_EQ(c.quant.k_descale.size(), 1u);
  c.quant.k_descale[0] = -1.0f;
  try {
    validate(c);
    FAIL() << "a negative descale was accepted";
  } catch (const input_error& e) {
    EXPECT_EQ(e.field(), "k_descale[0]");
  }
  c.quant.k_descale = {1.0f, 2.0f};
  EXPECT_THROW(validate(c), input_error);  // one KV head in one batch element: one descale
}

TEST(fp8, materialize_stores_fp8_values_and_descales_that_fit_them) {
  for (const char* recipe : {"natural", "unit", "wide", "spread", "edges"}) {
    const attn_case c = fp8_case(std::string("ATTN(b=2,hq=4,hkv=2,lq=3,lk=9,d=16,dv=8,qtype=e4m3,ktype=e5m2,vtype=e4m3,") +
                                 "qdescale=head,kdescale=tensor,vdescale=head,descales=" + recipe + ",seed=3)");
    EXPECT_EQ(c.q.type, dtype::e4m3) << recipe;
    EXPECT_EQ(c.k.type, dtype::e5m2) << recipe;
    EXPECT_EQ(c.quant.q_descale.size(), 8u) << recipe;
    EXPECT_EQ(c.quant.k_descale.size(), 1u) << recipe;
    EXPECT_EQ(c.quant.v_descale.size(), 4u) << recipe;
    for (float s : c.quant.v_descale) EXPECT_TRUE(std::isfinite(s) && s > 0) << recipe;
    // Every stored value is finite and within the format; the value is x * s exactly.
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t e = 0; e < c.dv; ++e) {
        const double x = c.v.at(1, j, 1, e);
        ASSERT_TRUE(std::isfinite(x) && std::fabs(x) <= 448.0) << recipe;
        EXPECT_EQ(c.v_value(1, j, 1, e), x * static_cast<double>(c.quant.v_descale[3])) << recipe;
      }
  }
  // The natural recipe spans the format: some stored value of each head lies in its top binade.
  const attn_case n =
      fp8_case("ATTN(b=1,hq=2,hkv=2,lq=1,lk=64,d=16,dv=16,ktype=e4m3,vtype=e4m3,kdescale=head,vdescale=head,seed=9)");
  for (std::int64_t g = 0; g < 2; ++g) {
    double top = 0;
    for (std::int64_t j = 0; j < n.lk; ++j)
      for (std::int64_t x = 0; x < n.d; ++x) top = std::max(top, std::fabs(n.k.at(0, j, g, x)));
    EXPECT_GE(top, 256.0) << "KV head " << g;
  }
}

TEST(fp8, a_case_file_round_trips_the_fp8_fields_and_descales) {
  const attn_case c = fp8_case(
      "ATTN(b=2,hq=2,hkv=1,lq=2,lk=3,d=4,dv=4,qtype=e5m2,ktype=e4m3,vtype=e4m3,kdescale=head,vdescale=tensor,descales=wide,"
      "seed=11)");
  case_record r;
  r.c = c;
  const case_record back = parse_case_file(format_case_file(r));
  EXPECT_EQ(to_line(back.c), to_line(c));
  EXPECT_EQ(fingerprint(back.c), fingerprint(c));
  EXPECT_EQ(back.c.quant.k_descale, c.quant.k_descale);
  EXPECT_EQ(back.c.quant.v_descale, c.quant.v_descale);
}

// The f32 case holding an fp8 case's values x * s (exact in f32 where the
// descales are powers of two), in the same layout.
attn_case as_f32(const attn_case& c) {
  attn_case f = c;
  f.quant = quantization{};
  f.q = tensor::contiguous(dtype::f32, c.q.shape);
  f.k = tensor::contiguous(dtype::f32, c.k.shape);
  f.v = tensor::contiguous(dtype::f32, c.v.shape);
  f.layout = layout_kind::bshd;
  for (std::int64_t b = 0; b < c.b; ++b) {
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t x = 0; x < c.d; ++x) f.q.set(b, i, h, x, c.q_value(b, i, h, x));
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g) {
        for (std::int64_t x = 0; x < c.d; ++x) f.k.set(b, j, g, x, c.k_value(b, j, g, x));
        for (std::int64_t e = 0; e < c.dv; ++e) f.v.set(b, j, g, e, c.v_value(b, j, g, e));
      }
  }
  return f;
}

TEST(fp8, the_oracle_computes_on_the_dequantized_values) {
  attn_case c = fp8_case(
      "ATTN(b=2,hq=4,hkv=2,lq=3,lk=7,d=8,dv=4,causal,qtype=e4m3,ktype=e5m2,vtype=e4m3,qdescale=tensor,kdescale=head,"
      "vdescale=head,layout=padded,seed=21)");
  // Powers of two: x * s is then exact in f32, and the f32 case holds the same values.
  for (auto* d : {&c.quant.q_descale, &c.quant.k_descale, &c.quant.v_descale})
    for (std::size_t k = 0; k < d->size(); ++k) (*d)[k] = std::ldexp(1.0f, static_cast<int>(k % 5) - 2);
  const attn_case f = as_f32(c);
  for (std::int64_t j = 0; j < c.lk; ++j) ASSERT_EQ(f.k.at(1, j, 1, 3), c.k_value(1, j, 1, 3));
  oracle_options opt;
  const oracle_result a = reference(c, opt), b = reference(f, opt);
  ASSERT_EQ(a.o.size(), b.o.size());
  for (std::size_t k = 0; k < a.o.size(); ++k) EXPECT_EQ(a.o[k], b.o[k]) << k;
  for (std::size_t k = 0; k < a.lse.size(); ++k) EXPECT_EQ(a.lse[k], b.lse[k]) << k;
  // The descales' roundings widen the bound, and only they: never below the f32 case's.
  for (std::size_t k = 0; k < a.o.size(); ++k) EXPECT_GE(a.o_bound[k], b.o_bound[k]) << k;
  bool wider = false;
  for (std::size_t k = 0; k < a.o.size(); ++k) wider = wider || a.o_bound[k] > b.o_bound[k];
  EXPECT_TRUE(wider);
  // The fast tier agrees with MPFR on the fp8 case.
  opt.precision = oracle_precision::auto_tier;
  const oracle_result t = reference(c, opt);
  for (std::size_t k = 0; k < a.o.size(); ++k) EXPECT_NEAR(t.o[k], a.o[k], a.o_bound[k] * 0x1p-19 + 1e-300) << k;
}

TEST(fp8, a_unit_descale_is_no_descale_to_the_oracle) {
  attn_case c = fp8_case("ATTN(b=1,hq=2,hkv=1,lq=2,lk=5,d=4,dv=4,ktype=e4m3,vtype=e4m3,seed=5)");
  attn_case u = c;
  u.quant.k_scale = u.quant.v_scale = descale_granularity::tensor;
  u.quant.k_descale = u.quant.v_descale = {1.0f};
  const oracle_result a = reference(c), b = reference(u);
  for (std::size_t k = 0; k < a.o.size(); ++k) EXPECT_EQ(a.o[k], b.o[k]);
}

}  // namespace
}  // namespace attncheck
