// The case space: one definition of every choice a case header is made of
// (shape regime, head sizes, lengths, masks, dtype, scale, values, layout,
// poison, seed) and of a plan through the cache, written against a small
// choices interface with two backends:
//
//  - rapidcheck (generate and shrink): any_raw_choice() draws the header's
//    raw choices with rc::gen::build over the table below, at full size, and
//    rc_choices draws each choice of a plan inside a rapidcheck generator;
//  - a byte stream (the fuzz harnesses): byte_choices reads each choice from
//    the end of a byte span exactly as libFuzzer's FuzzedDataProvider reads
//    ConsumeIntegralInRange, so the rest of the bytes can go to a
//    FuzzedDataProvider for tensor values.
//
// The gate's generator any_case() and the fuzz harnesses' v3 decoder both
// map the raw choices to a case with case_of(); tests/laws/
// case_space_test.cpp checks that the backends give the same case from the
// same choices (docs/architecture.md, "From a choice to a verdict").
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attncheck/case.hpp"
#include "attncheck/subject_host.hpp"

namespace attncheck {

/// The one work formula: multiply-adds of the naive computation of a case,
/// B*Hq*Lq*Lk*(D+Dv). The gate's work budget and caps and the fuzz
/// harnesses' caps count in it.
std::int64_t case_work(const attn_case& c);

/// A source of choices. Each call is one choice; a backend answers it from
/// rapidcheck's random stream or from bytes.
class choices {
 public:
  virtual ~choices() = default;
  /// An integer in [lo, hi] (lo <= hi; hi - lo < 2^63). Shrinks toward lo.
  virtual std::int64_t in_range(std::int64_t lo, std::int64_t hi) = 0;
  /// True when the backend has nothing left to give (bytes used up): loops
  /// of a plan stop there. rapidcheck never runs out.
  virtual bool exhausted() const = 0;
};

/// The raw choices of a case header: integers in [0, n) that shrink toward
/// 0, which case_of() sends to the smallest case (B = Hq = Hkv = Lq = Lk =
/// D = Dv = 1, f32, dyadic values, no masks).
struct raw_choice {
  int regime = 0;  ///< 0..99: the shape regime (docs/distribution.md)
  int b = 0, hkv = 0, group = 0, lq = 0, lk = 0, d = 0, dv = 0, lq_mode = 0, hint = 0, hint_mode = 0, jitter = 0;
  int type = 0, causal = 0, padding = 0, mask = 0, mask_dims = 0, values = 0, layout = 0, poison = 0, scale = 0;
  std::vector<int> pad;  ///< pad_count entries, per batch element: 0 = full, else a cut
  std::uint64_t seed = 0;
  bool operator==(const raw_choice&) const = default;
};

/// One named integer choice of the header: its field, in [0, n).
struct choice_spec {
  const char* name;
  int n;
  int raw_choice::*field;
};

/// Head sizes D and Dv: the small ones first (shrinking goes there), then
/// the sizes of production models and their neighbours.
inline constexpr std::int64_t head_dims[] = {1,  2,  3,  4,  5,  6,  7,   8,   9,   16,  31, 32,
                                             33, 63, 64, 65, 80, 96, 127, 128, 129, 192, 256};
inline constexpr int n_small_dims = 10;  // 1..9, 16
inline constexpr int n_head_dims = static_cast<int>(std::size(head_dims));
/// Value kinds, indexed by raw_choice::values: the benign ones first;
/// adversarial kinds take about half the cases.
inline constexpr value_kind value_order[] = {
    value_kind::dyadic,         value_kind::normal,       value_kind::uniform,   value_kind::normal,
    value_kind::dyadic,         value_kind::large_logits, value_kind::dominant,  value_kind::equal_keys,
    value_kind::huge_v,         value_kind::tiny_v,       value_kind::far_below, value_kind::far_above,
    value_kind::underflow_gaps, value_kind::masked_lead,  value_kind::max_v,     value_kind::far_below};

/// The header's integer choices, in the order every backend draws them
/// (rapidcheck's random stream and saved v3 fuzz inputs depend on it: append
/// only, never reorder). After them: pad_count pad cuts in [0, pad_kinds),
/// then the seed in [0, seed_range).
inline constexpr choice_spec header_choices[] = {
    {"regime", 100, &raw_choice::regime},
    {"b", 64, &raw_choice::b},
    {"hkv", 60, &raw_choice::hkv},
    {"group", 60, &raw_choice::group},
    {"lq", 840, &raw_choice::lq},
    {"lk", 840, &raw_choice::lk},
    {"d", n_head_dims * 16, &raw_choice::d},
    {"dv", n_head_dims * 16, &raw_choice::dv},
    {"lq_mode", 12, &raw_choice::lq_mode},
    {"hint", 64, &raw_choice::hint},
    {"hint_mode", 36, &raw_choice::hint_mode},
    {"jitter", 1 << 13, &raw_choice::jitter},
    {"type", 3, &raw_choice::type},
    {"causal", 2, &raw_choice::causal},
    {"padding", 2, &raw_choice::padding},
    {"mask", 3, &raw_choice::mask},
    {"mask_dims", 16, &raw_choice::mask_dims},
    {"values", static_cast<int>(std::size(value_order)), &raw_choice::values},
    {"layout", 3, &raw_choice::layout},
    {"poison", 3, &raw_choice::poison},
    {"scale", 36, &raw_choice::scale},
};
inline constexpr int pad_count = 8, pad_kinds = 12;
inline constexpr std::uint64_t seed_range = 1u << 30;

/// The rapidcheck backend of the header: every choice of header_choices, the
/// pads and the seed with rc::gen::inRange at full size (rapidcheck's size
/// parameter does not shrink the ranges), shrinking toward 0.
rc::Gen<raw_choice> any_raw_choice();

/// The header's raw choices from any backend, in the order of header_choices.
raw_choice read_choices(choices& in);

/// What a subject and the generator's switches fix before any choice.
struct case_context {
  std::vector<dtype> types;               ///< the dtypes the subject takes (empty: f32)
  std::vector<std::int64_t> hints;        ///< lengths to lean to: tiles, splits, the subject's length hints
  std::vector<std::int64_t> hinted_dims;  ///< the subject's hinted head sizes
  bool can_causal = false, can_pad = false, can_mask = false, allow_poison = false;
  std::uint32_t variants = 0;  ///< ABI v3 variant bits the subject declares (apply_variants)
  static_limits limits;        ///< the subject's static limits: every case is fitted into them
};
case_context context_of(const subject& s, bool allow_masks, bool allow_poison);

/// The case of those choices: the shape of its regime cut down until
/// case_work <= cap (batch and heads first, then head sizes, lengths last),
/// then dtype, values, masks, layout, poison, scale and seed; the shape and
/// the scale moved into the subject's static limits (static_limits::fit_shape,
/// fit_causal, fit_scale; nothing moves for a subject without limits).
/// `alibi`: the case will carry ALiBi (its variants are drawn after), so a
/// limit on ALiBi's distance caps its lengths.
attn_case case_of(const raw_choice& r, const case_context& ctx, std::int64_t cap, bool alibi = false);

/// The raw choices of the contract 1.1 variants (docs/spec.md "Variants"),
/// drawn after the header only for a law that takes variants and a subject
/// that declares some (so every other law and subject keeps its stream).
/// Each shrinks toward 0 = that variant off.
/// The ABI v3 feature bits of the contract 1.1 score variants.
inline constexpr std::uint32_t score_variant_bits = ATTNCHECK_FEATURE3_WINDOW | ATTNCHECK_FEATURE3_CHUNK |
                                                    ATTNCHECK_FEATURE3_SOFTCAP | ATTNCHECK_FEATURE3_SINKS |
                                                    ATTNCHECK_FEATURE3_ALIBI | ATTNCHECK_FEATURE3_BIAS;
struct variant_choice {
  int any = 0;  ///< 0: no variant at all (half the cases: large contract 1.0 cases stay in the law's reach)
  int window = 0, window_left = 0, window_right = 0, chunk = 0, chunk_size = 0, softcap = 0, sinks = 0, alibi = 0, bias = 0,
      bias_dims = 0, bias_type = 0;
  bool operator==(const variant_choice&) const = default;
};
struct variant_choice_spec {
  const char* name;
  int n;
  int variant_choice::*field;
};
/// In the order every backend draws them: append only.
inline constexpr variant_choice_spec variant_choices[] = {
    {"any", 2, &variant_choice::any},
    {"window", 5, &variant_choice::window},  // off, left only, right only, both, (left, 0)
    {"window_left", 40, &variant_choice::window_left},
    {"window_right", 40, &variant_choice::window_right},
    {"chunk", 4, &variant_choice::chunk},  // on for 3
    {"chunk_size", 40, &variant_choice::chunk_size},
    {"softcap", 8, &variant_choice::softcap},
    {"sinks", 6, &variant_choice::sinks},  // sink_kind
    {"alibi", 4, &variant_choice::alibi},  // alibi_kind
    {"bias", 4, &variant_choice::bias},    // off, normal, masking, huge
    {"bias_dims", 16, &variant_choice::bias_dims},
    {"bias_type", 3, &variant_choice::bias_type},
};
/// The rapidcheck backend of the variant choices (as any_raw_choice).
rc::Gen<variant_choice> any_variant_choice();
/// The variant choices from any backend, in the order of variant_choices.
variant_choice read_variant_choices(choices& in);

/// The variants of those choices that the subject declares (features: its
/// ABI v3 bits), applied to a case header: windows and chunks lean to the
/// subject's hints +-1, softcaps sit below and above the scores, sinks range
/// from dominating to vanishing, ALiBi slopes of both signs, biases with -inf
/// rows and columns. Values are drawn by materialize() from the case's seed.
/// The variants are then fitted into the subject's static limits (a bias storage type it takes).
void apply_variants(attn_case& c, const variant_choice& v, std::uint32_t features, const std::vector<std::int64_t>& hints,
                    const static_limits& limits = {});

/// The raw choices of fp8 storage (docs/spec.md "fp8 storage"), drawn after
/// the header's (and the variants') only for a law that takes fp8 and a
/// subject that declares ATTNCHECK_FEATURE4_FP8, so every other law and
/// subject keeps its stream. Each shrinks toward 0 = no fp8.
struct fp8_choice {
  int any = 0;                                ///< 0: no fp8 (half the cases)
  int q = 0, k = 0, v = 0;                    ///< 0: the case's type; 1, 2: the subject's first or last fp8 type
  int q_scale = 0, k_scale = 0, v_scale = 0;  ///< descale_granularity of each fp8 tensor
  int descales = 0;                           ///< descale_kind
  bool operator==(const fp8_choice&) const = default;
};
struct fp8_choice_spec {
  const char* name;
  int n;
  int fp8_choice::*field;
};
/// In the order every backend draws them: append only.
inline constexpr fp8_choice_spec fp8_choices[] = {
    {"any", 2, &fp8_choice::any},
    {"q", 3, &fp8_choice::q},
    {"k", 3, &fp8_choice::k},
    {"v", 3, &fp8_choice::v},
    {"q_scale", 3, &fp8_choice::q_scale},
    {"k_scale", 3, &fp8_choice::k_scale},
    {"v_scale", 3, &fp8_choice::v_scale},
    {"descales", 5, &fp8_choice::descales},
};
/// The rapidcheck backend of the fp8 choices (as any_raw_choice).
rc::Gen<fp8_choice> any_fp8_choice();
/// The fp8 choices from any backend, in the order of fp8_choices.
fp8_choice read_fp8_choices(choices& in);
/// The fp8 types a subject takes (its dtypes' e4m3 and e5m2 bits with
/// ATTNCHECK_FEATURE4_FP8), in the ABI's order; empty: none.
std::vector<dtype> fp8_types_of(const subject& s);
/// fp8 storage from those choices on a dense case: each input in one of the
/// subject's fp8 types or the case's own (K and V in fp8 when the choices
/// name none: the fp8 cache with Q in the case's type), each fp8 input's
/// descale granularity, and the descale recipe. Values and descales are drawn
/// by materialize() from the case's seed. Nothing for a case in a paged or
/// ragged form or a backward case (fp8 is not built there).
void apply_fp8(attn_case& c, const fp8_choice& f, const std::vector<dtype>& fp8_types);

/// The lengths the subject's hints name (tiles, splits, length hints; 64 when none).
std::vector<std::int64_t> hint_lengths(const subject& s);

/// A plan through the cache for a causal case with Lq = Lk: page size, page
/// order (the subject's own, reversed or shuffled), a prefill of any length,
/// then chunks of any size, small chunks and single tokens, the sequences of
/// the batch advancing unevenly, each step querying 1 to its chunk's length
/// (or more) rows; at most max_rows query rows in all, and at most 64 steps.
cache_plan plan_of(choices& in, const attn_case& c, std::int64_t max_rows);

/// The rapidcheck backend of a dynamic definition (a plan): each choice one
/// rc::gen::inRange draw at full size. Only inside a rapidcheck generator or
/// property (rc::gen::exec).
class rc_choices final : public choices {
 public:
  std::int64_t in_range(std::int64_t lo, std::int64_t hi) override;
  bool exhausted() const override { return false; }
};

/// Plans drawn by rapidcheck (rc_choices), shrinking toward a one-step plan.
rc::Gen<cache_plan> any_cache_plan(const attn_case& c, std::int64_t max_rows);

/// The byte backend: each choice from the end of the span, as
/// FuzzedDataProvider::ConsumeIntegralInRange takes it (the fewest bytes that
/// cover hi - lo, most significant first, then modulo hi - lo + 1; 0 once the
/// bytes run out). What is left, [data, data + remaining()), is untouched.
class byte_choices final : public choices {
 public:
  byte_choices(const std::uint8_t* data, std::size_t size) : data_(data), left_(size) {}
  std::int64_t in_range(std::int64_t lo, std::int64_t hi) override;
  bool exhausted() const override { return left_ == 0; }
  std::size_t remaining() const { return left_; }

 private:
  const std::uint8_t* data_;
  std::size_t left_;
};

/// One answered choice: its range and value.
struct choice_record {
  std::int64_t lo, hi, value;
};

/// Wraps a backend and records every choice it answers.
class recording_choices final : public choices {
 public:
  explicit recording_choices(choices& inner) : inner_(inner) {}
  std::int64_t in_range(std::int64_t lo, std::int64_t hi) override;
  bool exhausted() const override { return inner_.exhausted(); }
  const std::vector<choice_record>& log() const { return log_; }

 private:
  choices& inner_;
  std::vector<choice_record> log_;
};

/// The bytes byte_choices reads those choices from, in order (the inverse of
/// byte_choices): the first choice's bytes last. Prepend anything (values,
/// patches) in front.
std::vector<std::uint8_t> encode_choices(const std::vector<choice_record>& log);
/// The choices of a header, as read_choices() reads them.
std::vector<choice_record> header_record(const raw_choice& r);

}  // namespace attncheck
