// fuzz_differential: bytes -> attention case -> the subject against the
// multiprecision oracle under the SPEC bound, through the same check as the
// property differential.output_within_bound_of_oracle.
#include "fuzz_support.hpp"

#include <cmath>

#include "attncheck/oracle.hpp"

namespace {

using namespace attncheck;

// Caps: each keeps the oracle fast (>= 1,000 exec/s) without losing a shape
// class that hides bugs in a tiled kernel (SPEC.md, MUTANTS.md "min" column).
constexpr fuzz::shape_caps caps{
    .batch = 3,      // B = 2, 3: batch offsets and per-batch padding differ
    .kv_heads = 3,   // Hkv = 3 is not a power of two
    .group = 3,      // G in 1..3 with Hkv in 1..3: G != Hkv and G == Hkv both reachable
    .q_len = 5,      // q_tile 2 of the tiny-tile subject: 2T+1
    .k_len = 13,     // k_tile 3 and split_keys 6: 2 splits + 1, so tails, rescales and merges
    .head_dim = 9,   // one 8-wide AVX2 vector + 1 (head_dim_tail); D != Dv reachable
    .work = 4096,    // ~0.5 ms of MPFR-50 oracle at most; larger rows add time, not new code paths
    .value_patches = 64,  // more overwrites than this rarely reach a new path; the dense runs cover bulk
};

const law& differential() {
  static const law* l = find_law("differential.output_within_bound_of_oracle");
  return *l;
}


}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An input larger than 4 KiB decodes no bigger case: the caps bound what one case uses.
  if (size > 4096) return -1;
  const subject& s = fuzz::fuzz_subject();
  FuzzedDataProvider in(data, size);
  attn_case c = fuzz::decode_header(in, caps, s);
  fuzz::decode_values(in, caps, c);
  if (!fuzz::bound_is_finite_everywhere(s, c)) return -1;
  fuzz::expect_pass(differential().name, s, c, differential().check(s, c));
  return 0;
}

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed) {
  return attncheck::fuzz::structural_mutate(data, size, max_size, seed);
}
