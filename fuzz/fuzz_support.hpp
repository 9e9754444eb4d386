// What the fuzz harnesses share: their configuration, the subject under test,
// decoding fuzzer bytes into a case (shapes, masks, dtypes, layout and values,
// special bit patterns included) and into a plan through the subject's cache,
// and reporting a finding so that it replays as a case file. docs/fuzz.md.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <optional>
#include <string>

#include "attncheck/case.hpp"
#include "attncheck/laws.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck::fuzz {

/// The harnesses' settings, read once from ATTNCHECK_FUZZ ("key=value,...";
/// docs/fuzz.md has the table). A malformed value, an unknown key or a
/// variable of the retired ATTNCHECK_FUZZ_* family prints one line and exits 2.
struct settings {
  std::string expect_law;  ///< only a failure of this law aborts (minimization); "none": findings off
  std::string expect_why;  ///< ... and only one whose message contains this text
  std::string write_case;  ///< on a finding, also write the case as this case file
  bool verbose = false;    ///< one line per input that does not abort
  bool structural = true;  ///< the structural half of the custom mutator
};
const settings& config();

/// The subject named by ATTNCHECK_FUZZ_SUBJECT (the gate's --subject syntax),
/// by default "builtin:tiles=tiny". Loaded once; a bad spec prints one line
/// and exits 2.
const subject& fuzz_subject();

// ---------------------------------------------------------------------------
// Input format, version 1 (every input that does not start with v2_magic):
// small shapes within shape_caps, one-shot attention only. Kept bit for bit so
// that committed corpora and saved crash inputs decode to the same cases.

/// Upper bounds on a decoded version 1 case; the reason for each set lives
/// where it is defined (fuzz_differential.cpp, fuzz_laws.cpp).
struct shape_caps {
  std::int64_t batch;     ///< B, inclusive
  std::int64_t kv_heads;  ///< Hkv, inclusive
  std::int64_t group;     ///< G = Hq / Hkv, inclusive
  std::int64_t q_len;     ///< Lq, inclusive
  std::int64_t k_len;     ///< Lk, inclusive
  std::int64_t head_dim;  ///< D and Dv each, inclusive
  std::int64_t work;      ///< B*Hq*Lq*Lk*(D+Dv+8): the oracle's cost in multiply-adds, exp counted as 8
  int value_patches;      ///< element overwrites taken from the bytes, at most
};

/// Decodes a version 1 header: shapes within caps, dtype among those the
/// subject takes, causal, key padding, boolean-mask shape, scale, layout,
/// value recipe (the first 8 kinds), poison and seed. Mask contents and
/// tensors are left for decode_values.
attn_case decode_header(FuzzedDataProvider& in, const shape_caps& caps, const subject& s);

// ---------------------------------------------------------------------------
// Input format, version 2 (inputs that start with v2_magic; the rest of the
// bytes go through FuzzedDataProvider): production sizes under a work cap,
// and a mode byte: one-shot attention, decode (Lq = 1), or a run through the
// subject's cache with a plan taken from the bytes.

/// The first four bytes of a version 2 input.
inline constexpr std::uint8_t v2_magic[4] = {0xa7, 'A', 'C', 0x02};
/// True when the input is version 2 (starts with v2_magic).
bool is_v2(const std::uint8_t* data, std::size_t size);

enum class input_mode : std::uint8_t { one_shot, decode, cache };
const char* name(input_mode m);

/// Head sizes D and Dv are drawn from: every size up to the 8-wide vector + 1,
/// then production head sizes and their neighbours.
inline constexpr std::int64_t head_sizes[] = {1,  2,  3,  4,  5,  6,  7,   8,   9,   16,  31, 32,
                                              33, 63, 64, 65, 80, 96, 127, 128, 129, 192, 256};

/// Upper bounds on a decoded version 2 case (reasons where each set is defined).
struct reach_caps {
  std::int64_t batch;         ///< B
  std::int64_t q_heads;       ///< Hq = Hkv * G
  std::int64_t group;         ///< G
  std::int64_t q_len;         ///< Lq of one-shot cases
  std::int64_t k_len;         ///< Lk of one-shot cases and the cache's capacity
  std::int64_t decode_k_len;  ///< Lk of decode cases (Lq = 1)
  /// B*Hq*Lq*row_cost at most: what the oracle and the comparison do per
  /// input (for a cache run, Lq is the number of query rows of the whole
  /// plan). Most inputs get a tenth or a hundredth of it (decode_header_v2).
  std::int64_t work;
  int value_patches;  ///< element overwrites taken from the bytes, at most
  bool cache;         ///< the mode byte may choose a run through the cache
};

/// The cost of one output row (b, h, i) in multiply-adds: Lk*(D+Dv+8) for the
/// oracle (exp counted as 8) and 64 per output element for comparing it (the
/// checks build a location label per element).
std::int64_t row_cost(const attn_case& c);

/// Decodes a version 2 header: the mode, dtype, this input's work budget
/// (caps.work / 100 for 224 of the 256 byte values, caps.work / 10 for 28,
/// all of it for 4), D and Dv from head_sizes,
/// Lk and Lq (half the time small, a quarter near a power of two, a quarter
/// anywhere), B, G and Hkv within what caps.work leaves, then the flags of
/// version 1 (every value kind; no poison for a cache case). lq_is_lk: the caller will set Lq = Lk (a law's
/// prepare), so the work is counted that way. A cache case is causal, has no
/// boolean mask and has Lq = Lk (one Q row per position); its padding gives
/// the sequence lengths. The mode falls back to one-shot when the subject has no cache.
struct header_v2 {
  attn_case c;
  input_mode mode = input_mode::one_shot;
  std::int64_t work = 0;  ///< this input's budget (a cache plan's query rows come out of it)
};
header_v2 decode_header_v2(FuzzedDataProvider& in, const reach_caps& caps, const subject& s, bool lq_is_lk = false);

/// A plan through the cache for a cache case, from the bytes: page size,
/// page order (the subject's own, reversed or shuffled), a prefill of any
/// length, then chunks of any size, small chunks and single tokens, the
/// sequences of the batch advancing unevenly, each step querying 1 to its
/// chunk's length (or more) rows; at most max_rows query rows in all.
cache_plan decode_cache_plan(FuzzedDataProvider& in, const attn_case& c, std::int64_t max_rows);

/// Query rows the oracle computes for a cache run: the plan's rows in all.
std::int64_t plan_rows(const cache_plan& plan);

/// The one-shot case whose output is, row for row, what attend_cached(c, plan)
/// stacks: Lq = the plan's query rows, row r of sequence b is the query at
/// the position that row holds (Q copied from c), and a boolean mask lets it
/// see keys 0..position (none for a position before the sequence).
attn_case cache_run_as_case(const attn_case& c, const cache_plan& plan);

/// One line: page size, order, the steps' appends and query rows.
std::string describe(const cache_plan& plan);

// ---------------------------------------------------------------------------

/// Materializes the case from its recipe, then overwrites mask bits and
/// tensor elements from the remaining bytes: dense runs of interesting values
/// (extremes, subnormals, +-0, +-inf, NaN payloads) and raw bit patterns.
/// Throws input_error when the header is invalid (a law's prepare() can make it so).
void decode_values(FuzzedDataProvider& in, int value_patches, attn_case& c);

/// A law's verdict on a fuzzed case. On fail: prints the law, the case line,
/// the message (and `context`, e.g. the cache plan) and the worst element to
/// stderr; with write_case set, writes the case there as a case file naming
/// the law (what `attncheck repro` replays); then aborts, so libFuzzer saves
/// the input. With verbose set, inputs that pass print one line each. With
/// expect_law / expect_why set (crash minimization), only a failure of that
/// law whose message contains that text aborts.
void expect_pass(const std::string& law, const subject& s, const attn_case& c, const law_outcome& o,
                 const std::string& context = {});

/// A structural mutation for LLVMFuzzerCustomMutator: both formats read their
/// header one byte at a time from the end of the input, so nudging one of
/// the last bytes by +-1 grows or shrinks one length, head count or dim, or
/// flips a flag or the mode; otherwise libFuzzer's own mutation. Never
/// touches a version 2 input's magic. Off with structural=0. Measured: docs/history.md, "fuzz".
std::size_t structural_mutate(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed);

/// False when the bound of docs/bound.md is +inf for some element (it may overflow an f32
/// intermediate or its storage type, where the contract states no accuracy):
/// such cases lie outside the bounded harnesses' domain, never findings. A
/// cheap binary64 run of the oracle's loops decides it.
bool bound_is_finite_everywhere(const subject& s, const attn_case& c);

}  // namespace attncheck::fuzz

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);
