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
#include "attncheck/case_space.hpp"
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
// Input format, version 3 (inputs that start with v3_magic): the case space
// of the gate (attncheck/case_space.hpp). The choices come from the end of
// the bytes through byte_choices, the rest goes to a FuzzedDataProvider for
// the values. docs/fuzz.md, "Input formats".

/// The first four bytes of a version 3 input.
inline constexpr std::uint8_t v3_magic[4] = {0xa7, 'A', 'C', 0x03};
/// The first four bytes of a version 4 input: version 3 plus the contract
/// 1.1 variant choices after the header (decode_case, `variants`).
inline constexpr std::uint8_t v4_magic[4] = {0xa7, 'A', 'C', 0x04};
static_assert(sizeof v3_magic == sizeof v4_magic);
/// True when the input is version 3 (starts with v3_magic).
bool is_v3(const std::uint8_t* data, std::size_t size);
/// True when the input is version 4 (starts with v4_magic).
bool is_v4(const std::uint8_t* data, std::size_t size);
/// The case-space version of an input: 3, 4, or 0 (version 1: no magic).
int case_space_version(const std::uint8_t* data, std::size_t size);

enum class input_mode : std::uint8_t { one_shot, cache };
const char* name(input_mode m);

/// What a harness lets a version 3 input cost.
struct reach_caps {
  /// case_work at most (B*Hq*Lq*Lk*(D+Dv), the one work formula); most
  /// inputs get a tenth or a hundredth of it (decode_case). For a cache run
  /// Lq counts the plan's query rows.
  std::int64_t work;
  int value_patches;  ///< element overwrites taken from the bytes, at most
  bool cache;         ///< the mode choice may choose a run through the cache
};

/// A decoded version 3 header.
struct case_v3 {
  attn_case c;
  input_mode mode = input_mode::one_shot;
  std::int64_t work = 0;  ///< this input's budget
  cache_plan plan;        ///< cache mode: the plan (plan_of)
};

/// Decodes a version 3 header from the choices: the mode (one-shot, or a
/// run through the cache when caps.cache and the subject has one), this
/// input's budget (caps.work / 100 for 224 of 256 values, / 10 for 28, all of
/// it for 4), then the raw choices of the case space mapped by case_of() with
/// that budget as the cap (every mask, poison and value kind allowed). A
/// cache case is made causal, without a boolean mask or poison, with Lq = Lk
/// (one Q row per position); its key padding gives the sequence lengths, and
/// plan_of() then reads a plan of at most budget / case_work(Lq = 1) query
/// rows. One whose B*Hq*Lk*Lk passes case_limits::max_pairs stays one-shot.
///
/// With `variants` (a version 4 input, judged by a law that takes variants)
/// and a subject that declares some (ABI v3 features) and a one-shot mode,
/// the variant choices (read_variant_choices) follow the header's, exactly as
/// the gate's generator draws them: a case with a variant is capped at
/// min(budget, run_default::variant_max_work) (the MPFR oracle judges it),
/// then apply_variants() with the subject's features and hints. Otherwise
/// nothing more is read: a version 4 input decodes as version 3.
case_v3 decode_case(byte_choices& in, const reach_caps& caps, const subject& s, bool variants = false, bool fp8 = false);

// ---------------------------------------------------------------------------
// Input format, version 1 (every input that does not start with v3_magic):
// small shapes within shape_caps, one-shot attention only. Frozen: it
// decodes the committed regression inputs (tests/regressions/inputs/), whose
// cases (scales 1000, 8, -16; 64-bit seeds) the case space does not reach.
// New inputs are version 3.

/// Upper bounds on a decoded version 1 case; the reason for each set lives
/// where it is defined (fuzz_differential.cpp, fuzz_laws.cpp).
struct shape_caps {
  std::int64_t batch;     ///< B, inclusive
  std::int64_t kv_heads;  ///< Hkv, inclusive
  std::int64_t group;     ///< G = Hq / Hkv, inclusive
  std::int64_t q_len;     ///< Lq, inclusive
  std::int64_t k_len;     ///< Lk, inclusive
  std::int64_t head_dim;  ///< D and Dv each, inclusive
  std::int64_t work;      ///< B*Hq*Lq*Lk*(D+Dv+8) at most, as frozen with the format: case_work plus 8 per query-key pair
  int value_patches;      ///< element overwrites taken from the bytes, at most
};

/// Decodes a version 1 header: shapes within caps, dtype among those the
/// subject takes, causal, key padding, boolean-mask shape, scale, layout,
/// value recipe (the first 8 kinds), poison and seed. Mask contents and
/// tensors are left for decode_values.
attn_case decode_header(FuzzedDataProvider& in, const shape_caps& caps, const subject& s);

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

/// The law's check of c, or nullopt when the case was declined: by a version
/// 4 subject, or by the host for a case outside the subject's declared
/// static limits. A declined input is outside the harness's domain (the
/// harness rejects it), never a finding, as a decline is never a failure.
std::optional<law_outcome> check_unless_declined(const law& l, const subject& s, const attn_case& c);

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
/// the last bytes by +-1 grows or shrinks one choice (a length, head count
/// or dim), or flips a flag or the mode; otherwise libFuzzer's own mutation.
/// Never touches a version 3 input's magic. Off with structural=0. Measured: docs/history.md, "fuzz".
std::size_t structural_mutate(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed);

/// False when the bound of docs/bound.md is +inf for some element (it may overflow an f32
/// intermediate or its storage type, where the contract states no accuracy):
/// such cases lie outside the bounded harnesses' domain, never findings. A
/// cheap binary64 run of the oracle's loops decides it.
bool bound_is_finite_everywhere(const subject& s, const attn_case& c);

}  // namespace attncheck::fuzz

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);
