// The case type: docs/spec.md visibility, validation messages, materialize().
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attncheck/case.hpp"

namespace attncheck {
namespace {

attn_case shape(std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t lq, std::int64_t lk, std::int64_t d,
                std::int64_t dv) {
  attn_case c;
  c.b = b, c.hq = hq, c.hkv = hkv, c.lq = lq, c.lk = lk, c.d = d, c.dv = dv;
  return c;
}

// B=2, Hq=6 over Hkv=2 (G=3), Lq=3, Lk=4, D and Dv as given, causal, key
// lengths {2, 4} and a mask of mask_shape, seeded: some keys and some query
// rows go unused.
attn_case gqa_causal_padded_masked(std::int64_t d, std::int64_t dv, const std::array<std::int64_t, 4>& mask_shape,
                                   std::uint64_t seed) {
  attn_case c = shape(2, 6, 2, 3, 4, d, dv);
  c.causal = true;
  c.key_len = {2, 4};
  c.mask_shape = mask_shape;
  c.seed = seed;
  return c;
}

// Rows of the visibility pattern of (b, h) as strings of 0/1, one per query.
std::vector<std::string> pattern(const attn_case& c, std::int64_t bi, std::int64_t h) {
  std::vector<std::string> rows;
  for (std::int64_t i = 0; i < c.lq; ++i) {
    std::string r;
    for (std::int64_t j = 0; j < c.lk; ++j) r += c.visible(bi, h, i, j) ? '1' : '0';
    rows.push_back(r);
  }
  return rows;
}

using rows = std::vector<std::string>;

TEST(visible, causal_5x5_is_lower_triangular_with_diagonal) {
  attn_case c = shape(1, 1, 1, 5, 5, 1, 1);
  c.causal = true;
  EXPECT_EQ(pattern(c, 0, 0), (rows{"10000", "11000", "11100", "11110", "11111"}));
}

TEST(visible, causal_more_queries_than_keys_leaves_first_rows_empty) {
  attn_case c = shape(1, 1, 1, 4, 2, 1, 1);
  c.causal = true;
  EXPECT_EQ(pattern(c, 0, 0), (rows{"00", "00", "10", "11"}));
}

TEST(visible, causal_is_bottom_right_aligned_to_each_batch_valid_keys) {
  attn_case c = shape(3, 1, 1, 2, 5, 1, 1);
  c.causal = true;
  c.key_len = {3, 5, 0};
  EXPECT_EQ(pattern(c, 0, 0), (rows{"11000", "11100"})) << "pos(b,i) = (n[b]-Lq)+i with n=3";
  EXPECT_EQ(pattern(c, 1, 0), (rows{"11110", "11111"}));
  EXPECT_EQ(pattern(c, 2, 0), (rows{"00000", "00000"})) << "an empty cache sees nothing";
}

TEST(visible, single_decode_query_sees_every_valid_key) {
  attn_case c = shape(2, 1, 1, 1, 4, 1, 1);
  c.causal = true;
  c.key_len = {2, 4};
  EXPECT_EQ(pattern(c, 0, 0), (rows{"1100"}));
  EXPECT_EQ(pattern(c, 1, 0), (rows{"1111"}));
}

TEST(visible, padding_without_causal_keeps_keys_below_n) {
  attn_case c = shape(2, 1, 1, 2, 3, 1, 1);
  c.key_len = {1, 3};
  EXPECT_EQ(pattern(c, 0, 0), (rows{"100", "100"}));
  EXPECT_EQ(pattern(c, 1, 0), (rows{"111", "111"}));
}

TEST(visible, boolean_mask_broadcasts_and_ands_with_causal) {
  attn_case c = shape(2, 2, 1, 2, 3, 1, 1);
  c.causal = true;
  c.mask_shape = {1, 2, 1, 3};  // per head, shared by batch and rows
  c.mask = {0, 1, 1,            // head 0
            1, 0, 1};           // head 1
  EXPECT_TRUE(c.mask_allows(1, 0, 1, 2));
  EXPECT_FALSE(c.mask_allows(1, 1, 0, 1));
  EXPECT_EQ(pattern(c, 0, 0), (rows{"010", "011"}));
  EXPECT_EQ(pattern(c, 1, 1), (rows{"100", "101"}));
}

TEST(visible, size_one_mask_dims_broadcast_over_heads_and_rows) {
  attn_case c = shape(2, 3, 1, 2, 3, 1, 1);
  c.mask_shape = {2, 1, 1, 3};  // per batch element: every head and row shares it
  c.mask = {1, 0, 1,            // batch 0
            0, 1, 1};           // batch 1
  for (std::int64_t h = 0; h < 3; ++h) {
    EXPECT_EQ(pattern(c, 0, h), (rows{"101", "101"})) << "head " << h;
    EXPECT_EQ(pattern(c, 1, h), (rows{"011", "011"})) << "head " << h;
  }
  c.mask_shape = {1, 1, 2, 1};  // per row only: one bit for the whole row
  c.mask = {0, 1};
  EXPECT_EQ(pattern(c, 1, 2), (rows{"000", "111"}));
}

TEST(visible, mask_true_means_allowed) {
  attn_case c = shape(1, 1, 1, 1, 2, 1, 1);
  c.mask_shape = {1, 1, 1, 2};
  c.mask = {1, 0};
  EXPECT_EQ(pattern(c, 0, 0), (rows{"10"}));
}

TEST(used_slots, matches_visible_for_gqa_causal_padded_masked_case) {
  attn_case c = gqa_causal_padded_masked(1, 1, {2, 6, 1, 4}, 9);
  materialize(c);
  const slot_usage u = used_slots(c);
  int unused_keys = 0, unused_rows = 0;
  for (std::int64_t b = 0; b < c.b; ++b) {
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g) {
        bool any = false;
        for (std::int64_t h = g * 3; h < g * 3 + 3; ++h)
          for (std::int64_t i = 0; i < c.lq; ++i) any = any || c.visible(b, h, i, j);
        EXPECT_EQ(u.key(c, b, j, g), any) << b << " " << j << " " << g;
        unused_keys += !any;
      }
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h) {
        bool any = false;
        for (std::int64_t j = 0; j < c.lk; ++j) any = any || c.visible(b, h, i, j);
        EXPECT_EQ(u.query_row(c, b, i, h), any);
        unused_rows += !any;
      }
  }
  EXPECT_GT(unused_keys, 0);
  EXPECT_GT(unused_rows, 0);
}

TEST(attn_case, kv_head_is_h_over_group) {
  const attn_case c = shape(1, 6, 2, 1, 1, 1, 1);
  EXPECT_EQ(c.group(), 3);
  const std::int64_t want[] = {0, 0, 0, 1, 1, 1};  // not h % hkv = 0,1,0,1,0,1
  for (std::int64_t h = 0; h < 6; ++h) EXPECT_EQ(c.kv_head(h), want[h]);
}

TEST(attn_case, effective_scale_defaults_to_inverse_sqrt_d) {
  attn_case c = shape(1, 1, 1, 1, 1, 4, 1);
  EXPECT_EQ(c.effective_scale(), 0.5f);
  c.d = 3;
  EXPECT_EQ(c.effective_scale(), 0x1.279a74p-1f);
  c.scale = -2.0f;
  EXPECT_EQ(c.effective_scale(), -2.0f);
}

// validate(): each bad field gives its own field name and the limit.
struct bad_case {
  const char* what;
  std::function<void(attn_case&)> spoil;
  std::string field;
  std::string message;
  bool tensors = false;
  case_limits limits{};
};

attn_case good_case() {
  attn_case c = shape(2, 6, 2, 2, 3, 3, 5);
  c.causal = true;
  c.key_len = {3, 1};
  c.mask_shape = {2, 1, 1, 3};
  c.type = dtype::f16;
  c.seed = 42;
  materialize(c);
  return c;
}

TEST(validate, accepts_a_materialized_case_and_a_bare_header) {
  attn_case c = good_case();
  EXPECT_NO_THROW(validate(c));
  c.q = c.k = c.v = tensor{};
  c.mask.clear();
  EXPECT_NO_THROW(validate(c, false));
  EXPECT_THROW(validate(c, true), input_error);
}

TEST(validate, names_the_field_and_the_limit) {
  constexpr std::int64_t big = 1 << 20;
  case_limits small_bytes;
  small_bytes.max_bytes = 100;
  const bad_case cases[] = {
      {"hq not a multiple", [](attn_case& c) { c.hq = 6, c.hkv = 4; }, "hkv", "hq=6 is not a multiple of hkv=4"},
      {"lq zero", [](attn_case& c) { c.lq = 0; }, "lq", "lq=0 must be >= 1"},
      {"lk zero", [](attn_case& c) { c.lk = 0; }, "lk", "lk=0 must be >= 1"},
      {"b negative", [](attn_case& c) { c.b = -3; }, "b", "b=-3 must be >= 1"},
      {"dv over max_dim", [](attn_case& c) { c.dv = (1 << 20) + 1; }, "dv", "dv=1048577 exceeds max_dim=1048576"},
      {"K over max_elements",
       [](attn_case& c) { c.b = 65, c.lk = 1 << 20, c.hq = c.hkv = 1, c.d = 1, c.key_len.clear(), c.mask_shape = {}; }, "k",
       "b*lk*hkv*d = 65*1048576*1*1 = 68157440 exceeds max_elements=67108864"},
      {"Q overflows", [](attn_case& c) { c.b = c.lq = c.hq = c.d = big, c.hkv = 1; }, "q",
       "b*lq*hq*d = 1048576*1048576*1048576*1048576 overflows int64"},
      {"pairs over max_pairs",
       [](attn_case& c) { c.b = 1, c.hq = c.hkv = 1, c.lq = 1 << 15, c.lk = 1 << 14, c.key_len.clear(), c.mask_shape = {}; },
       "shape", "exceeds max_pairs=268435456"},
      {"key_len count", [](attn_case& c) { c.key_len = {1}; }, "key_len", "has 1 entries, b=2 needs 2"},
      {"key_len above lk",
       [](attn_case& c) {
         c.key_len = {3, 4};
       },
       "key_len[1]", "=4 is outside [0, lk=3]"},
      {"key_len negative",
       [](attn_case& c) {
         c.key_len = {-1, 0};
       },
       "key_len[0]", "=-1 is outside [0, lk=3]"},
      {"mask dim neither 1 nor full",
       [](attn_case& c) {
         c.mask_shape = {2, 1, 1, 2};
       },
       "mask_shape", "dim 3 is 2, must be 1 or lk=3"},
      {"mask dim zero",
       [](attn_case& c) {
         c.mask_shape = {2, 0, 1, 3};
       },
       "mask_shape", "dim 1 is 0, must be 1 or hq=6"},
      {"mask length", [](attn_case& c) { c.mask.pop_back(); }, "mask", "has 5 entries, mask_shape 2x1x1x3 needs 6"},
      {"mask entry", [](attn_case& c) { c.mask[4] = 2; }, "mask[4]", "=2 must be 0 or 1"},
      {"mask without shape", [](attn_case& c) { c.mask_shape = {}; }, "mask", "has 6 entries but mask_shape is unset"},
      {"scale NaN", [](attn_case& c) { c.scale = NAN; }, "scale", "must be finite"},
      {"dtype out of range", [](attn_case& c) { c.type = static_cast<dtype>(7); }, "dtype", "is not f32, f16 or bf16"},
      {"Q missing", [](attn_case& c) { c.q = tensor{}; }, "q", "Q is missing", true},
      {"Q of the wrong type", [](attn_case& c) { c.q.type = dtype::bf16; }, "q.type", "is bf16, the case's dtype is f16"},
      {"K of the wrong shape", [](attn_case& c) { c.k.shape[2] = 6; }, "k.shape",
       "is [2,3,6,3], K needs (b,lk,hkv,d) = [2,3,2,3]"},
      {"V of D's width", [](attn_case& c) { c.v.shape[3] = 3; }, "v.shape", "V needs (b,lk,hkv,dv) = [2,3,2,5]"},
      {"negative stride", [](attn_case& c) { c.k.stride[1] = -1; }, "k.stride[1]", "=-1 must be >= 0"},
      {"negative offset", [](attn_case& c) { c.q.offset = -1; }, "q.offset", "=-1 must be >= 0"},
      {"storage too short", [](attn_case& c) { c.v.bits.pop_back(); }, "v.storage",
       "the view reaches element 59 but the storage holds 59 elements"},
      {"hostile stride", [](attn_case& c) { c.q.stride[0] = INT64_MAX; }, "q.stride", "beyond int64"},
      {"16-bit pattern too wide", [](attn_case& c) { c.k.bits[3] = 0x10000u; }, "k.bits",
       "element 3 has bits above the 16-bit f16 width"},
      {"over max_bytes", [](attn_case&) {}, "case", "over max_bytes=100", false, small_bytes},
  };
  for (const bad_case& bc : cases) {
    attn_case c = good_case();
    bc.spoil(c);
    try {
      validate(c, true, bc.limits);
      ADD_FAILURE() << bc.what << ": accepted";
    } catch (const input_error& e) {
      EXPECT_EQ(e.field(), bc.field) << bc.what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(bc.message), std::string::npos) << bc.what << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(bc.field + ": ", 0), 0u) << e.what();
    }
  }
}

TEST(validate, zero_stride_broadcast_view_is_accepted) {
  attn_case c = good_case();
  c.k.stride[1] = 0;  // every key reads row 0: legal read-only use
  EXPECT_NO_THROW(validate(c));
}

// materialize()
attn_case materialized(attn_case c) {
  materialize(c);
  return c;
}

std::vector<double> values_of(const tensor& t) {
  std::vector<double> out;
  for (std::int64_t a = 0; a < t.shape[0]; ++a)
    for (std::int64_t s = 0; s < t.shape[1]; ++s)
      for (std::int64_t h = 0; h < t.shape[2]; ++h)
        for (std::int64_t x = 0; x < t.shape[3]; ++x) out.push_back(t.at(a, s, h, x));
  return out;
}

std::vector<std::uint32_t> bits_of(const tensor& t) {
  std::vector<std::uint32_t> out;
  for (std::int64_t a = 0; a < t.shape[0]; ++a)
    for (std::int64_t s = 0; s < t.shape[1]; ++s)
      for (std::int64_t h = 0; h < t.shape[2]; ++h)
        for (std::int64_t x = 0; x < t.shape[3]; ++x) out.push_back(t.bits_at(a, s, h, x));
  return out;
}

TEST(materialize, same_header_gives_same_bits_and_other_seed_differs) {
  attn_case c = good_case();
  const attn_case again = materialized(c);
  EXPECT_EQ(fingerprint(c), fingerprint(again));
  EXPECT_EQ(c.q.bits, again.q.bits);
  c.seed = 43;
  materialize(c);
  EXPECT_NE(c.q.bits, again.q.bits);
  EXPECT_NE(c.k.bits, again.k.bits);
  EXPECT_NE(c.v.bits, again.v.bits);
}

TEST(materialize, replaces_whatever_tensors_the_case_held) {
  attn_case c = good_case();
  const std::uint64_t want = fingerprint(c);
  c.q.bits.assign(3, 7u);
  c.mask = {1};
  materialize(c);
  EXPECT_EQ(fingerprint(c), want);
}

// Pinned fingerprints: a change to the generator, the layouts or the line
// form changes these, and every saved seed would then replay a different case.
TEST(materialize, pinned_fingerprints) {
  struct pin {
    const char* line;
    std::uint64_t hash;
  };
  const pin pins[] = {
      {"ATTN(b=1,hq=1,hkv=1,lq=2,lk=3,d=4,dv=4,f32,seed=1)", 0x6567aaf5a3cf9be6ull},
      {"ATTN(b=2,hq=6,hkv=2,lq=1,lk=3,d=3,dv=5,scale=0.25,causal,kpad=[3,1],mask=2x1x1x3,f16,values=dyadic,layout=bhsd,poison=nan,seed=42)",
       0x081e8c3cc5880413ull},
      {"ATTN(b=2,hq=4,hkv=1,lq=3,lk=5,d=2,dv=3,kpad=[5,2],bf16,values=huge_v,layout=padded,poison=big,seed=7)",
       0x16769ac8073b065full},
      {"ATTN(b=1,hq=2,hkv=2,lq=4,lk=4,d=8,dv=2,causal,f32,values=large_logits,seed=3)", 0x5880ccc063598e88ull},
  };
  for (const pin& p : pins) EXPECT_EQ(fingerprint(materialized(parse_line(p.line))), p.hash) << p.line;
}

TEST(materialize, values_do_not_depend_on_layout) {
  attn_case c = good_case();
  const std::vector<std::uint32_t> q = bits_of(c.q), k = bits_of(c.k), v = bits_of(c.v);
  for (layout_kind l : {layout_kind::bhsd, layout_kind::padded}) {
    c.layout = l;
    materialize(c);
    EXPECT_EQ(bits_of(c.q), q) << name(l);
    EXPECT_EQ(bits_of(c.k), k) << name(l);
    EXPECT_EQ(bits_of(c.v), v) << name(l);
  }
}

TEST(materialize, a_key_keeps_its_value_when_lk_grows) {
  attn_case shorter = shape(2, 4, 2, 2, 3, 3, 2);
  shorter.seed = 5;
  attn_case longer = shorter;
  longer.lk = 7;
  materialize(shorter);
  materialize(longer);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t g = 0; g < 2; ++g)
        for (std::int64_t x = 0; x < 3; ++x) EXPECT_EQ(shorter.k.bits_at(b, j, g, x), longer.k.bits_at(b, j, g, x));
  EXPECT_EQ(shorter.q.bits, longer.q.bits);
}

TEST(materialize, layouts_have_their_strides_and_padded_gaps_hold_the_sentinel) {
  attn_case c = shape(2, 3, 3, 2, 4, 5, 1);
  c.layout = layout_kind::bhsd;
  materialize(c);
  EXPECT_EQ(c.k.stride, (dims4{3 * 4 * 5, 5, 4 * 5, 1}));
  c.layout = layout_kind::padded;
  materialize(c);
  EXPECT_GT(c.q.offset, 0);
  EXPECT_GT(c.q.stride[2], c.d);
  EXPECT_GT(c.q.stride[1], c.hq * c.q.stride[2]);
  EXPECT_GT(c.q.stride[0], c.lq * c.q.stride[1]);
  std::vector<bool> in_view(c.q.bits.size());
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t i = 0; i < c.lq; ++i)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t x = 0; x < c.d; ++x) in_view[static_cast<std::size_t>(c.q.index(b, i, h, x))] = true;
  std::size_t gaps = 0;
  for (std::size_t e = 0; e < in_view.size(); ++e) {
    if (in_view[e]) {
      EXPECT_FALSE(std::isnan(decode(c.type, c.q.bits[e])));
    } else {
      EXPECT_EQ(c.q.bits[e], gap_sentinel(c.type));
      ++gaps;
    }
  }
  EXPECT_GE(gaps, static_cast<std::size_t>(c.b * c.lq * c.hq)) << "a gap after every head vector";
}

TEST(make_output, has_o_shape_zero_view_and_sentinel_gaps) {
  attn_case c = good_case();
  c.layout = layout_kind::padded;
  const tensor o = make_output(c);
  EXPECT_EQ(o.shape, output_shape(c));
  EXPECT_EQ(o.type, dtype::f16);
  for (std::uint32_t b : bits_of(o)) EXPECT_EQ(b, 0u);
  EXPECT_NE(std::count(o.bits.begin(), o.bits.end(), gap_sentinel(dtype::f16)), 0);
  EXPECT_TRUE(view_in_bounds(o));
  c.layout = layout_kind::bhsd;
  EXPECT_EQ(make_output(c).stride, (dims4{6 * 2 * 5, 5, 2 * 5, 1}));
}

TEST(materialize, dyadic_values_are_quarters_in_minus_two_to_two) {
  attn_case c = shape(2, 4, 2, 5, 6, 7, 3);
  c.values = value_kind::dyadic;
  c.type = dtype::bf16;
  materialize(c);
  std::vector<double> all = values_of(c.q);
  for (const tensor* t : {&c.k, &c.v})
    for (double x : values_of(*t)) all.push_back(x);
  for (double x : all) {
    EXPECT_EQ(x * 4, std::round(x * 4)) << x;
    EXPECT_LE(std::fabs(x), 2.0);
  }
  EXPECT_EQ(*std::max_element(all.begin(), all.end()), 2.0);
  EXPECT_EQ(*std::min_element(all.begin(), all.end()), -2.0);
}

TEST(materialize, normal_values_have_mean_zero_and_variance_one) {
  attn_case c = shape(4, 8, 8, 16, 16, 16, 16);
  materialize(c);
  const std::vector<double> v = values_of(c.v);
  double sum = 0, sq = 0;
  for (double x : v) sum += x, sq += x * x;
  const double n = static_cast<double>(v.size());
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(sq / n, 1.0, 0.05);
  EXPECT_GT(*std::max_element(v.begin(), v.end()), 3.0);
}

TEST(materialize, uniform_values_fill_minus_one_to_one) {
  attn_case c = shape(1, 4, 4, 16, 16, 16, 16);
  c.values = value_kind::uniform;
  materialize(c);
  const std::vector<double> q = values_of(c.q);
  for (double x : q) ASSERT_LE(std::fabs(x), 1.0);
  EXPECT_LT(*std::min_element(q.begin(), q.end()), -0.95);
  EXPECT_GT(*std::max_element(q.begin(), q.end()), 0.95);
}

// Largest |score| over every (b, h, i, j), straight from docs/spec.md.
double max_abs_score(const attn_case& c) {
  double m = 0;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i)
        for (std::int64_t j = 0; j < c.lk; ++j) {
          double s = 0;
          for (std::int64_t x = 0; x < c.d; ++x) s += c.q.at(b, i, h, x) * c.k.at(b, j, c.kv_head(h), x);
          m = std::max(m, std::fabs(s * c.effective_scale()));
        }
  return m;
}

TEST(materialize, large_logits_reach_the_target_without_overflowing_storage) {
  const struct {
    dtype t;
    double lo, hi;
  } targets[] = {{dtype::f32, 2e3, 1.01e4}, {dtype::f16, 1.2e4, 65504}, {dtype::bf16, 2e3, 1.02e4}};
  for (const auto& tg : targets) {
    attn_case c = shape(2, 4, 2, 6, 7, 8, 3);
    c.values = value_kind::large_logits;
    c.type = tg.t;
    c.seed = 11;
    materialize(c);
    for (double x : values_of(c.q)) ASSERT_TRUE(std::isfinite(x)) << name(tg.t);
    for (double x : values_of(c.k)) ASSERT_TRUE(std::isfinite(x)) << name(tg.t);
    const double m = max_abs_score(c);
    EXPECT_GE(m, tg.lo) << name(tg.t);
    EXPECT_LE(m, tg.hi) << name(tg.t);
  }
}

TEST(materialize, dominant_key_beats_every_other_visible_key_by_far) {
  attn_case c = shape(2, 6, 2, 3, 5, 3, 2);
  c.values = value_kind::dominant;
  c.causal = true;
  c.key_len = {5, 3};
  c.scale = -0.5f;  // the sign of the scale must not turn the big key into the smallest
  materialize(c);
  int rows_checked = 0;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        std::vector<double> s;
        for (std::int64_t j = 0; j < c.lk; ++j) {
          if (!c.visible(b, h, i, j)) continue;
          double dot = 0;
          for (std::int64_t x = 0; x < c.d; ++x) dot += c.q.at(b, i, h, x) * c.k.at(b, j, c.kv_head(h), x);
          s.push_back(dot * c.effective_scale());
        }
        if (s.size() < 2) continue;  // nothing to beat
        ++rows_checked;
        std::sort(s.rbegin(), s.rend());
        EXPECT_GE(s[0] - s[1], 29.0) << b << " " << h << " " << i;
      }
  EXPECT_GE(rows_checked, 20);
}

TEST(materialize, equal_keys_repeat_one_row) {
  attn_case c = shape(2, 4, 2, 2, 5, 3, 2);
  c.values = value_kind::equal_keys;
  c.type = dtype::f16;
  materialize(c);
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t j = 0; j < c.lk; ++j)
      for (std::int64_t g = 0; g < c.hkv; ++g)
        for (std::int64_t x = 0; x < c.d; ++x) EXPECT_EQ(c.k.bits_at(b, j, g, x), c.k.bits_at(0, 0, 0, x));
  EXPECT_NE(c.k.bits_at(0, 0, 0, 0), c.k.bits_at(0, 0, 0, 1)) << "the row itself is not constant";
  EXPECT_NE(c.v.bits_at(0, 0, 0, 0), c.v.bits_at(0, 1, 0, 0)) << "values still differ";
}

// The case the V-range tests read: B=2, Hq=Hkv=2, Lq=1, Lk=32, D=1, Dv=16,
// values of kind k in type t, materialized (2048 V elements).
attn_case v_range_case(value_kind k, dtype t) {
  attn_case c = shape(2, 2, 2, 1, 32, 1, 16);
  c.values = k;
  c.type = t;
  materialize(c);
  return c;
}

TEST(materialize, huge_v_spans_thousands_to_the_type_limit) {
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
    const attn_case c = v_range_case(value_kind::huge_v, t);
    const std::vector<double> v = values_of(c.v);
    double lo = INFINITY, hi = 0;
    for (double x : v) {
      ASSERT_TRUE(std::isfinite(x)) << name(t);
      lo = std::min(lo, std::fabs(x)), hi = std::max(hi, std::fabs(x));
    }
    EXPECT_GE(lo, 1024.0) << name(t);
    if (t == dtype::f16)
      EXPECT_GT(hi, 32768.0);  // the top binade, clipped at 65504
    else
      EXPECT_GT(hi, 1e28) << name(t);
    EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](double x) { return x < 0; }));
  }
}

TEST(materialize, tiny_v_includes_subnormals_and_normals_near_the_bottom) {
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
    const attn_case c = v_range_case(value_kind::tiny_v, t);
    const double min_normal = t == dtype::f16 ? 0x1p-14 : 0x1p-126;
    int sub = 0, normal = 0;
    for (double x : values_of(c.v)) {
      ASSERT_LE(std::fabs(x), 8 * min_normal) << name(t);
      (std::fabs(x) < min_normal ? sub : normal)++;
    }
    EXPECT_GT(sub, 0) << name(t);
    EXPECT_GT(normal, 0) << name(t);
  }
}

TEST(materialize, mask_mixes_random_rows_with_all_false_and_all_true_rows) {
  attn_case c = shape(2, 4, 2, 16, 12, 1, 1);
  c.mask_shape = {2, 4, 16, 12};
  c.seed = 3;
  materialize(c);
  ASSERT_EQ(c.mask.size(), 2u * 4 * 16 * 12);
  int none = 0, all = 0, mixed = 0;
  std::size_t ones = 0;
  for (std::size_t r = 0; r < c.mask.size() / 12; ++r) {
    const auto first = c.mask.begin() + static_cast<std::ptrdiff_t>(r * 12);
    const auto n = std::count(first, first + 12, std::uint8_t{1});
    ones += static_cast<std::size_t>(n);
    (n == 0 ? none : n == 12 ? all : mixed)++;
  }
  EXPECT_GT(none, 0);
  EXPECT_GT(all, 0);
  EXPECT_GT(mixed, none + all);
  const double density = static_cast<double>(ones) / static_cast<double>(c.mask.size());
  EXPECT_GT(density, 0.4);
  EXPECT_LT(density, 0.6);
}

TEST(materialize, poison_fills_exactly_the_unused_slots) {
  const attn_case c = gqa_causal_padded_masked(2, 3, {2, 1, 3, 4}, 21);
  for (poison_kind p : {poison_kind::nan, poison_kind::big}) {
    for (dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
      attn_case clean = c;
      clean.type = t;
      materialize(clean);
      attn_case poisoned = clean;
      poisoned.poison = p;
      materialize(poisoned);
      const slot_usage u = used_slots(poisoned);
      const double big = std::min(1e30, largest_finite(t));
      auto check = [&](const tensor& pt, const tensor& ct, bool used, std::int64_t b, std::int64_t s, std::int64_t h,
                       std::int64_t x) {
        const double v = pt.at(b, s, h, x);
        if (used)
          EXPECT_EQ(pt.bits_at(b, s, h, x), ct.bits_at(b, s, h, x));
        else if (p == poison_kind::nan)
          EXPECT_TRUE(std::isnan(v));
        else
          EXPECT_EQ(std::fabs(v), decode(t, encode(t, big)));
      };
      int poisoned_slots = 0;
      for (std::int64_t b = 0; b < c.b; ++b) {
        for (std::int64_t i = 0; i < c.lq; ++i)
          for (std::int64_t h = 0; h < c.hq; ++h)
            for (std::int64_t x = 0; x < c.d; ++x) {
              check(poisoned.q, clean.q, u.query_row(c, b, i, h), b, i, h, x);
              poisoned_slots += !u.query_row(c, b, i, h);
            }
        for (std::int64_t j = 0; j < c.lk; ++j)
          for (std::int64_t g = 0; g < c.hkv; ++g) {
            for (std::int64_t x = 0; x < c.d; ++x) check(poisoned.k, clean.k, u.key(c, b, j, g), b, j, g, x);
            for (std::int64_t e = 0; e < c.dv; ++e) check(poisoned.v, clean.v, u.key(c, b, j, g), b, j, g, e);
            poisoned_slots += !u.key(c, b, j, g);
          }
      }
      EXPECT_GT(poisoned_slots, 4) << name(p) << " " << name(t);
    }
  }
}

TEST(materialize, rejects_an_invalid_header) {
  attn_case c = shape(1, 3, 2, 1, 1, 1, 1);
  EXPECT_THROW(materialize(c), input_error);
  case_limits tight;
  tight.max_elements = 10;
  attn_case d = shape(1, 1, 1, 4, 4, 4, 1);
  EXPECT_THROW(materialize(d, tight), input_error);
}

TEST(materialize, padded_storage_counts_against_the_limits) {
  attn_case c = shape(1, 1, 1, 1, 8, 1, 1);
  case_limits tight;
  tight.max_bytes = 4 * (8 + 8 + 8 + 1) + 1;  // dense fits
  EXPECT_NO_THROW(validate(c, false, tight));
  c.layout = layout_kind::padded;
  EXPECT_THROW(validate(c, false, tight), input_error);
}

}  // namespace
}  // namespace attncheck
