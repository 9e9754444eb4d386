// The one-line form: exact spelling, round trip, and strict parsing.
#include <gtest/gtest.h>

#include <string>

#include "attncheck/case.hpp"
#include "contract_test_support.hpp"

namespace attncheck {
namespace {

// Expects parse_line(line) to throw input_error naming field, with says in its message.
void expect_rejected(const std::string& line, std::string_view field, std::string_view says) {
  contract_testing::expect_input_error([&] { parse_line(line); }, field, says, line);
}

constexpr const char* full_line =
    "ATTN(b=2,hq=6,hkv=2,lq=1,lk=3,d=3,dv=5,scale=0.25,causal,kpad=[3,1],mask=2x1x1x3,f16,values=dyadic,layout=bhsd,"
    "poison=nan,seed=42)";

TEST(line_form, prints_every_field_in_order) {
  attn_case c;
  c.b = 2, c.hq = 6, c.hkv = 2, c.lq = 1, c.lk = 3, c.d = 3, c.dv = 5;
  c.scale = 0.25f;
  c.causal = true;
  c.key_len = {3, 1};
  c.mask_shape = {2, 1, 1, 3};
  c.type = dtype::f16;
  c.values = value_kind::dyadic;
  c.layout = layout_kind::bhsd;
  c.poison = poison_kind::nan;
  c.seed = 42;
  EXPECT_EQ(to_line(c), full_line);
}

TEST(line_form, leaves_defaults_out_but_always_prints_shape_and_dtype) {
  EXPECT_EQ(to_line(attn_case{}), "ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,f32)");
}

TEST(line_form, scale_prints_in_shortest_round_trip_form) {
  attn_case c;
  for (float s : {0.1f, 1.0f / 3.0f, 1e-30f, -7.0f, 0x1p-149f, 3.4028235e38f, 0.125f}) {
    c.scale = s;
    const std::string line = to_line(c);
    EXPECT_EQ(parse_line(line).scale, s) << line;
  }
  c.scale = 0.1f;
  EXPECT_NE(to_line(c).find(",scale=0.1,"), std::string::npos) << to_line(c);
}

TEST(line_form, parses_the_full_line_into_every_field) {
  const attn_case c = parse_line(full_line);
  EXPECT_EQ(c.b, 2);
  EXPECT_EQ(c.hq, 6);
  EXPECT_EQ(c.hkv, 2);
  EXPECT_EQ(c.lq, 1);
  EXPECT_EQ(c.lk, 3);
  EXPECT_EQ(c.d, 3);
  EXPECT_EQ(c.dv, 5);
  EXPECT_EQ(c.scale, 0.25f);
  EXPECT_TRUE(c.causal);
  EXPECT_EQ(c.key_len, (std::vector<std::int64_t>{3, 1}));
  EXPECT_EQ(c.mask_shape, (std::array<std::int64_t, 4>{2, 1, 1, 3}));
  EXPECT_TRUE(c.mask.empty()) << "a header: materialize() fills the mask";
  EXPECT_EQ(c.type, dtype::f16);
  EXPECT_EQ(c.values, value_kind::dyadic);
  EXPECT_EQ(c.layout, layout_kind::bhsd);
  EXPECT_EQ(c.poison, poison_kind::nan);
  EXPECT_EQ(c.seed, 42u);
  EXPECT_TRUE(c.q.bits.empty());
}

TEST(line_form, tolerates_surrounding_whitespace_and_fields_in_any_order) {
  EXPECT_EQ(to_line(parse_line(std::string(" \t") + full_line + "\n")), full_line);
  EXPECT_EQ(to_line(parse_line("ATTN(seed=9,bf16,dv=1,d=1,lk=1,lq=1,hkv=1,hq=1,b=1)")),
            "ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,bf16,seed=9)");
}

// Round trip over many headers: every field at several values, each line
// canonical (to_line of its parse gives it back) and materializable.
TEST(line_form, round_trips_many_headers) {
  int count = 0;
  for (std::uint64_t seed : {0ull, 1ull, 18446744073709551615ull})
    for (int kind = 0; kind < 8; ++kind)
      for (int layout = 0; layout < 3; ++layout)
        for (int poison = 0; poison < 3; ++poison)
          for (int type = 0; type < 3; ++type) {
            attn_case c;
            c.b = 1 + (kind + layout) % 3;
            c.hkv = 1 + kind % 2;
            c.hq = c.hkv * (1 + poison);
            c.lq = 1 + type;
            c.lk = 1 + (kind * 7 + layout) % 5;
            c.d = 1 + kind;
            c.dv = 1 + (kind + 1) % 4;
            if (kind % 3 == 1) c.scale = static_cast<float>(kind) / 7.0f;
            c.causal = (kind + poison) % 2 == 0;
            if (layout == 1) {
              c.key_len.clear();
              for (std::int64_t b = 0; b < c.b; ++b) c.key_len.push_back((b * 3 + kind) % (c.lk + 1));
            }
            if (poison == 2) c.mask_shape = {c.b, 1, c.lq, c.lk};
            c.type = static_cast<dtype>(type);
            c.values = static_cast<value_kind>(kind);
            c.layout = static_cast<layout_kind>(layout);
            c.poison = static_cast<poison_kind>(poison);
            c.seed = seed;
            const std::string line = to_line(c);
            attn_case back = parse_line(line);
            ASSERT_EQ(to_line(back), line);
            materialize(back);
            materialize(c);
            ASSERT_EQ(fingerprint(back), fingerprint(c)) << line;
            ++count;
          }
  EXPECT_EQ(count, 3 * 8 * 3 * 3 * 3);
}

struct bad_line {
  const char* line;
  const char* field;
  const char* message;
};

TEST(line_form, rejects_malformed_lines_naming_the_field) {
  const bad_line cases[] = {
      {"", "ATTN", "expected ATTN("},
      {"attn(b=1)", "ATTN", "expected ATTN("},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1", "ATTN", "expected ATTN("},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1) trailing", "ATTN", "expected ATTN("},
      {"ATTN(b=1,,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)", "ATTN", "empty field"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,)", "ATTN", "empty field"},
      {"ATTN(b=1,b=2,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)", "b", "given twice"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,f16,bf16)", "dtype", "given twice"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,causal,causal)", "causal", "given twice"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,heads=2)", "heads", "unknown field"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,fp16)", "fp16", "unknown field"},
      {"ATTN(hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)", "b", "missing"},
      {"ATTN(b=x,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)", "b", "'x' is not an integer"},
      {"ATTN(b=1.5,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)", "b", "is not an integer"},
      {"ATTN(b=+1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)", "b", "is not an integer"},
      {"ATTN(b=,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)", "b", "is not an integer"},
      {"ATTN(b,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)", "b", "needs a value"},
      {"ATTN(b=99999999999999999999999999,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)", "b", "is out of range"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,seed=-1)", "seed", "is not an integer"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,seed=18446744073709551616)", "seed", "is out of range"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,scale=1e39)", "scale", "out of f32 range"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,scale=inf)", "scale", "must be finite"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,scale=nan)", "scale", "must be finite"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,scale=0.5x)", "scale", "is not a number"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,causal=1)", "causal", "is a flag"},
      {"ATTN(b=2,hq=1,hkv=1,lq=1,lk=3,d=1,dv=1,kpad=3)", "kpad", "expected [n0,n1,...]"},
      {"ATTN(b=2,hq=1,hkv=1,lq=1,lk=3,d=1,dv=1,kpad=[3,[1]])", "ATTN", "nested '['"},
      {"ATTN(b=2,hq=1,hkv=1,lq=1,lk=3,d=1,dv=1,kpad=[3,1)", "ATTN", "unclosed '['"},
      {"ATTN(b=2,hq=1,hkv=1,lq=1,lk=3,d=1,dv=1,kpad=3,1])", "ATTN", "unmatched ']'"},
      {"ATTN(b=2,hq=1,hkv=1,lq=1,lk=3,d=1,dv=1,kpad=[3,4])", "key_len[1]", "=4 is outside [0, lk=3]"},
      {"ATTN(b=2,hq=1,hkv=1,lq=1,lk=3,d=1,dv=1,kpad=[3])", "key_len", "has 1 entries, b=2 needs 2"},
      {"ATTN(b=2,hq=1,hkv=1,lq=1,lk=3,d=1,dv=1,kpad=[])", "kpad", "is not an integer"},
      {"ATTN(b=2,hq=1,hkv=1,lq=1,lk=3,d=1,dv=1,mask=2x1x3)", "mask", "four sizes"},
      {"ATTN(b=2,hq=1,hkv=1,lq=1,lk=3,d=1,dv=1,mask=2x1x1x0)", "mask", "dim 3 is 0"},
      {"ATTN(b=2,hq=1,hkv=1,lq=1,lk=3,d=1,dv=1,mask=2x1x1x2)", "mask_shape", "must be 1 or lk=3"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,values=gauss)", "values", "is not one of"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,layout=bhds)", "layout", "is not one of"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,poison=inf)", "poison", "is not one of"},
      {"ATTN(b=1,hq=6,hkv=4,lq=1,lk=1,d=1,dv=1)", "hkv", "hq=6 is not a multiple of hkv=4"},
      {"ATTN(b=1,hq=1,hkv=1,lq=0,lk=1,d=1,dv=1)", "lq", "lq=0 must be >= 1"},
      {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=2000000,d=1,dv=1)", "lk", "exceeds max_dim"},
  };
  for (const bad_line& bl : cases) expect_rejected(bl.line, bl.field, bl.message);
}

TEST(line_form, honours_the_limits_it_is_given) {
  case_limits tight;
  tight.max_dim = 4;
  EXPECT_NO_THROW(parse_line("ATTN(b=1,hq=1,hkv=1,lq=1,lk=5,d=1,dv=1)"));
  EXPECT_THROW(parse_line("ATTN(b=1,hq=1,hkv=1,lq=1,lk=5,d=1,dv=1)", tight), input_error);
}

TEST(line_form, long_garbage_is_quoted_short) {
  const std::string junk = "ATTN(b=" + std::string(10000, '7') + ",hq=1,hkv=1,lq=1,lk=1,d=1,dv=1)";
  try {
    parse_line(junk);
    FAIL() << "accepted";
  } catch (const input_error& e) {
    EXPECT_LT(std::string(e.what()).size(), 120u) << e.what();
  }
}

TEST(line_form, grad_recipe_prints_only_when_set_after_poison_and_round_trips) {
  attn_case c = parse_line(full_line);
  EXPECT_FALSE(c.grad.has_value()) << "a forward case has no dO recipe";
  EXPECT_EQ(to_line(c), full_line);
  for (grad_kind g : {grad_kind::dyadic, grad_kind::normal, grad_kind::adversarial}) {
    c.grad = g;
    const std::string line = to_line(c);
    EXPECT_NE(line.find(",poison=nan,grad=" + std::string(name(g)) + ",seed=42)"), std::string::npos) << line;
    const attn_case back = parse_line(line);
    ASSERT_TRUE(back.grad.has_value()) << line;
    EXPECT_EQ(*back.grad, g);
    EXPECT_EQ(to_line(back), line);
  }
}

TEST(line_form, rejects_an_unknown_grad_recipe_naming_the_field) {
  for (const char* bad : {"ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,grad=uniform)", "ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,grad)",
                          "ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,grad=)"}) {
    try {
      parse_line(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const input_error& e) {
      EXPECT_EQ(e.field(), "grad") << bad << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace attncheck

namespace attncheck {
namespace {

// Contract 1.2 input forms: printed after the variants, before the dtype, and back.
TEST(line_form, paged_and_ragged_forms_print_in_order_and_round_trip) {
  const std::string line =
      "ATTN(b=3,hq=2,hkv=1,lq=4,lk=40,d=8,dv=8,causal,kpad=[40,0,17],pages=16,page_order=reversed,spare_pages=2,"
      "table_tail=invalid,shared_pages=1,ragged,qlen=[4,0,1],f32,seed=9)";
  const attn_case c = parse_line(line);
  EXPECT_EQ(c.form.page_size, 16);
  EXPECT_EQ(c.form.page_order, page_order_kind::reversed);
  EXPECT_EQ(c.form.spare_pages, 2);
  EXPECT_EQ(c.form.table_tail, table_tail_kind::invalid);
  EXPECT_EQ(c.form.shared_pages, 1);
  EXPECT_TRUE(c.form.ragged);
  EXPECT_EQ(c.form.q_len, (std::vector<std::int64_t>{4, 0, 1}));
  EXPECT_EQ(to_line(c), line);
  EXPECT_EQ(c.queries(1), 0);
  EXPECT_FALSE(c.row_in_problem(2, 2));
  EXPECT_TRUE(c.row_in_problem(2, 3));
  // Defaults stay out of the line: shuffled pages, a stale tail, no spare pages.
  EXPECT_EQ(to_line(parse_line("ATTN(b=1,hq=1,hkv=1,lq=1,lk=5,d=1,dv=1,pages=3,page_order=shuffled,f32)")),
            "ATTN(b=1,hq=1,hkv=1,lq=1,lk=5,d=1,dv=1,pages=3,f32)");
  const attn_case dense = parse_line("ATTN(b=2,hq=1,hkv=1,lq=3,lk=5,d=1,dv=1,f32)");
  EXPECT_TRUE(dense.form.dense());
  EXPECT_EQ(dense.queries(1), 3);
  EXPECT_TRUE(dense.row_in_problem(1, 0));
}

// Each bad form names its field and the limit it broke.
TEST(line_form, rejects_bad_forms_naming_the_field_and_the_limit) {
  const std::string head = "ATTN(b=2,hq=1,hkv=1,lq=3,lk=40,d=1,dv=1,";
  const std::pair<std::string, std::pair<std::string, std::string>> bad[] = {
      {"pages=513", {"pages", "[1, 512] (ATTNCHECK_MAX_PAGE_SIZE)"}},
      {"pages=0", {"pages", ">= 1"}},
      {"pages=-4", {"pages", ">= 1"}},
      {"spare_pages=1", {"spare_pages", "needs the paged form"}},
      {"shared_pages=1", {"shared_pages", "needs the paged form"}},
      {"page_order=reversed", {"page_order", "needs the paged form"}},
      {"table_tail=invalid", {"table_tail", "needs the paged form"}},
      {"pages=4,page_order=random", {"page_order", "shuffled, in_order, reversed"}},
      {"pages=4,table_tail=garbage", {"table_tail", "stale, invalid"}},
      {"pages=4,spare_pages=-1", {"spare_pages", "[0, 65536]"}},
      {"pages=16,shared_pages=4", {"shared_pages", "[0, ceil(lk / P)=3]"}},
      {"qlen=[1,2]", {"qlen", "needs the ragged form"}},
      {"ragged,qlen=[1]", {"qlen", "b=2 needs 2"}},
      {"ragged,qlen=[1,4]", {"qlen[1]", "[0, lq=3]"}},
      {"ragged,qlen=[-1,0]", {"qlen[0]", "[0, lq=3]"}},
      {"ragged=1", {"ragged", "is a flag"}},
  };
  for (const auto& [fields, want] : bad) expect_rejected(head + fields + ",f32)", want.first, want.second);
  expect_rejected("ATTN(b=4097,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,ragged,f32)", "b", "4096 (ATTNCHECK_MAX_RAGGED_SEQUENCES)");
}

// A shared prefix: the first shared_pages * P keys and values of every batch
// element are batch element 0's (materialize draws them so).
TEST(line_form, shared_prefix_pages_draw_equal_keys) {
  attn_case c = parse_line("ATTN(b=3,hq=2,hkv=2,lq=1,lk=11,d=3,dv=2,pages=4,shared_pages=2,f32,seed=5)");
  materialize(c);
  for (std::int64_t b = 1; b < c.b; ++b)
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g) {
        const bool k_equal = c.k.bits_at(b, j, g, 0) == c.k.bits_at(0, j, g, 0);
        const bool v_equal = c.v.bits_at(b, j, g, 1) == c.v.bits_at(0, j, g, 1);
        if (j < 8) {
          EXPECT_TRUE(k_equal && v_equal) << "b=" << b << " j=" << j;
        } else {
          EXPECT_FALSE(k_equal && v_equal) << "b=" << b << " j=" << j << " past the shared prefix";
        }
      }
}

}  // namespace
}  // namespace attncheck
