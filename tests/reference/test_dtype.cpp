// Storage types: exact decode, one round-to-nearest-even encode, NaN payloads.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "attncheck/dtype.hpp"

namespace attncheck {
namespace {

std::uint64_t double_bits(double x) { return std::bit_cast<std::uint64_t>(x); }

// Payload of a NaN below its quiet bit, in the type's own mantissa width.
struct nan_format {
  dtype t;
  int mant_bits;
  std::uint32_t exp_mask;
};
constexpr nan_format nan_formats[] = {{dtype::f16, 10, 0x7c00u}, {dtype::bf16, 7, 0x7f80u}};

TEST(dtype, decode_then_encode_returns_every_non_nan_16_bit_pattern) {
  for (const nan_format& f : nan_formats) {
    int nans = 0;
    for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
      const double v = decode(f.t, bits);
      if (std::isnan(v)) {
        ++nans;
        continue;
      }
      ASSERT_EQ(encode(f.t, v), bits) << name(f.t) << " pattern 0x" << std::hex << bits;
    }
    // Exponent all ones with a nonzero mantissa, both signs.
    EXPECT_EQ(nans, 2 * ((1 << f.mant_bits) - 1)) << name(f.t);
  }
}

TEST(dtype, decode_keeps_nan_sign_and_payload_and_encode_gives_quiet_nan_of_same_sign) {
  for (const nan_format& f : nan_formats) {
    const std::uint32_t mant_mask = (1u << f.mant_bits) - 1;
    const std::uint32_t quiet = 1u << (f.mant_bits - 1);
    const std::uint32_t sign = 0x8000u;  // bit 15 in both 16-bit formats
    for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
      if ((bits & f.exp_mask) != f.exp_mask || (bits & mant_mask) == 0) continue;
      const double v = decode(f.t, bits);
      ASSERT_TRUE(std::isnan(v)) << std::hex << bits;
      EXPECT_EQ(std::signbit(v), (bits & sign) != 0) << std::hex << bits;
      // The payload below the quiet bit sits at the top of double's mantissa;
      // the quiet bit itself may be set by the hardware conversion.
      const std::uint64_t payload = (double_bits(v) >> (52 - f.mant_bits)) & (quiet - 1);
      ASSERT_EQ(payload, bits & (quiet - 1)) << name(f.t) << " 0x" << std::hex << bits;
      EXPECT_EQ(encode(f.t, v), (bits & sign) | f.exp_mask | quiet) << name(f.t) << " 0x" << std::hex << bits;
    }
  }
}

TEST(dtype, decode_is_strictly_increasing_over_positive_finite_patterns) {
  for (const nan_format& f : nan_formats)
    for (std::uint32_t bits = 0; bits + 1 < f.exp_mask; ++bits)
      ASSERT_LT(decode(f.t, bits), decode(f.t, bits + 1)) << name(f.t) << " 0x" << std::hex << bits;
}

TEST(dtype, decode_hand_values) {
  EXPECT_EQ(decode(dtype::f16, 0x3c00), 1.0);
  EXPECT_EQ(decode(dtype::f16, 0xc000), -2.0);
  EXPECT_EQ(decode(dtype::f16, 0x0001), 0x1p-24);
  EXPECT_EQ(decode(dtype::f16, 0x03ff), 1023 * 0x1p-24);
  EXPECT_EQ(decode(dtype::f16, 0x0400), 0x1p-14);
  EXPECT_EQ(decode(dtype::f16, 0x7bff), 65504.0);
  EXPECT_EQ(decode(dtype::f16, 0x7c00), INFINITY);
  EXPECT_EQ(decode(dtype::f16, 0xfc00), -INFINITY);
  EXPECT_TRUE(std::signbit(decode(dtype::f16, 0x8000)));
  EXPECT_EQ(decode(dtype::f16, 0x8000), 0.0);
  EXPECT_EQ(decode(dtype::bf16, 0x3f80), 1.0);
  EXPECT_EQ(decode(dtype::bf16, 0x0001), 0x1p-133);
  EXPECT_EQ(decode(dtype::bf16, 0x7f7f), 0x1.fep127);
  EXPECT_EQ(decode(dtype::f32, 0x00000001u), 0x1p-149);
  EXPECT_EQ(decode(dtype::f32, 0x7f7fffffu), 0x1.fffffep127);
  EXPECT_EQ(decode(dtype::f16, 0x12345u), decode(dtype::f16, 0x2345u)) << "only the low 16 bits count";
}

TEST(dtype, f32_nan_payload_survives_decode) {
  const double v = decode(dtype::f32, 0x7fc01234u);
  ASSERT_TRUE(std::isnan(v));
  EXPECT_EQ((double_bits(v) >> 29) & 0x3fffffu, 0x1234u);
  EXPECT_TRUE(std::signbit(decode(dtype::f32, 0xffc00001u)));
}

struct rounding_case {
  dtype t;
  double value;
  std::uint32_t bits;
  const char* why;
};

const rounding_case rounding_cases[] = {
    {dtype::f16, 1.0 + 0x1p-11, 0x3c00, "tie between 1 and 1+2^-10 goes to even 1"},
    {dtype::f16, 1.0 + 3 * 0x1p-11, 0x3c02, "tie goes up to the even mantissa 2"},
    {dtype::f16, 1.0 + 0x1p-11 + 0x1p-40, 0x3c01, "just above the tie: through f32 this would round twice to 1"},
    {dtype::f16, 1.0 + 0x1p-11 - 0x1p-40, 0x3c00, "just below the tie"},
    {dtype::f16, 0x1p-25, 0x0000, "half the smallest subnormal ties to even zero"},
    {dtype::f16, 0x1p-25 + 0x1p-60, 0x0001, "just above half the smallest subnormal"},
    {dtype::f16, 3 * 0x1p-25, 0x0002, "subnormal tie 1.5 units goes to 2"},
    {dtype::f16, 5 * 0x1p-25, 0x0002, "subnormal tie 2.5 units goes to 2"},
    {dtype::f16, 1023 * 0x1p-24 + 0x1p-25, 0x0400, "largest subnormal + half unit rounds to the smallest normal"},
    {dtype::f16, -0x1p-30, 0x8000, "a tiny negative underflows to -0"},
    {dtype::f16, -0.0, 0x8000, "-0 keeps its sign"},
    {dtype::f16, 65504.0, 0x7bff, "largest finite"},
    {dtype::f16, 65519.99, 0x7bff, "below the overflow threshold"},
    {dtype::f16, 65520.0, 0x7c00, "the overflow threshold ties to even, which is infinity"},
    {dtype::f16, -65520.0, 0xfc00, "negative overflow"},
    {dtype::f16, 1e300, 0x7c00, "far overflow"},
    {dtype::f16, INFINITY, 0x7c00, "infinity"},
    {dtype::f16, NAN, 0x7e00, "NaN becomes the quiet NaN"},
    {dtype::bf16, 1.0 + 0x1p-8, 0x3f80, "tie to even 1"},
    {dtype::bf16, 1.0 + 3 * 0x1p-8, 0x3f82, "tie up to even"},
    {dtype::bf16, 1.0 + 0x1p-8 + 0x1p-40, 0x3f81, "just above the tie, past f32 precision"},
    {dtype::bf16, 0x1p-134, 0x0000, "half the smallest subnormal"},
    {dtype::bf16, 3 * 0x1p-134, 0x0002, "subnormal tie goes to even"},
    {dtype::bf16, 0x1.fep127 + 0x1p118, 0x7f7f, "below the overflow threshold"},
    {dtype::bf16, 0x1.fep127 + 0x1p119, 0x7f80, "overflow threshold ties to infinity"},
    {dtype::bf16, -3.0e38, 0xff62, "large negative stays finite"},
    {dtype::f32, 1.0 + 0x1p-24, 0x3f800000u, "tie to even 1"},
    {dtype::f32, 1.0 + 0x1p-24 + 0x1p-50, 0x3f800001u, "just above the tie"},
    {dtype::f32, 0x1p-150, 0x00000000u, "half the smallest subnormal"},
    {dtype::f32, 0x1.fffffep127 + 0x1p103, 0x7f800000u, "overflow threshold"},
};

TEST(dtype, encode_rounds_to_nearest_even_once) {
  for (const rounding_case& r : rounding_cases)
    EXPECT_EQ(encode(r.t, r.value), r.bits) << name(r.t) << " " << r.why << ": value " << std::hexfloat << r.value;
}

// The fp8 types (docs/spec.md "fp8 storage"), from the OCP 8-bit floating
// point specification's tables: E4M3FN has no infinity and one NaN per sign
// (S.1111.111); E5M2 is IEEE-like.
struct fp8_value {
  dtype t;
  std::uint32_t bits;
  double value;  // NaN: a NaN pattern
  const char* why;
};
constexpr double nan_v = __builtin_nan("");
constexpr fp8_value fp8_values[] = {
    {dtype::e4m3, 0x00u, 0.0, "zero"},
    {dtype::e4m3, 0x01u, 0x1p-9, "smallest subnormal"},
    {dtype::e4m3, 0x07u, 7 * 0x1p-9, "largest subnormal"},
    {dtype::e4m3, 0x08u, 0x1p-6, "smallest normal"},
    {dtype::e4m3, 0x38u, 1.0, "one"},
    {dtype::e4m3, 0x77u, 240.0, "exponent 1110, mantissa 111"},
    {dtype::e4m3, 0x78u, 256.0, "exponent 1111 is a normal binade"},
    {dtype::e4m3, 0x7eu, 448.0, "largest finite"},
    {dtype::e4m3, 0x7fu, nan_v, "NaN"},
    {dtype::e4m3, 0xfeu, -448.0, "most negative"},
    {dtype::e4m3, 0xffu, nan_v, "negative NaN"},
    {dtype::e5m2, 0x01u, 0x1p-16, "smallest subnormal"},
    {dtype::e5m2, 0x04u, 0x1p-14, "smallest normal"},
    {dtype::e5m2, 0x3cu, 1.0, "one"},
    {dtype::e5m2, 0x7bu, 57344.0, "largest finite"},
    {dtype::e5m2, 0x7du, nan_v, "NaN"},
    {dtype::e5m2, 0xc0u, -2.0, "minus two"},
};

TEST(dtype, fp8_decodes_the_ocp_tables) {
  for (const fp8_value& f : fp8_values) {
    const double v = decode(f.t, f.bits);
    if (std::isnan(f.value)) {
      EXPECT_TRUE(std::isnan(v)) << name(f.t) << " " << f.why;
    } else {
      EXPECT_EQ(v, f.value) << name(f.t) << " " << f.why;
    }
  }
  EXPECT_EQ(decode(dtype::e5m2, 0x7cu), INFINITY);
  EXPECT_EQ(decode(dtype::e5m2, 0xfcu), -INFINITY);
}

TEST(dtype, fp8_decode_then_encode_returns_every_non_nan_pattern) {
  for (dtype t : {dtype::e4m3, dtype::e5m2}) {
    int nans = 0;
    double last = -INFINITY;
    for (std::uint32_t bits = 0; bits <= 0xffu; ++bits) {
      const double v = decode(t, bits);
      if (std::isnan(v)) {
        ++nans;
        continue;
      }
      ASSERT_EQ(encode(t, v), bits) << name(t) << " pattern 0x" << std::hex << bits;
      if (bits < 0x80u && bits > 0) {
        EXPECT_GT(v, last) << name(t) << " 0x" << std::hex << bits;
      }
      if (bits < 0x80u) last = v;
    }
    EXPECT_EQ(nans, t == dtype::e4m3 ? 2 : 6) << name(t);
  }
}

TEST(dtype, fp8_encode_rounds_once_and_overflows_as_the_format_says) {
  // Ties to even; past the largest value: E4M3FN's NaN (it has no infinity), E5M2's infinity.
  EXPECT_EQ(encode(dtype::e4m3, 1.0 + 0x1p-4), 0x38u);  // tie between 1 and 1.125: even
  EXPECT_EQ(encode(dtype::e4m3, 1.0 + 0x1p-4 + 0x1p-30), 0x39u);
  EXPECT_EQ(encode(dtype::e4m3, 464.0), 0x7eu);  // half way to 480 (no such value): ties to 448's even mantissa
  EXPECT_EQ(encode(dtype::e4m3, 465.0), 0x7fu);
  EXPECT_EQ(encode(dtype::e4m3, INFINITY), 0x7fu);
  EXPECT_EQ(encode(dtype::e4m3, -INFINITY), 0xffu);
  EXPECT_EQ(encode(dtype::e4m3, 0x1p-10), 0x00u);  // half the smallest subnormal: ties to zero
  EXPECT_EQ(encode(dtype::e4m3, 0x1p-10 + 0x1p-20), 0x01u);
  EXPECT_EQ(encode(dtype::e5m2, 61440.0), 0x7cu);  // half way to 65536: ties to even, past the largest
  EXPECT_EQ(encode(dtype::e5m2, 61439.0), 0x7bu);
  EXPECT_EQ(encode(dtype::e5m2, -INFINITY), 0xfcu);
  EXPECT_TRUE(std::isnan(decode(dtype::e5m2, encode(dtype::e5m2, nan_v))));
  EXPECT_EQ(size_of(dtype::e4m3), 1u);
  EXPECT_EQ(unit_roundoff(dtype::e4m3), 0x1p-4);
  EXPECT_EQ(smallest_subnormal(dtype::e5m2), 0x1p-16);
  EXPECT_EQ(largest_finite(dtype::e4m3), 448.0);
}

TEST(dtype, names_round_trip) {
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16, dtype::e4m3, dtype::e5m2}) EXPECT_EQ(parse_dtype(name(t)), t);
  EXPECT_EQ(parse_dtype("F16"), std::nullopt);
  EXPECT_EQ(parse_dtype("fp16"), std::nullopt);
  EXPECT_EQ(parse_dtype(""), std::nullopt);
  EXPECT_EQ(size_of(dtype::f32), 4u);
  EXPECT_EQ(size_of(dtype::bf16), 2u);
}

}  // namespace
}  // namespace attncheck
