// The kernel's two instruction sets compute the same bits: the portable path
// emulates FMA exactly and follows the AVX2 path's operation order, so the
// declared numbers (exp_ulps, nb) and every bitwise claim hold on both. Also:
// the software f16 conversions both paths use give F16C's bits.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "attnimpl/attention.hpp"
#include "attnimpl/exp.hpp"
#include "convert.hpp"
#include "support.hpp"

namespace {

using namespace attnimpl_test;
using attnimpl::isa;

std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float from(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
/// Same bits, or both NaN (NaN payloads are not part of any claim).
bool same(float a, float b) { return bits(a) == bits(b) || (std::isnan(a) && std::isnan(b)); }

#define NEEDS_AVX2()                       \
  if (!attnimpl::isa_supported(isa::avx2)) \
  GTEST_SKIP() << "this CPU has no AVX2+FMA+F16C: nothing to compare the portable path with"

#define NEEDS_AVX512()                       \
  if (!attnimpl::isa_supported(isa::avx512)) \
  GTEST_SKIP() << "this CPU has no AVX-512 F+BW+VL (with AVX2+FMA+F16C): the AVX-512 path cannot run here"

TEST(isa, names_parse_and_resolve) {
  for (isa i : {isa::automatic, isa::avx2, isa::portable, isa::avx512}) EXPECT_EQ(attnimpl::parse_isa(attnimpl::isa_name(i)), i);
  EXPECT_EQ(attnimpl::isa_name(isa::avx512), std::string("avx512"));
  if (attnimpl::isa_supported(isa::avx512)) {
    EXPECT_EQ(attnimpl::resolve_isa(isa::automatic), isa::avx512);
    EXPECT_TRUE(attnimpl::isa_supported(isa::avx2));
  }
  EXPECT_FALSE(attnimpl::parse_isa("sse2"));
  EXPECT_TRUE(attnimpl::isa_supported(isa::portable));
  EXPECT_EQ(attnimpl::resolve_isa(isa::portable), isa::portable);
  EXPECT_NE(attnimpl::resolve({}).simd, isa::automatic);
}

TEST(isa, the_portable_fma_rounds_once_like_the_fma_unit) {
  NEEDS_AVX2();
  std::mt19937_64 rng(7);
  std::vector<float> a, b, c;
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            0x1p-149f,
                            -0x1p-149f,
                            0x1p-126f,
                            0x1.fffffep127f,
                            -0x1.fffffep127f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            0x1p-75f,
                            0x1p64f,
                            3.0f,
                            1.0f / 3.0f};
  for (float x : specials)
    for (float y : specials)
      for (float z : specials) a.push_back(x), b.push_back(y), c.push_back(z);
  for (int i = 0; i < 2'000'000; ++i) {
    const int kind = i % 4;
    float x = from(static_cast<std::uint32_t>(rng())), y = from(static_cast<std::uint32_t>(rng()));
    float z = from(static_cast<std::uint32_t>(rng()));
    if (kind == 1) {  // products near c: cancellation, ties in the last place
      x = std::ldexp(static_cast<float>(rng() % (1u << 24)), -12);
      y = std::ldexp(static_cast<float>(rng() % (1u << 24)), -12);
      z = -x * y + std::ldexp(static_cast<float>(static_cast<std::int64_t>(rng() % 2001) - 1000), -40);
    } else if (kind == 2) {  // subnormal results
      x = std::ldexp(static_cast<float>(rng() % (1u << 24)), -100);
      y = std::ldexp(static_cast<float>(rng() % (1u << 24)), -70);
      z = std::ldexp(static_cast<float>(static_cast<std::int64_t>(rng() % (1u << 24)) - (1 << 23)), -170);
    } else if (kind == 3) {  // near overflow
      x = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, 64);
      y = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, 63);
      z = -std::ldexp(static_cast<float>(rng() % 1000), 118);
    }
    a.push_back(x), b.push_back(y), c.push_back(z);
  }
  std::vector<float> hw(a.size()), sw(a.size());
  ASSERT_TRUE(attnimpl::fma_kernel(a.data(), b.data(), c.data(), hw.data(), a.size(), isa::avx2));
  ASSERT_TRUE(attnimpl::fma_kernel(a.data(), b.data(), c.data(), sw.data(), a.size(), isa::portable));
  int bad = 0;
  for (std::size_t i = 0; i < a.size() && bad < 5; ++i)
    if (!same(hw[i], sw[i]))
      ++bad, ADD_FAILURE() << "fma(" << a[i] << ", " << b[i] << ", " << c[i] << "): FMA unit " << hw[i] << ", portable " << sw[i];
}

TEST(isa, the_exp_is_the_same_on_every_97th_input_of_the_used_range) {
  NEEDS_AVX2();
  // Every 97th f32 in [-110, 1] (2.2e7 inputs; every 3rd, 7e8, also passed:
  // 132 s here), and specials.
  std::vector<float> x;
  x.reserve(1 << 22);
  std::vector<float> hw(1 << 22), sw(1 << 22);
  std::int64_t compared = 0, bad = 0;
  auto flush = [&] {
    ASSERT_TRUE(attnimpl::exp_kernel(x.data(), hw.data(), x.size(), isa::avx2));
    ASSERT_TRUE(attnimpl::exp_kernel(x.data(), sw.data(), x.size(), isa::portable));
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!same(hw[i], sw[i]) && ++bad <= 5) ADD_FAILURE() << "exp(" << x[i] << "): AVX2 " << hw[i] << ", portable " << sw[i];
    compared += static_cast<std::int64_t>(x.size());
    x.clear();
  };
  for (std::uint32_t u = bits(1.0f); u >= 97; u -= 97) {  // [0, 1]
    x.push_back(from(u));
    if (x.size() == hw.size()) flush();
  }
  for (std::uint32_t u = 0x80000000u; u <= bits(-110.0f); u += 97) {  // [-110, -0]
    x.push_back(from(u));
    if (x.size() == hw.size()) flush();
  }
  for (float s : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), 88.7f, 89.0f, 1e30f, -1e30f})
    x.push_back(s);
  flush();
  EXPECT_EQ(bad, 0) << "of " << compared;
  EXPECT_GT(compared, 20'000'000);
}

// Problem s run with the tiles of `tiles` at 2 threads on instruction sets a
// and b gives the same output bits.
void expect_same_bits(const problem_spec& s, const attnimpl::config& tiles, isa a, isa b, int mask, bool causal) {
  attnimpl::config cfg = tiles;
  cfg.threads = 2;
  cfg.simd = a;
  problem p = make_problem(s);
  run(p, cfg);
  cfg.simd = b;
  problem q = make_problem(s);
  run(q, cfg);
  EXPECT_EQ(output_bits(p), output_bits(q)) << "seed " << s.seed << " mask " << mask << " causal " << causal;
}

// expect_same_bits on a and b over every mask, causal flag, storage type,
// shape and tile set, in that nesting, the seeds first_seed + 1 on: the
// number of cases run.
int expect_same_bits_over_grid(const std::vector<attnimpl::shape>& shapes, const std::vector<attnimpl::config>& tiles,
                               std::uint64_t first_seed, isa a, isa b) {
  std::uint64_t seed = first_seed;
  int cases = 0;
  for (int mask = 0; mask < 4; ++mask)
    for (bool causal : {false, true})
      for (dtype t : {dtype::f32, dtype::bf16, dtype::f16})
        for (const attnimpl::shape& dims : shapes)
          for (const attnimpl::config& tile : tiles) {
            expect_same_bits(grid_spec(dims, causal, mask, t, ++seed), tile, a, b, mask, causal);
            ++cases;
          }
  return cases;
}

// A GQA prefill with odd dims, a decode past a thousand keys, a square MHA.
const std::vector<attnimpl::shape> both_paths_shapes = {
    attnimpl::shape{.b = 2, .hq = 6, .hkv = 2, .lq = 5, .lk = 37, .d = 19, .dv = 9},
    attnimpl::shape{.b = 1, .hq = 8, .hkv = 2, .lq = 1, .lk = 1100, .d = 128, .dv = 128},
    attnimpl::shape{.b = 1, .hq = 4, .hkv = 4, .lq = 70, .lk = 70, .d = 64, .dv = 24}};

TEST(isa, attention_is_the_same_on_both_paths) {
  NEEDS_AVX2();
  EXPECT_EQ(expect_same_bits_over_grid(both_paths_shapes,
                                       {attnimpl::config{}, attnimpl::config{.q_tile = 2, .k_tile = 3, .split_keys = 6}}, 900,
                                       isa::avx2, isa::portable),
            144);
}

// The AVX-512 build against the AVX2 one (so against portable too, which
// the test above ties to AVX2): the shapes above plus ones whose tiles
// reach the 16-lane products (32-column score blocks, 4..6-vector P.V
// slices, an odd vector left over) and the decode path.
TEST(isa, attention_is_the_same_on_the_avx512_path) {
  NEEDS_AVX512();
  std::vector<attnimpl::shape> shapes = both_paths_shapes;
  shapes.push_back({.b = 1, .hq = 4, .hkv = 2, .lq = 75, .lk = 150, .d = 40, .dv = 128});
  shapes.push_back({.b = 1, .hq = 2, .hkv = 1, .lq = 33, .lk = 97, .d = 17, .dv = 88});
  EXPECT_EQ(expect_same_bits_over_grid(shapes,
                                       {attnimpl::config{}, attnimpl::config{.q_tile = 2, .k_tile = 3, .split_keys = 6},
                                        attnimpl::config{.q_tile = 40, .k_tile = 48, .split_keys = 96}},
                                       1900, isa::avx512, isa::avx2),
            360);
}

// The AVX-512 build's exp (its 16-lane exp16, which the softmax uses), tanh
// and fma (the 8-lane layer, compiled with AVX-512 on) against the portable ones.
TEST(isa, the_avx512_exp_tanh_and_fma_are_the_portable_ones) {
  NEEDS_AVX512();
  std::vector<float> x;
  for (std::uint32_t u = 0; u < 0xffffffffu - 4093; u += 4093) x.push_back(from(u));
  std::vector<float> hw(x.size()), sw(x.size()), c(x.size());
  int bad = 0;
  ASSERT_TRUE(attnimpl::exp_kernel(x.data(), hw.data(), x.size(), isa::avx512));
  ASSERT_TRUE(attnimpl::exp_kernel(x.data(), sw.data(), x.size(), isa::portable));
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!same(hw[i], sw[i]) && ++bad <= 5) ADD_FAILURE() << "exp(" << x[i] << "): AVX-512 " << hw[i] << ", portable " << sw[i];
  ASSERT_TRUE(attnimpl::tanh_kernel(x.data(), hw.data(), x.size(), isa::avx512));
  ASSERT_TRUE(attnimpl::tanh_kernel(x.data(), sw.data(), x.size(), isa::portable));
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!same(hw[i], sw[i]) && ++bad <= 5) ADD_FAILURE() << "tanh(" << x[i] << "): AVX-512 " << hw[i] << ", portable " << sw[i];
  for (std::size_t i = 0; i < x.size(); ++i) c[i] = x[(i * 7919) % x.size()];
  std::vector<float> y(x.rbegin(), x.rend());
  ASSERT_TRUE(attnimpl::fma_kernel(x.data(), y.data(), c.data(), hw.data(), x.size(), isa::avx512));
  ASSERT_TRUE(attnimpl::fma_kernel(x.data(), y.data(), c.data(), sw.data(), x.size(), isa::portable));
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!same(hw[i], sw[i]) && ++bad <= 5) ADD_FAILURE() << "fma #" << i << ": AVX-512 " << hw[i] << ", portable " << sw[i];
  EXPECT_EQ(bad, 0);
}

TEST(isa, avx512_where_the_cpu_lacks_it_is_a_clear_error) {
  if (attnimpl::isa_supported(isa::avx512)) GTEST_SKIP() << "this CPU has AVX-512: the error cannot arise";
  const attnimpl::status st = attnimpl::check_isa(isa::avx512);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("config.simd = avx512"), std::string::npos) << st.message;
}

TEST(isa, avx2_where_the_cpu_lacks_it_is_a_clear_error) {
  if (attnimpl::isa_supported(isa::avx2)) GTEST_SKIP() << "this CPU has AVX2: the error cannot arise";
  problem p = make_problem({});
  attnimpl::config cfg;
  cfg.simd = isa::avx2;
  const attnimpl::status st = attnimpl::check_isa(cfg.simd);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("config.simd"), std::string::npos) << st.message;
}

// f16 in software (convert.hpp) against F16C, where the CPU has it.
__attribute__((target("f16c"))) float hw_from_f16(std::uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) std::uint16_t hw_to_f16(float x) {
  return static_cast<std::uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

TEST(isa, software_f16_decoding_matches_f16c_on_every_pattern) {
  NEEDS_AVX2();
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float sw = attnimpl::convert::from_f16(static_cast<std::uint16_t>(h)), hw = hw_from_f16(static_cast<std::uint16_t>(h));
    ASSERT_EQ(bits(sw), bits(hw)) << std::hex << "f16 0x" << h;
  }
}

TEST(isa, software_f16_rounding_matches_f16c) {
  NEEDS_AVX2();
  // Every sign, exponent and top 10 mantissa bits (2^19 prefixes) with 16
  // choices of the 13 bits that decide the rounding (ties, just below and
  // above them), and 4 million random patterns.
  const std::uint32_t lows[] = {0,      1,      0x7ff,  0xfff,  0x1000, 0x1001, 0x17ff, 0x1800,
                                0x1801, 0x1fff, 0x0800, 0x0fff, 0x3,    0x1ffe, 0x1002, 0x555};
  std::int64_t n = 0;
  for (std::uint32_t prefix = 0; prefix < (1u << 19); ++prefix)
    for (std::uint32_t low : lows) {
      const float x = from((prefix << 13) | low);
      ASSERT_EQ(attnimpl::convert::to_f16(x), hw_to_f16(x)) << std::hex << "f32 0x" << bits(x);
      ++n;
    }
  std::mt19937 rng(3);
  for (int i = 0; i < 4'000'000; ++i) {
    const float x = from(rng());
    ASSERT_EQ(attnimpl::convert::to_f16(x), hw_to_f16(x)) << std::hex << "f32 0x" << bits(x);
  }
  EXPECT_EQ(n, 16 << 19);
}

}  // namespace
