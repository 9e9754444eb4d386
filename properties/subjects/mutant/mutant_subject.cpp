// The mutation plugin: the bundled kernel's adapter (subjects/builtin) linked
// to attnimpl_mutation, the kernel with its deliberate bugs switchable at run
// time (impl/src/mutation.hpp). ci/mutation gates it once per mutant:
//
//   ATTNIMPL_MUTANT=gqa_modulo attncheck gate --subject build/plugins/libattnimpl_mutant.so
//
// ATTNIMPL_MUTANT: a mutant's name, or unset / "none" for the correct kernel.
// ATTNIMPL_MUTANT_TILES: "q_tile,k_tile,split_keys" (default "2,3,6": tiles
// that small make tile edges, rescales and split merges show on the small
// shapes the laws shrink to; "0,0,0" gives the production tiles).
#include <cstdio>
#include <cstdlib>

#include "attncheck/subject.h"
#include "attncheck/subject_host.hpp"
#include "mutation.hpp"  // impl/src: the mutation switch

namespace {

const attncheck_subject* make() {
  long long q = 2, k = 3, split = 6;
  if (const char* env = std::getenv("ATTNIMPL_MUTANT_TILES")) {
    if (std::sscanf(env, "%lld,%lld,%lld", &q, &k, &split) != 3 || q < 0 || k < 0 || split < 0) {
      std::fprintf(stderr, "ATTNIMPL_MUTANT_TILES=%s: expected q_tile,k_tile,split_keys (>= 0)\n", env);
      std::abort();
    }
  }
  attncheck::configure_builtin(q, k, split);
  static attncheck_subject desc = *attncheck::builtin_subject();
  desc.name = "attnimpl-mutant";
  return &desc;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const attncheck_subject* attncheck_subject_v1(void) {
  static const attncheck_subject* desc = make();
  return desc;
}

/// Every mutant this plugin can be switched to, null-terminated (for ci/mutation).
extern "C" __attribute__((visibility("default"))) const char* const* attnimpl_mutants(void) {
  return attnimpl::mutation::names();
}
