// fuzz_laws: bytes -> one law and one small case -> the law's own check.
// The oracle-free laws (bitwise, or bounded by the binary64 bound), so tens
// of thousands of cases per second fit.
#include "fuzz_support.hpp"

#include <cmath>

#include "attncheck/oracle.hpp"

namespace {

using namespace attncheck;

// Caps: tiny shapes for speed (>= 10,000 exec/s); each still crosses the
// tiny-tile subject's edges where the law needs it.
constexpr fuzz::shape_caps caps{
    .batch = 3,      // batch independence needs B >= 2; 3 lets the middle element differ
    .kv_heads = 2,   // with G up to 3: Hq = 6, Hkv = 2, the MUTANTS gqa "min" shape
    .group = 3,
    .q_len = 5,      // q_tile 2: 2T+1
    .k_len = 7,      // k_tile 3 and split_keys 6: one split + 1; cache chunkings up to 7 tokens
    .head_dim = 4,   // the laws compare bits, so D beyond the scalar path adds time only
    .work = 2048,    // keeps a law's 2-8 subject calls and binary64 bound near 50 us
    .value_patches = 16,  // a few specials per case; bitwise laws need no bulk
};

struct fuzzed_law {
  const char* name;
  bool bounded;  // compares within the bound (when the subject claims no bitwise invariance)
};

// Every law that needs no multiprecision oracle and reads its perturbations
// (chunking, page order, poisoned key) from the case seed, which the bytes set.
constexpr fuzzed_law fuzzed_laws[] = {
    {"causal.future_keys_never_change_past_outputs", false},
    {"gqa.matches_mha_on_repeated_kv", true},
    {"cache.chunked_decode_equals_prefill", true},
    {"independence.masked_slots_are_ignored", false},
    {"independence.batch_elements_do_not_interact", true},
    {"independence.padding_equals_truncation", true},
    {"scale.power_of_two_scalings_are_exact", false},
    {"determinism.same_bits_every_run_thread_count_layout", true},
    {"masked.fully_masked_rows_are_zero", false},
    {"lse.split_keys_merge_by_lse", true},
};

// Bounded comparisons judge only cases whose bound is finite everywhere; bitwise comparisons judge every case.

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An input larger than 1 KiB decodes no bigger case: the caps bound what one case uses.
  if (size > 1024) return -1;
  const subject& s = fuzz::fuzz_subject();
  FuzzedDataProvider in(data, size);
  const fuzzed_law& pick = in.PickValueInArray(fuzzed_laws);
  const law* l = find_law(pick.name);
  if (!l || !l->applicable(s).empty()) return -1;
  attn_case c = fuzz::decode_header(in, caps, s);
  l->prepare(c, s);
  if (!s.cannot_take(c).empty()) return -1;
  try {
    fuzz::decode_values(in, caps, c);
  } catch (const input_error&) {
    return -1;  // prepare() made a header the caps never meant (never seen; kept safe)
  }
  if (pick.bounded && !fuzz::bound_is_finite_everywhere(s, c)) return -1;
  fuzz::expect_pass(l->name, s, c, l->check(s, c));
  return 0;
}

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed) {
  return attncheck::fuzz::structural_mutate(data, size, max_size, seed);
}
