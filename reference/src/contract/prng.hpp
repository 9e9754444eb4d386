// Counter-based random numbers for materialize(): integer arithmetic only, so
// the same seed gives the same bits on every machine, compiler and libm.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace attncheck::detail {

/// The splitmix64 finalizer: a bijective 64-bit mixer.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// One named stream of a seed. A draw depends only on its coordinates, so a
/// value never moves when another tensor, the layout or an unrelated size changes.
class random_stream {
 public:
  constexpr random_stream(std::uint64_t seed, std::uint64_t tag) : key_(mix64(seed ^ mix64(tag))) {}

  /// 64 random bits for the coordinates.
  constexpr std::uint64_t bits(std::initializer_list<std::int64_t> coords) const {
    std::uint64_t h = key_;
    for (std::int64_t c : coords) h = mix64(h ^ static_cast<std::uint64_t>(c));
    return h;
  }
  /// Uniform in [0, 1), a multiple of 2^-53 (exact in double).
  constexpr double uniform(std::initializer_list<std::int64_t> coords) const {
    return static_cast<double>(bits(coords) >> 11) * 0x1p-53;
  }
  /// Uniform integer in [0, n), n >= 1 (multiply-shift; bias below 2^-32 for n < 2^32).
  constexpr std::int64_t below(std::int64_t n, std::initializer_list<std::int64_t> coords) const {
    const auto r = static_cast<unsigned __int128>(bits(coords)) * static_cast<std::uint64_t>(n);
    return static_cast<std::int64_t>(r >> 64);
  }
  /// Approximately N(0, 1): the Irwin-Hall sum of twelve 32-bit uniforms minus
  /// 6, summed in integers so the result is exact; tails stop at +-6.
  constexpr double normal(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) const {
    std::uint64_t sum = 0;
    for (std::int64_t k = 0; k < 6; ++k) {
      const std::uint64_t r = bits({a, b, c, d, k});
      sum += (r >> 32) + (r & 0xffffffffull);
    }
    const auto centered = static_cast<std::int64_t>(sum) - (std::int64_t{6} << 32);
    return static_cast<double>(centered) * 0x1p-32;
  }

 private:
  std::uint64_t key_;
};

}  // namespace attncheck::detail
