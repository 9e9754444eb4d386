// fuzz_laws: bytes -> one law and one case -> the law's own check.
// Every law (bitwise, bounded by the binary64 bound, or judged against the
// oracle's fast tier): version 1 inputs are tiny cases for speed, version 2
// inputs reach production sizes under a work cap (docs/fuzz.md).
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

// Version 2 caps: production sizes. A law makes 2-8 subject calls and one
// binary64 bound per case (the oracle laws run the oracle's auto tier, MPFR only
// where binary64 is not accurate enough), so its cap is per call.
constexpr fuzz::reach_caps v2_caps{
    .batch = 8,
    .q_heads = 64,
    .group = 16,
    .q_len = 4096,
    .k_len = 4096,
    .decode_k_len = 8192,
    .work = 200'000,  // B*Hq*Lq*row_cost per subject call; a law's prepare() may double it
    .value_patches = 16,
    .cache = false,  // the cache law below draws its own chunkings; fuzz_differential fuzzes plans
};

// Every law, at its fuzz slot (law::fuzzing): the input's last byte selects the
// slot, so a law keeps its byte when laws are added and saved inputs keep their law.
const std::vector<const law*>& fuzzed_laws() {
  static const std::vector<const law*> table = [] {
    std::vector<const law*> t(all_laws().size(), nullptr);
    for (const auto& l : all_laws()) {
      const auto k = static_cast<std::size_t>(l.fuzz.slot);
      if (l.fuzz.slot < 0 || k >= t.size() || t[k]) {
        std::fprintf(stderr, "fuzz_laws: %s has fuzz slot %d: slots must be 0..%zu, each used once\n", l.name.c_str(),
                     l.fuzz.slot, t.size() - 1);
        std::abort();
      }
      t[k] = &l;
    }
    return t;
  }();
  return table;
}

// Bounded comparisons judge only cases whose bound is finite everywhere; bitwise comparisons judge every case.

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const bool v2 = fuzz::is_v2(data, size);
  // An input larger than this decodes no bigger case: the caps bound what one case uses.
  if (size > (v2 ? sizeof fuzz::v2_magic + 4096 : 1024)) return -1;
  const subject& s = fuzz::fuzz_subject();
  FuzzedDataProvider in(v2 ? data + sizeof fuzz::v2_magic : data, v2 ? size - sizeof fuzz::v2_magic : size);
  const law* l = fuzzed_laws()[in.ConsumeIntegralInRange<std::size_t>(0, fuzzed_laws().size() - 1)];
  if (!l->applicable(s).empty()) return -1;
  fuzz::header_v2 h;
  if (v2)
    h = fuzz::decode_header_v2(in, v2_caps, s, l->fuzz.lq_is_lk);
  else
    h.c = fuzz::decode_header(in, v1_caps, s);
  attn_case& c = h.c;
  l->prepare(c, s);
  if (!s.cannot_take(c).empty()) return -1;
  // prepare() may grow a case (more heads, Lq = Lk + 3); far past the cap it is not worth the time.
  if (v2 && c.b * c.hq * c.lq * fuzz::row_cost(c) > 4 * v2_caps.work) return -1;
  try {
    fuzz::decode_values(in, v2 ? v2_caps.value_patches : v1_caps.value_patches, c);
  } catch (const input_error&) {
    return -1;  // prepare() made a header the caps never meant (never seen; kept safe)
  }
  if (l->fuzz.bounded && !fuzz::bound_is_finite_everywhere(s, c)) return -1;
  fuzz::expect_pass(l->name, s, c, l->check(s, c), v2 ? fuzz::name(h.mode) : "");
  return 0;
}

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed) {
  return attncheck::fuzz::structural_mutate(data, size, max_size, seed);
}
