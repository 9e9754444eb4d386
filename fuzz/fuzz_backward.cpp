// fuzz_backward: bytes -> a contract 1.0 attention case and a dO recipe ->
// the subject's dQ, dK and dV against the MPFR backward oracle, every element
// within its a-priori bound (docs/bound.md "Backward"). The check is the law
// backward.gradients_within_bound_of_oracle itself (its prepare, then its
// check): the subject is handed the oracle's O in the storage type and its
// LSE in f32, dO is drawn from the case's seed by the grad= recipe the bytes
// choose, and an element whose bound is NaN or +inf is judged as that law
// judges it (no bound: never a failure for a value the contract allows). A
// finding is reported under the law, so the case file it writes replays with
// `attncheck repro FILE`, as every forward finding does. docs/fuzz.md.
#include "fuzz_support.hpp"

#include <cstdio>
#include <cstdlib>

#include "attncheck/backward_oracle.hpp"

namespace {

using namespace attncheck;

// Version 1 inputs (no magic): tiny shapes around the tiny-tile subject's
// backward tiles (q_tile 2, k_tile 3). The work cap counts 8 more per
// query-key pair than case_work (the format's frozen formula), so every
// decoded case has case_work <= 3000, the law's cap: its prepare cuts nothing.
constexpr fuzz::shape_caps v1_caps{
    .batch = 3,           // per-batch padding and offsets differ
    .kv_heads = 3,        // Hkv = 3 is not a power of two; dK, dV sum over a group
    .group = 3,           // G in 1..3: G != Hkv and G == Hkv both reachable
    .q_len = 5,           // q_tile 2: 2T+1, so query blocks with a tail feed dK, dV
    .k_len = 13,          // k_tile 3: 4T+1, key blocks with a tail feed dQ
    .head_dim = 9,        // one 8-wide AVX2 vector + 1; D != Dv reachable
    .work = 3000,         // the law's backward_max_work: about 3 ms of MPFR backward oracle
    .value_patches = 64,  // as fuzz_differential
};

// Version 3 and 4 inputs: the gate's case space, one-shot only (the backward
// entry takes no cache plan). Version 3 is contract 1.0; a version 4 input
// draws the variants a subject with FEATURE3_BACKWARD_VARIANTS declares and
// is judged by backward.variant_gradients_within_bound_of_oracle (for any
// other subject it decodes as version 3). 224 of 256 budgets
// give cap / 100 = 3000, the law's cap; the larger shapes the other 32 draw are
// cut to it by the law's prepare (batch and heads first, then head sizes,
// then lengths), so long keys with few heads are reached as well.
constexpr fuzz::reach_caps v3_caps{
    .work = 300'000,
    .value_patches = 64,
    .cache = false,
};

const law& named(const char* name) {
  const law* found = find_law(name);
  if (!found) {
    std::fprintf(stderr, "fuzz_backward: %s is no law\n", name);
    std::exit(2);
  }
  return *found;
}
const law& gradients() {
  static const law& l = named("backward.gradients_within_bound_of_oracle");
  return l;
}
const law& variant_gradients() {
  static const law& l = named("backward.variant_gradients_within_bound_of_oracle");
  return l;
}

// The subject under test, which must declare backward: a forward-only one
// would make every input a skip, a fuzzing run that tests nothing.
const subject& backward_subject() {
  static const subject* s = [] {
    const subject& found = fuzz::fuzz_subject();
    if (const std::string why = gradients().applicable(found); !why.empty()) {
      std::fprintf(stderr, "ATTNCHECK_FUZZ_SUBJECT: %s: %s; fuzz_backward needs a subject with a backward pass\n",
                   found.spec().c_str(), why.c_str());
      std::exit(2);
    }
    return &found;
  }();
  return *s;
}

// The law's prepare (contract 1.0, case_work <= 3000, far_below, far_above and
// unmasked masked_lead values made large_logits), then the values from the
// bytes, then the law's check. An input whose check judged no element
// (law_outcome::compared 0: every bound +inf, or NaN where the value tells
// nothing) is rejected, so libFuzzer keeps only inputs that test a gradient.
int judge(const law& l, const subject& s, attn_case& c, grad_kind grad, FuzzedDataProvider& in, int value_patches) {
  c.grad = grad;  // the law's prepare keeps a recipe the case has
  l.prepare(c, s);
  if (!s.cannot_take(c).empty()) return -1;
  try {
    fuzz::decode_values(in, value_patches, c);
  } catch (const input_error&) {
    return -1;  // a header the law's cut left invalid: outside the domain, never a finding
  }
  const auto o = fuzz::check_unless_declined(l, s, c);
  if (!o) return -1;
  fuzz::expect_pass(l.name, s, c, *o);
  return o->compared > 0 ? 0 : -1;
}

}  // namespace

// Before any input: a subject that cannot be loaded or has no backward pass
// prints one line and exits 2 here, not inside an input, where libFuzzer would
// take the exit for a finding and save a crash file.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  backward_subject();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const subject& s = backward_subject();
  const int version = fuzz::case_space_version(data, size);
  // An input larger than this decodes no bigger case: the caps bound what one case uses.
  if (size > (version ? sizeof fuzz::v3_magic + 4096 : 4096)) return -1;
  if (version == 0) {
    FuzzedDataProvider in(data, size);
    // The last byte: dO's recipe (dyadic, normal, adversarial), then the version 1 header.
    const auto grad = static_cast<grad_kind>(in.ConsumeIntegralInRange<int>(0, 2));
    attn_case c = fuzz::decode_header(in, v1_caps, s);
    return judge(gradients(), s, c, grad, in, v1_caps.value_patches);
  }
  const std::uint8_t* const body = data + sizeof fuzz::v3_magic;
  byte_choices choices(body, size - sizeof fuzz::v3_magic);
  const auto grad = static_cast<grad_kind>(choices.in_range(0, 2));
  const bool variants = version == 4 && s.has_backward_variants();
  fuzz::case_v3 h = fuzz::decode_case(choices, v3_caps, s, variants);  // one-shot
  FuzzedDataProvider in(body, choices.remaining());
  return judge(variants ? variant_gradients() : gradients(), s, h.c, grad, in, v3_caps.value_patches);
}

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed) {
  return attncheck::fuzz::structural_mutate(data, size, max_size, seed);
}
