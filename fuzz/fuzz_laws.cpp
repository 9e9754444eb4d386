// fuzz_laws: bytes -> one law and one case -> the law's own check.
// Every law (bitwise, bounded by the binary64 bound, or judged against the
// oracle's fast tier): version 1 inputs are tiny cases for speed, version 3
// inputs come from the gate's case space under a work cap (docs/fuzz.md).
#include "fuzz_support.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "attncheck/oracle.hpp"

namespace {

using namespace attncheck;

// Version 1 caps: tiny shapes for speed; each still crosses the tiny-tile
// subject's edges where the law needs it.
constexpr fuzz::shape_caps v1_caps{
    .batch = 3,     // batch independence needs B >= 2; 3 lets the middle element differ
    .kv_heads = 2,  // with G up to 3: Hq = 6, Hkv = 2, the MUTANTS gqa "min" shape
    .group = 3,
    .q_len = 5,           // q_tile 2: 2T+1
    .k_len = 7,           // k_tile 3 and split_keys 6: one split + 1; cache chunkings up to 7 tokens
    .head_dim = 4,        // the laws compare bits, so D beyond the scalar path adds time only
    .work = 2048,         // keeps a law's 2-8 subject calls and binary64 bound near 50 us
    .value_patches = 16,  // a few specials per case; bitwise laws need no bulk
};

// Version 3 caps: the gate's case space, production sizes included. A law
// makes 2-8 subject calls and one binary64 bound per case (the oracle laws
// run the oracle's auto tier, MPFR only where binary64 is not accurate
// enough), so its cap is per call.
constexpr fuzz::reach_caps v3_caps{
    .work = 200'000,  // case_work per subject call; a law's prepare() may double it
    .value_patches = 16,
    .cache = false,  // the cache law below draws its own chunkings; fuzz_differential fuzzes plans
};

// Every law, at its place in fuzzed_law_names() (append-only): the input's
// last byte indexes that list, so saved inputs keep their law when laws are added.
// Versions 1 and 3 index its first frozen_law_count entries (the list's
// size when they were frozen), modulo as FuzzedDataProvider reads a range.
constexpr std::int64_t frozen_law_count = 16;
const std::vector<const law*>& fuzzed_laws() {
  static const std::vector<const law*> table = [] {
    std::vector<const law*> t;
    for (const std::string& n : fuzzed_law_names()) {
      t.push_back(find_law(n));
      if (!t.back()) {
        std::fprintf(stderr, "fuzz_laws: fuzzed_law_names() names %s, which is no law\n", n.c_str());
        std::abort();
      }
    }
    return t;
  }();
  return table;
}

// Bounded comparisons judge only cases whose bound is finite everywhere; bitwise comparisons judge every case.

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int version = fuzz::case_space_version(data, size);
  const bool v3 = version != 0;  // the case space: version 3 or 4
  // An input larger than this decodes no bigger case: the caps bound what one case uses.
  if (size > (v3 ? sizeof fuzz::v3_magic + 4096 : 1024)) return -1;
  const subject& s = fuzz::fuzz_subject();
  const std::uint8_t* const body = v3 ? data + sizeof fuzz::v3_magic : data;
  const std::size_t body_size = v3 ? size - sizeof fuzz::v3_magic : size;
  byte_choices choices(body, body_size);  // reads the law byte as FuzzedDataProvider would
  // The law byte. Versions 1 and 3 take it modulo the 16 laws the list had
  // when they were frozen, so a saved input keeps its law as the list grows;
  // version 4 takes the byte as the index itself (an index past the list is
  // rejected), so its inputs keep their laws under every append too.
  std::size_t pick = 0;
  if (version == 4) {
    pick = static_cast<std::size_t>(choices.in_range(0, 255));
    if (pick >= fuzzed_laws().size()) return -1;
  } else {
    pick = static_cast<std::size_t>(choices.in_range(0, frozen_law_count - 1));
  }
  const law* l = fuzzed_laws()[pick];
  if (!l->applicable(s).empty()) return -1;
  attn_case c;
  fuzz::input_mode mode = fuzz::input_mode::one_shot;
  if (v3) {
    // Version 4: a law that takes variants draws those the subject declares, as in the gate.
    fuzz::case_v3 h = fuzz::decode_case(choices, v3_caps, s, version == 4 && l->variants, version == 4 && l->fp8);
    c = std::move(h.c);
    mode = h.mode;
  }
  FuzzedDataProvider in(body, choices.remaining());
  if (!v3) c = fuzz::decode_header(in, v1_caps, s);
  l->prepare(c, s);
  if (!s.cannot_take(c).empty()) return -1;
  // prepare() may grow a case (more heads, Lq = Lk + 3); far past the cap it is not worth the time.
  if (v3 && case_work(c) > 4 * v3_caps.work) return -1;
  try {
    fuzz::decode_values(in, v3 ? v3_caps.value_patches : v1_caps.value_patches, c);
  } catch (const input_error&) {
    return -1;  // prepare() made a header the caps never meant (never seen; kept safe)
  }
  if (l->fuzz.bounded && !fuzz::bound_is_finite_everywhere(s, c)) return -1;
  const auto o = fuzz::check_unless_declined(*l, s, c);
  if (!o) return -1;
  fuzz::expect_pass(l->name, s, c, *o, v3 ? fuzz::name(mode) : "");
  return 0;
}

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed) {
  return attncheck::fuzz::structural_mutate(data, size, max_size, seed);
}
