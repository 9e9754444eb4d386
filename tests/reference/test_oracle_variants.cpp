// Contract 1.1 variants (docs/spec.md "Variants"): visibility of windows and
// chunks, the oracle's values against closed forms and against the identities
// the laws will rely on, the one-line form and case files, and the bound's
// variant terms (docs/bound.md "Variants") on f32 subjects of the class, plus
// subjects that get a variant wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attncheck/case_file.hpp"
#include "attncheck/oracle.hpp"
#include "oracle_test_support.hpp"

namespace attncheck {
namespace {

using oracle_testing::base_seed;
using oracle_testing::case_shape;
using oracle_testing::f32_dot;
using oracle_testing::shaped_case;
using oracle_testing::subject_result;
using oracle_testing::zero_result;

constexpr double inf = std::numeric_limits<double>::infinity();

// ---- visibility ----

std::string visible_row(const attn_case& c, std::int64_t i) {
  std::string s;
  for (std::int64_t j = 0; j < c.lk; ++j) s += c.visible(0, 0, i, j) ? '1' : '0';
  return s;
}

TEST(variants_visibility, window_ends_are_inclusive_and_aligned_bottom_right) {
  // Lk = 8, padding n = 7, Lq = 3: positions p = 4, 5, 6.
  attn_case c = shaped_case({.lq = 3, .lk = 8});
  c.key_len = {7};
  c.variants.window_left = 2;
  c.variants.window_right = 1;
  EXPECT_EQ(visible_row(c, 0), "00111100");  // p = 4: keys 2..5
  EXPECT_EQ(visible_row(c, 1), "00011110");  // p = 5: keys 3..6
  EXPECT_EQ(visible_row(c, 2), "00001110");  // p = 6: keys 4..7, 7 is padding
  c.causal = true;
  EXPECT_EQ(visible_row(c, 0), "00111000");
  c.causal = false;
  c.variants.window_right = -1;  // left side only
  EXPECT_EQ(visible_row(c, 0), "00111110");
  c.variants.window_left = -1;
  c.variants.window_right = 0;  // (-1, 0) is the causal rule
  attn_case causal = shaped_case({.lq = 3, .lk = 8});
  causal.key_len = {7};
  causal.causal = true;
  for (std::int64_t i = 0; i < 3; ++i) EXPECT_EQ(visible_row(c, i), visible_row(causal, i));
}

TEST(variants_visibility, chunks_floor_toward_minus_infinity) {
  // Lq = 4 > n = 2: positions -2, -1, 0, 1; chunk 2.
  attn_case c = shaped_case({.lq = 4, .lk = 6});
  c.key_len = {2};
  c.variants.chunk = 2;
  EXPECT_EQ(visible_row(c, 0), "000000");  // p = -2: chunk -1
  EXPECT_EQ(visible_row(c, 1), "000000");  // p = -1: chunk -1, not chunk 0
  EXPECT_EQ(visible_row(c, 2), "110000");  // p = 0: keys 0, 1 (no causal: key 1 is later in the chunk)
  c.causal = true;
  EXPECT_EQ(visible_row(c, 2), "100000");
  EXPECT_EQ(visible_row(c, 3), "110000");
}

// ---- the oracle's values ----

// One query, two keys with exact scores, f32 dyadic values.
attn_case two_key_case() {
  attn_case c = oracle_testing::with_zero_tensors(shaped_case({.lk = 2, .dv = 2}));
  c.scale = 1.0f;
  c.q.set(0, 0, 0, 0, 1.0);
  c.k.set(0, 0, 0, 0, 0.5);
  c.k.set(0, 1, 0, 0, -1.25);
  c.v.set(0, 0, 0, 0, 2.0);
  c.v.set(0, 0, 0, 1, -1.0);
  c.v.set(0, 1, 0, 0, 0.25);
  c.v.set(0, 1, 0, 1, 3.0);
  return c;
}

// The closed form of a two-key row with scores s0, s1 and a sink sigma.
void expect_two_key_row(const attn_case& c, double s0, double s1, double sigma) {
  const oracle_result r = reference(c);
  const double den = std::exp(s0) + std::exp(s1) + std::exp(sigma);
  const double o0 = (std::exp(s0) * 2.0 + std::exp(s1) * 0.25) / den;
  const double o1 = (std::exp(s0) * -1.0 + std::exp(s1) * 3.0) / den;
  EXPECT_NEAR(r.o[0], o0, 1e-14 * std::fabs(o0)) << to_line(c);
  EXPECT_NEAR(r.o[1], o1, 1e-14 * std::fabs(o1)) << to_line(c);
  EXPECT_NEAR(r.lse[0], std::log(den), 1e-14) << to_line(c);
}

TEST(variants_oracle, closed_forms_of_each_score_variant) {
  attn_case c = two_key_case();
  expect_two_key_row(c, 0.5, -1.25, -inf);
  c.variants.softcap = 0.75f;
  expect_two_key_row(c, 0.75 * std::tanh(0.5 / 0.75), 0.75 * std::tanh(-1.25 / 0.75), -inf);
  // ALiBi: p = n - Lq + i = 1, so key 0 gets -m and key 1 gets 0.
  c.variants.alibi = alibi_kind::random;
  c.variants.alibi_slopes = {0.375f};
  expect_two_key_row(c, 0.75 * std::tanh(0.5 / 0.75) - 0.375, 0.75 * std::tanh(-1.25 / 0.75), -inf);
  c.variants.bias_shape = {1, 1, 1, 2};
  c.variants.bias = tensor::contiguous(dtype::f32, {1, 1, 1, 2});
  c.variants.bias.set(0, 0, 0, 0, 1.5);
  c.variants.bias.set(0, 0, 0, 1, -0.5);
  expect_two_key_row(c, 0.75 * std::tanh(0.5 / 0.75) - 0.375 + 1.5, 0.75 * std::tanh(-1.25 / 0.75) - 0.5, -inf);
  c.variants.sinks = sink_kind::normal;
  c.variants.sink_logits = {0.625f};
  expect_two_key_row(c, 0.75 * std::tanh(0.5 / 0.75) - 0.375 + 1.5, 0.75 * std::tanh(-1.25 / 0.75) - 0.5, 0.625);
}

TEST(variants_oracle, a_row_without_keys_gives_zero_and_the_sink) {
  attn_case c = two_key_case();
  c.key_len = {0};
  c.variants.sinks = sink_kind::normal;
  c.variants.sink_logits = {-3.5f};
  const oracle_result r = reference(c);
  EXPECT_EQ(r.o[0], 0.0);
  EXPECT_EQ(r.o[1], 0.0);
  EXPECT_EQ(r.lse[0], -3.5);
  EXPECT_EQ(r.o_bound[0], 0.0) << "O of a row without keys is exactly 0";
  EXPECT_GT(r.lse_bound[0], 0.0) << "exp(0) and log(1) within the declared accuracy";
  EXPECT_LT(r.lse_bound[0], 1e-5);
  c.variants.sink_logits = {-std::numeric_limits<float>::infinity()};
  const oracle_result none = reference(c);
  EXPECT_EQ(none.lse[0], -inf);
  EXPECT_EQ(none.lse_bound[0], 0.0);
}

TEST(variants_oracle, a_minus_infinity_bias_is_the_boolean_mask) {
  attn_case c = two_key_case();
  c.variants.bias_shape = {1, 1, 1, 2};
  c.variants.bias = tensor::contiguous(dtype::f16, {1, 1, 1, 2});
  c.variants.bias_type = dtype::f16;
  c.variants.bias.set(0, 0, 0, 1, -inf);
  attn_case masked = two_key_case();
  masked.mask_shape = {1, 1, 1, 2};
  masked.mask = {1, 0};
  const oracle_result a = reference(c), b = reference(masked);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.lse, b.lse);  // (the bounds differ: the bias's addition is budgeted by magnitude)
}

// A random case of small shape with every variant drawn at random (the draws
// after the base case's, so the base stays any_small_case's distribution).
attn_case any_variant_case(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x5a17c0de);
  const oracle_testing::uniform_below below{rng};
  attn_case c = oracle_testing::any_small_case(seed);
  oracle_testing::draw_variants(c, below, 8.0);
  materialize(c);
  return c;
}

// The identities the variant laws stand on, checked on the oracle itself.
TEST(variants_oracle, identities_of_the_contract) {
  const std::uint64_t seed = base_seed();
  std::printf("ATTNCHECK_SEED=%llu\n", static_cast<unsigned long long>(seed));
  int sinks_checked = 0;
  for (int t = 0; t < 150; ++t) {
    const attn_case base = oracle_testing::any_small_case(seed + static_cast<std::uint64_t>(t));
    const oracle_result plain = reference(base);
    const auto same = [&](attn_case c, const char* what) {
      materialize(c);
      const oracle_result r = reference(c);
      EXPECT_EQ(r.o, plain.o) << what << ": " << to_line(c);
      EXPECT_EQ(r.lse, plain.lse) << what << ": " << to_line(c);
    };
    attn_case c = base;
    c.variants.window_left = c.lk + c.lq;
    c.variants.window_right = c.lk + c.lq;
    same(c, "a window wider than every distance");
    c = base;
    c.variants.chunk = c.lk + c.lq;
    bool no_negative_position = true;  // rows with p < 0 lie in chunk -1 and see nothing
    for (std::int64_t bi = 0; bi < c.b; ++bi) no_negative_position = no_negative_position && c.valid_keys(bi) >= c.lq;
    if (no_negative_position) same(c, "one chunk holding every position");
    c = base;
    c.variants.alibi = alibi_kind::zero;
    same(c, "zero slopes");
    c = base;
    c.variants.sinks = sink_kind::neginf;
    same(c, "sigma = -inf");
    if (!base.causal) {
      c = base;
      c.variants.window_right = 0;
      attn_case causal = base;
      causal.causal = true;
      materialize(c);
      EXPECT_EQ(reference(c).o, reference(causal).o) << "window (-1, 0) is causal: " << to_line(c);
    }
    // Sinks: O_sink = O_plain sigmoid(LSE_plain - sigma), LSE_sink = logaddexp(LSE_plain, sigma).
    c = base;
    c.variants.sinks = sink_kind::normal;
    materialize(c);
    EXPECT_EQ(c.q.bits, base.q.bits) << "drawing sinks moves no value of Q";
    const oracle_result s = reference(c);
    double v_max = 0;
    for (std::uint32_t bits : c.v.bits)
      if (std::isfinite(decode(c.type, bits))) v_max = std::max(v_max, std::fabs(decode(c.type, bits)));
    for (std::int64_t bi = 0; bi < c.b; ++bi)
      for (std::int64_t h = 0; h < c.hq; ++h)
        for (std::int64_t i = 0; i < c.lq; ++i) {
          const double l = plain.lse[plain.lse_index(bi, h, i)], sigma = c.sink_of(h);
          if (!std::isfinite(l)) continue;  // a row without keys, or non-finite inputs
          const double both = std::max(l, sigma) + std::log1p(std::exp(-std::fabs(l - sigma)));
          EXPECT_NEAR(s.lse[s.lse_index(bi, h, i)], both, 1e-13 * (1 + std::fabs(both))) << to_line(c);
          const double share = 1 / (1 + std::exp(sigma - l));
          for (std::int64_t e = 0; e < c.dv; ++e) {
            const double want = plain.o[plain.o_index(bi, i, h, e)] * share;
            // Relative, plus MPFR's own error where O cancels to nearly 0 (2^-160 of the largest |V|).
            if (std::isfinite(want)) {
              EXPECT_NEAR(s.o[s.o_index(bi, i, h, e)], want, 1e-13 * std::fabs(want) + 0x1p-160 * v_max) << to_line(c);
            }
          }
          ++sinks_checked;
        }
  }
  EXPECT_GT(sinks_checked, 300);
}

TEST(variants_oracle, alibi_equals_the_bias_of_the_same_values) {
  // Standard slopes of 8 heads are 2^-1 .. 2^-8: times |j - p| <= 8 they are exact in f32.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    attn_case c = shaped_case({.b = 2, .hq = 8, .hkv = 2, .lq = 3, .lk = 5, .d = 3, .dv = 2});
    c.seed = seed;
    c.causal = seed % 2 == 0;
    c.key_len = {5, static_cast<std::int64_t>(seed % 6)};
    c.variants.alibi = alibi_kind::standard;
    materialize(c);
    for (std::int64_t h = 0; h < 8; ++h)
      EXPECT_EQ(c.variants.alibi_slopes[static_cast<std::size_t>(h)], std::ldexp(1.0f, -static_cast<int>(h) - 1));
    attn_case b = c;
    b.variants.alibi = alibi_kind::none;
    b.variants.alibi_slopes.clear();
    b.variants.bias_shape = {2, 8, 3, 5};
    b.variants.bias = tensor::contiguous(dtype::f32, b.variants.bias_shape);
    for (std::int64_t bi = 0; bi < 2; ++bi)
      for (std::int64_t h = 0; h < 8; ++h)
        for (std::int64_t i = 0; i < 3; ++i)
          for (std::int64_t j = 0; j < 5; ++j) b.variants.bias.set(bi, h, i, j, c.alibi_at(bi, h, i, j));
    const oracle_result ra = reference(c), rb = reference(b);
    EXPECT_EQ(ra.o, rb.o) << to_line(c);
    EXPECT_EQ(ra.lse, rb.lse) << to_line(c);
  }
}

TEST(variants_oracle, standard_alibi_slopes_follow_the_published_rule) {
  attn_case c = shaped_case({.hq = 12});
  c.variants.alibi = alibi_kind::standard;
  materialize(c);
  // 12 heads: 2^(-8(h+1)/8) for h < 8, then 2^(-8(2k+1)/16) = 2^(-(2k+1)/2) for k < 4.
  for (std::int64_t h = 0; h < 12; ++h) {
    const double want = h < 8 ? std::ldexp(1.0, -static_cast<int>(h) - 1) : std::pow(2.0, -(2.0 * (h - 8) + 1) / 2);
    EXPECT_EQ(c.variants.alibi_slopes[static_cast<std::size_t>(h)], static_cast<float>(want)) << "head " << h;
  }
}

// ---- one-line form and case files ----

TEST(variants_contract, line_form_and_case_file_round_trip) {
  const attn_case c = [] {
    attn_case x = shaped_case({.b = 2, .hq = 4, .hkv = 2, .lq = 3, .lk = 7, .d = 2, .dv = 3});
    x.causal = true;
    x.variants.window_left = 3;
    x.variants.window_right = 0;
    x.variants.chunk = 4;
    x.variants.softcap = 30.0f;
    x.variants.sinks = sink_kind::mixed;
    x.variants.alibi = alibi_kind::random;
    x.variants.bias_shape = {1, 4, 1, 7};
    x.variants.bias_type = dtype::bf16;
    x.variants.bias_values = bias_kind::masking;
    x.seed = 99;
    materialize(x);
    return x;
  }();
  const std::string line = to_line(c);
  EXPECT_EQ(line,
            "ATTN(b=2,hq=4,hkv=2,lq=3,lk=7,d=2,dv=3,causal,window=[3,0],chunk=4,softcap=30,sinks=mixed,alibi=random,"
            "bias=1x4x1x7,bias_type=bf16,bias_values=masking,f32,seed=99)");
  attn_case back = parse_line(line);
  materialize(back);
  EXPECT_EQ(fingerprint(back), fingerprint(c));
  const case_record r = parse_case_file(format_case_file(case_record{c, "", "", ""}));
  EXPECT_EQ(fingerprint(r.c), fingerprint(c));
  EXPECT_EQ(to_line(r.c), line);
}

TEST(variants_contract, bad_variants_name_the_field) {
  const auto field_of = [](const std::string& line) -> std::string {
    try {
      attn_case c = parse_line(line);
      materialize(c);
    } catch (const input_error& e) {
      return e.field();
    }
    return "accepted";
  };
  EXPECT_EQ(field_of("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,window=[-2,0],f32)"), "window_left");
  EXPECT_EQ(field_of("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,window=[3],f32)"), "window");
  EXPECT_EQ(field_of("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,chunk=0,f32)"), "chunk");
  EXPECT_EQ(field_of("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,softcap=-1,f32)"), "softcap");
  EXPECT_EQ(field_of("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,sinks=loud,f32)"), "sinks");
  EXPECT_EQ(field_of("ATTN(b=1,hq=2,hkv=1,lq=1,lk=3,d=1,dv=1,bias=1x2x1x2,f32)"), "bias_shape");
  EXPECT_EQ(field_of("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,bias_type=f16,f32)"), "bias_type");
  EXPECT_EQ(field_of("ATTN(b=1,hq=2,hkv=1,lq=1,lk=3,d=1,dv=1,bias=1x2x1x3,bias_type=f16,alibi=standard,f32)"), "accepted");
  attn_case c = shaped_case({.hq = 2});
  c.variants.sinks = sink_kind::normal;
  materialize(c);
  c.variants.sink_logits[1] = std::numeric_limits<float>::quiet_NaN();
  try {
    validate(c);
    ADD_FAILURE() << "a NaN sink was accepted";
  } catch (const input_error& e) {
    EXPECT_EQ(e.field(), "sink_logits[1]");
  }
}

// ---- the bound ----

// How an f32 subject of the class evaluates the variants, or gets one wrong.
enum class variant_bug { none, cap_after_bias, sink_per_block, sink_ignored };

// f32 online softmax over key blocks of `block` keys with every variant:
// x = scale * q.k in order, softcap via tanhf, ALiBi as slope * float(j - p),
// the bias added, then the shift and expf. The sink enters as the initial
// maximum and denominator term (sink_first) or is merged after the keys as
// FlashAttention 3 does (LSE' = logaddexp(LSE, sigma), O' = O exp(LSE - LSE')).
subject_result f32_variant_attention(const attn_case& c, std::int64_t block, bool sink_first, variant_bug bug) {
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  const score_variants& w = c.variants;
  subject_result r = zero_result(c);
  const float scale = c.effective_scale();
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> acc(n(c.dv));
  for (std::int64_t bi = 0; bi < c.b; ++bi)
    for (std::int64_t h = 0; h < c.hq; ++h)
      for (std::int64_t i = 0; i < c.lq; ++i) {
        const std::int64_t g = c.kv_head(h);
        const float sigma = static_cast<float>(c.sink_of(h));
        float m = minus_inf, l = 0;
        if (sink_first && sigma > minus_inf && bug != variant_bug::sink_ignored) m = sigma, l = 1;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (std::int64_t j0 = 0; j0 < c.lk; j0 += block) {
          std::vector<std::pair<std::int64_t, float>> s;
          float bm = m;
          for (std::int64_t j = j0; j < std::min(c.lk, j0 + block); ++j) {
            if (!c.visible(bi, h, i, j)) continue;
            float x = scale * f32_dot(c, bi, h, i, j);
            const float bias = static_cast<float>(c.bias_at(bi, h, i, j));
            if (bug == variant_bug::cap_after_bias) x += bias;
            if (w.has_softcap()) x = w.softcap * std::tanh(x / w.softcap);
            if (w.has_alibi()) x += w.alibi_slopes[n(h)] * static_cast<float>(j - c.position(bi, i));
            if (bug != variant_bug::cap_after_bias) x += bias;
            s.emplace_back(j, x);
            bm = std::max(bm, x);
          }
          if (s.empty()) continue;
          const float rescale = std::exp(m - bm);
          l *= rescale;
          for (float& a : acc) a *= rescale;
          // The bug: the sink added again with every block (as if once per split).
          if (bug == variant_bug::sink_per_block && sigma > minus_inf) l += std::exp(sigma - bm);
          for (const auto& [j, sj] : s) {
            const float wj = std::exp(sj - bm);
            l += wj;
            for (std::int64_t e = 0; e < c.dv; ++e) acc[n(e)] += wj * static_cast<float>(c.v.at(bi, j, g, e));
          }
          m = bm;
        }
        const std::size_t row = n((bi * c.hq + h) * c.lq + i);
        float lse = m == minus_inf ? minus_inf : m + std::log(l);
        float factor = l > 0 ? 1 / l : 0;
        if (!sink_first && sigma > minus_inf && bug != variant_bug::sink_ignored && bug != variant_bug::sink_per_block) {
          const float merged = lse == minus_inf ? sigma : std::max(lse, sigma) + std::log1p(std::exp(-std::fabs(lse - sigma)));
          factor *= std::exp(lse - merged);  // exp(-inf) = 0 for a row without keys
          lse = merged;
        }
        r.lse[row] = lse;
        for (std::int64_t e = 0; e < c.dv; ++e)
          r.o[n(((bi * c.lq + i) * c.hq + h) * c.dv + e)] = decode(c.type, encode(c.type, acc[n(e)] * factor));
      }
  return r;
}

oracle_options options_for(const attn_case& c, std::int64_t blocks) {
  oracle_options opt;
  opt.out_type = c.type;
  opt.bound.u_compute = 0x1p-24;
  opt.bound.exp_ulps = 1;   // glibc expf, logf, log1pf: < 1 ulp (libm-test-ulps)
  opt.bound.tanh_ulps = 2;  // glibc tanhf: 2 ulps (libm-test-ulps, x86_64)
  opt.bound.key_blocks = blocks;
  return opt;
}

struct tally {
  long elements = 0, outside = 0;
  double worst = 0;
  std::string where;
};

void compare(const attn_case& c, const oracle_result& r, const subject_result& s, tally& t, bool report) {
  const auto check = [&](double got, double want, double bound, const char* what, std::size_t x) {
    if (!std::isfinite(bound)) return;
    if (bound == 0 && want == -inf && got == -inf) return;
    ++t.elements;
    const double err = got == want ? 0.0 : std::fabs(got - want);
    if (!(err <= bound)) {
      ++t.outside;
      if (report)
        ADD_FAILURE() << what << "[" << x << "] of " << to_line(c) << ": want " << want << " got " << got << " bound " << bound;
    }
    if (bound > 0 && err / bound > t.worst) {
      t.worst = err / bound;
      t.where = std::string(what) + "[" + std::to_string(x) + "] of " + to_line(c);
    }
  };
  for (std::size_t x = 0; x < r.o.size(); ++x) check(s.o[x], r.o[x], r.o_bound[x], "O", x);
  for (std::size_t x = 0; x < r.lse.size(); ++x) check(s.lse[x], r.lse[x], r.lse_bound[x], "LSE", x);
}

TEST(variants_bound, holds_for_f32_subjects_of_the_class) {
  const std::uint64_t seed = base_seed();
  std::printf("ATTNCHECK_SEED=%llu\n", static_cast<unsigned long long>(seed));
  tally first, merged;
  for (int t = 0; t < 400; ++t) {
    const attn_case c = any_variant_case(seed + static_cast<std::uint64_t>(t));
    const std::int64_t block = 2, blocks = (c.lk + block - 1) / block;
    compare(c, reference(c, options_for(c, blocks)), f32_variant_attention(c, block, true, variant_bug::none), first, true);
    compare(c, reference(c, options_for(c, blocks)), f32_variant_attention(c, block, false, variant_bug::none), merged, true);
  }
  std::printf("sink first: %ld elements, worst error/bound %.3g at %s\nsink merged last: %ld, worst %.3g at %s\n", first.elements,
              first.worst, first.where.c_str(), merged.elements, merged.worst, merged.where.c_str());
  EXPECT_GT(first.elements, 2000);
}

TEST(variants_bound, catches_a_variant_done_wrong) {
  const std::uint64_t seed = base_seed();
  for (variant_bug bug : {variant_bug::cap_after_bias, variant_bug::sink_per_block, variant_bug::sink_ignored}) {
    tally t;
    int relevant = 0;
    for (int k = 0; k < 400; ++k) {
      attn_case c = any_variant_case(seed + static_cast<std::uint64_t>(k));
      // Cases where the bug has something to act on, at scales where it shows.
      if (bug == variant_bug::cap_after_bias) {
        if (!c.variants.has_bias() || c.variants.softcap == 0) continue;
        c.variants.softcap = 0.5f;
      } else if (!c.variants.has_sinks()) {
        continue;
      }
      if (bug == variant_bug::sink_per_block && c.lk < 3) continue;
      ++relevant;
      compare(c, reference(c, options_for(c, (c.lk + 1) / 2)), f32_variant_attention(c, 2, true, bug), t, false);
    }
    std::printf("bug %d: %d cases, %ld of %ld elements outside the bound\n", static_cast<int>(bug), relevant, t.outside,
                t.elements);
    EXPECT_GT(relevant, 20);
    EXPECT_GT(t.outside, t.elements / 20) << "bug " << static_cast<int>(bug) << " passes the bound too often";
  }
}

}  // namespace
}  // namespace attncheck
