// Test-side helpers for attnimpl: strided storage buffers in any dtype,
// seeded random problems, and the call into the kernel. Values are always
// exact values of the storage type, so the oracles take them as given.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnimpl/attention.hpp"

namespace attnimpl_test {

using attnimpl::dtype;

/// Rounds x to the storage type (nearest even) and back: exact values only.
float round_to(dtype t, float x);
std::uint16_t bits16(dtype t, float x);
float from_bits16(dtype t, std::uint16_t b);

/// dense (b, s, h, d); head_major (b, h, s, d); padded: gaps and a dim
/// stride of 2; keys_across (b, h, d, s): a sequence stride of 1 (K^T).
enum class layout { dense, head_major, padded, keys_across };

/// A (d0, d1, d2, d3) tensor in raw storage with element strides.
struct buffer {
  dtype type = dtype::f32;
  std::array<std::int64_t, 4> dims{};
  attnimpl::strides4 stride{};
  std::int64_t offset = 0;
  std::vector<unsigned char> bytes;

  static buffer make(dtype t, std::array<std::int64_t, 4> dims, layout l);
  std::int64_t index(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) const {
    return offset + a * stride[0] + b * stride[1] + c * stride[2] + d * stride[3];
  }
  float get(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) const;
  void set(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d, float v);
  void* data() { return bytes.data() + offset * elem(); }
  const void* data() const { return bytes.data() + offset * elem(); }
  std::int64_t elem() const { return type == dtype::f32 ? 4 : 2; }
  attnimpl::tensor_in in() const { return {data(), type, stride}; }
  attnimpl::tensor_out out() { return {data(), type, stride}; }
};

/// A whole problem with its inputs and outputs.
struct problem {
  attnimpl::shape dims;
  dtype type = dtype::f32;
  bool causal = false;
  std::vector<std::int64_t> key_len;        // empty: none
  std::array<std::int64_t, 4> mask_dims{};  // (b, h, i, j) each 1 or full; all 0: no mask
  std::vector<std::uint8_t> mask;           // dense over mask_dims
  float scale = 0.0f;                       // 0: default
  buffer q, k, v, o;
  std::vector<float> lse;  // (b, h, i)
  std::uint64_t seed = 0;

  std::string line() const;  // printed on failure, reproduces the case
  bool visible(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const;
  attnimpl::attention_args args();
};

struct problem_spec {
  attnimpl::shape dims;
  dtype type = dtype::f32;
  bool causal = false;
  bool padding = false;
  int mask = 0;  // 0 none, 1 full (b,h,i,j), 2 broadcast over b and h, 3 per-key only (1,1,1,lk)
  layout lay = layout::dense;
  std::uint64_t seed = 1;
};

/// A grid point of the bitwise and ISA tests: mask kind m (see problem_spec)
/// with padding on odd m and layout m % 3.
inline problem_spec grid_spec(const attnimpl::shape& dims, bool causal, int mask, dtype t, std::uint64_t seed) {
  problem_spec s;
  s.dims = dims;
  s.causal = causal;
  s.padding = mask % 2 == 1;
  s.mask = mask;
  s.type = t;
  s.lay = static_cast<layout>(mask % 3);
  s.seed = seed;
  return s;
}

/// Draws values N(0,1) rounded to the type, padding lengths in [0, lk], a
/// mask with about 1/4 hidden. Deterministic in the seed.
problem make_problem(const problem_spec& s);

/// Runs the kernel; fails the current test on a non-ok status.
void run(problem& p, const attnimpl::config& cfg);

/// Bit patterns of O (logical order) and LSE, for bitwise comparison.
std::vector<std::uint32_t> output_bits(const problem& p);

/// Writes NaN into every Q, K, V element that no visible pair uses.
void poison_masked(problem& p);

}  // namespace attnimpl_test
