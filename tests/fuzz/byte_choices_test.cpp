// The case space's byte backend (attncheck/case_space.hpp, byte_choices)
// reads every choice as libFuzzer's FuzzedDataProvider does, so a fuzz input
// can hand the bytes it leaves to a FuzzedDataProvider for the values: the
// same values and the same bytes left, for every range width, with bytes
// running out midway too.
#include <fuzzer/FuzzedDataProvider.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "attncheck/case_space.hpp"

namespace attncheck {
namespace {

TEST(byte_choices, reads_as_fuzzed_data_provider_does) {
  std::mt19937_64 rng(7);
  int compared = 0;
  for (int input = 0; input < 2000; ++input) {
    std::vector<std::uint8_t> bytes(rng() % 48);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    byte_choices ours(bytes.data(), bytes.size());
    FuzzedDataProvider theirs(bytes.data(), bytes.size());
    for (int k = 0; k < 24; ++k) {
      // Ranges of 1 value to 2^62: 0 to 8 bytes each.
      const int bits = static_cast<int>(rng() % 63);
      const std::int64_t lo = static_cast<std::int64_t>(rng() % 1000) - 500;
      const std::int64_t hi = lo + static_cast<std::int64_t>(rng() & ((std::uint64_t{1} << bits) - 1));
      ASSERT_EQ(ours.in_range(lo, hi), theirs.ConsumeIntegralInRange<std::int64_t>(lo, hi))
          << "input " << input << ", choice " << k;
      ASSERT_EQ(ours.remaining(), theirs.remaining_bytes());
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2000 * 24);
}

TEST(byte_choices, a_header_leaves_the_values_bytes_to_fuzzed_data_provider) {
  // A header encoded after value bytes: byte_choices reads the header, and a
  // FuzzedDataProvider over what it leaves reads the value bytes in order.
  raw_choice r;
  r.regime = 77, r.d = 300, r.jitter = 8000, r.pad.assign(pad_count, 11), r.seed = seed_range - 1;
  std::vector<std::uint8_t> bytes = {1, 2, 3};
  const std::vector<std::uint8_t> header = encode_choices(header_record(r));
  bytes.insert(bytes.end(), header.begin(), header.end());
  byte_choices in(bytes.data(), bytes.size());
  EXPECT_EQ(read_choices(in), r);
  FuzzedDataProvider rest(bytes.data(), in.remaining());
  EXPECT_EQ(rest.ConsumeIntegral<std::uint8_t>(), 3);
  EXPECT_EQ(rest.ConsumeIntegral<std::uint8_t>(), 2);
  EXPECT_EQ(rest.ConsumeIntegral<std::uint8_t>(), 1);
}

}  // namespace
}  // namespace attncheck
