// What the fuzz harnesses share: the subject under test, decoding fuzzer bytes
// into a case (shapes, masks, dtypes, layout and values, special bit patterns
// included), and reporting a finding so that it replays as a case file.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <optional>
#include <string>

#include "attncheck/case.hpp"
#include "attncheck/laws.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck::fuzz {

/// Upper bounds on a decoded case; the reason for each set lives where it is
/// defined (fuzz_differential.cpp, fuzz_laws.cpp).
struct shape_caps {
  std::int64_t batch;      ///< B, inclusive
  std::int64_t kv_heads;   ///< Hkv, inclusive
  std::int64_t group;      ///< G = Hq / Hkv, inclusive
  std::int64_t q_len;      ///< Lq, inclusive
  std::int64_t k_len;      ///< Lk, inclusive
  std::int64_t head_dim;   ///< D and Dv each, inclusive
  std::int64_t work;       ///< B*Hq*Lq*Lk*(D+Dv+8): the oracle's cost in multiply-adds, exp counted as 8
  int value_patches;       ///< element overwrites taken from the bytes, at most
};

/// The subject named by ATTNCHECK_FUZZ_SUBJECT (the gate's --subject syntax),
/// by default "builtin:q_tile=2,k_tile=3,split_keys=6". Loaded once; a bad
/// spec prints one line and exits 2.
const subject& fuzz_subject();

/// Decodes a header: shapes within caps, dtype among those the subject takes,
/// causal, key padding, boolean-mask shape, scale, layout, value recipe,
/// poison and seed. Mask contents and tensors are left for decode_values.
attn_case decode_header(FuzzedDataProvider& in, const shape_caps& caps, const subject& s);

/// Materializes the case from its recipe, then overwrites mask bits and
/// tensor elements from the remaining bytes: dense runs of interesting values
/// (extremes, subnormals, +-0, +-inf, NaN payloads) and raw bit patterns.
/// Throws input_error when the header is invalid (a law's prepare() can make it so).
void decode_values(FuzzedDataProvider& in, const shape_caps& caps, attn_case& c);

/// A law's verdict on a fuzzed case. On fail: prints the law, the case line,
/// the message and the worst element to stderr; when ATTNCHECK_FUZZ_WRITE_CASE
/// names a path, writes the case there as a case file naming the law (what
/// `attncheck repro` replays); then aborts, so libFuzzer saves the input.
/// With ATTNCHECK_FUZZ_VERBOSE set, passing cases print one line each.
/// With ATTNCHECK_FUZZ_EXPECT_LAW / ATTNCHECK_FUZZ_EXPECT_WHY set (crash
/// minimization), only a failure of that law whose message contains that text aborts.
void expect_pass(const std::string& law, const subject& s, const attn_case& c, const law_outcome& o);

/// A structural mutation for LLVMFuzzerCustomMutator: decode_header reads its
/// fields one byte each from the end of the input, so nudging one of the last
/// bytes by +-1 grows or shrinks one length, head count or dim by one, or
/// flips a flag; otherwise libFuzzer's own mutation. Off (libFuzzer's only)
/// with ATTNCHECK_FUZZ_STRUCTURAL=0. Measured in docs/fuzz.md.
std::size_t structural_mutate(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed);

/// False when the SPEC bound is +inf for some element (it may overflow an f32
/// intermediate or its storage type, where the contract states no accuracy):
/// such cases lie outside the bounded harnesses' domain, never findings. A
/// cheap binary64 run of the oracle's loops decides it.
bool bound_is_finite_everywhere(const subject& s, const attn_case& c);

}  // namespace attncheck::fuzz

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);
