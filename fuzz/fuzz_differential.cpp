// fuzz_differential: bytes -> attention case -> the subject against the
// multiprecision oracle under the bound of docs/bound.md. One-shot and decode inputs go
// through the same check as the property
// differential.output_within_bound_of_oracle; cache inputs run the case
// through the subject's cache with a plan from the bytes and compare every
// query row the plan makes with the oracle's value for that position.
#include "fuzz_support.hpp"

#include <algorithm>
#include <cmath>

#include "attncheck/check.hpp"
#include "attncheck/oracle.hpp"

namespace {

using namespace attncheck;

// Version 1 inputs (no magic): the caps of the first harness, kept so that
// saved inputs decode to the same cases. Each keeps the oracle fast without
// losing a shape class that hides bugs in a tiled kernel (docs/mutation.md, "smallest shape").
constexpr fuzz::shape_caps v1_caps{
    .batch = 3,           // B = 2, 3: batch offsets and per-batch padding differ
    .kv_heads = 3,        // Hkv = 3 is not a power of two
    .group = 3,           // G in 1..3 with Hkv in 1..3: G != Hkv and G == Hkv both reachable
    .q_len = 5,           // q_tile 2 of the tiny-tile subject: 2T+1
    .k_len = 13,          // k_tile 3 and split_keys 6: 2 splits + 1, so tails, rescales and merges
    .head_dim = 9,        // one 8-wide AVX2 vector + 1 (head_dim_tail); D != Dv reachable
    .work = 4096,         // ~0.5 ms of MPFR-50 oracle at most
    .value_patches = 64,  // more overwrites than this rarely reach a new path; the dense runs cover bulk
};

// Version 3 inputs: the gate's case space, production sizes included.
constexpr fuzz::reach_caps v3_caps{
    .work = 2'000'000,  // case_work: the MPFR-50 oracle's multiply-adds per input (docs/fuzz.md: its cost)
    .value_patches = 64,
    .cache = true,
};

const law& differential() {
  static const law* l = find_law("differential.output_within_bound_of_oracle");
  return *l;
}

const char* const cache_law = "cache.chunked_decode_equals_prefill";

int one_shot(const subject& s, const attn_case& c, const char* mode) {
  if (!fuzz::bound_is_finite_everywhere(s, c)) return -1;
  const auto o = fuzz::check_unless_declined(differential(), s, c);
  if (!o) return -1;
  fuzz::expect_pass(differential().name, s, c, *o, mode);
  return 0;
}

// The case through the cache as the plan says, every query row against the
// oracle's value for its position (cache_run_as_case), within the bound of
// the one-shot causal case: docs/spec.md "KV cache" makes the chunked output equal
// the one-shot one, and the one-shot output lies within that bound.
int cached(const subject& s, const attn_case& c, const cache_plan& plan) {
  const attn_case as_one_shot = fuzz::cache_run_as_case(c, plan);
  if (!fuzz::bound_is_finite_everywhere(s, as_one_shot)) return -1;
  subject_output out;
  try {
    out = s.attend_cached(c, plan);
  } catch (const case_declined&) {
    return -1;  // declined (fuzz::check_unless_declined): outside the harness's domain
  }
  law_outcome o;
  comparison r;
  if (!out.ok()) {
    r.runs_ok({&out});
  } else {
    r = compare_with_reference(as_one_shot, out, reference(as_one_shot, oracle_options_for(s, c, oracle_precision::mpfr50)));
  }
  o.add("query rows of the cached run against the oracle", r);
  // Reported under the cache law: the case fits it (causal, Lq = Lk, no
  // mask), so `attncheck repro` replays it, with the law's own chunking.
  fuzz::expect_pass(cache_law, s, c, o, "cache run: " + fuzz::describe(plan));
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const subject& s = fuzz::fuzz_subject();
  const int version = fuzz::case_space_version(data, size);
  if (version == 0) {
    // An input larger than 4 KiB decodes no bigger case: the caps bound what one case uses.
    if (size > 4096) return -1;
    FuzzedDataProvider in(data, size);
    attn_case c = fuzz::decode_header(in, v1_caps, s);
    fuzz::decode_values(in, v1_caps.value_patches, c);
    return one_shot(s, c, "");
  }
  if (size > sizeof fuzz::v3_magic + 4096) return -1;
  byte_choices choices(data + sizeof fuzz::v3_magic, size - sizeof fuzz::v3_magic);
  // Version 4: the variants the subject declares, drawn as the gate draws them for the differential law.
  fuzz::case_v3 h =
      fuzz::decode_case(choices, v3_caps, s, version == 4 && differential().variants, version == 4 && differential().fp8);
  FuzzedDataProvider in(data + sizeof fuzz::v3_magic, choices.remaining());
  fuzz::decode_values(in, v3_caps.value_patches, h.c);
  return h.mode == fuzz::input_mode::cache ? cached(s, h.c, h.plan) : one_shot(s, h.c, fuzz::name(h.mode));
}

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed) {
  return attncheck::fuzz::structural_mutate(data, size, max_size, seed);
}
