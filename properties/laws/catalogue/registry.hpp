// The law groups, one file each (catalogue/<group>.cpp holds every law of the
// group: name, one-line claim, judged floor, prepare and check), and the one
// list that registers them in gate order. Adding a law: write it in its
// group's file (or a new file with a <group>_laws() function) and, for a new
// group, add one ATTNCHECK_LAW_GROUP line below; append its name to
// fuzzed_law_names() (registry.cpp). The gate, the ctest properties
// (tests/laws/law_properties.cpp), the fuzzers and the mutation table
// all read all_laws(); law_properties.cpp fails when a law is missing from
// fuzzed_law_names() or two laws share a short name.
#pragma once

#include <vector>

#include "attncheck/laws.hpp"

// X-macro: one line per law group, in the order the gate runs and prints them
// (the backward group's laws take four lines, one per file: backward.cpp
// says which lives where).
#define ATTNCHECK_LAW_GROUPS(ATTNCHECK_LAW_GROUP) \
  ATTNCHECK_LAW_GROUP(differential)               \
  ATTNCHECK_LAW_GROUP(softmax)                    \
  ATTNCHECK_LAW_GROUP(causal)                     \
  ATTNCHECK_LAW_GROUP(gqa)                        \
  ATTNCHECK_LAW_GROUP(cache)                      \
  ATTNCHECK_LAW_GROUP(scale)                      \
  ATTNCHECK_LAW_GROUP(shift)                      \
  ATTNCHECK_LAW_GROUP(permutation)                \
  ATTNCHECK_LAW_GROUP(independence)               \
  ATTNCHECK_LAW_GROUP(hull)                       \
  ATTNCHECK_LAW_GROUP(masked)                     \
  ATTNCHECK_LAW_GROUP(extreme)                    \
  ATTNCHECK_LAW_GROUP(determinism)                \
  ATTNCHECK_LAW_GROUP(lse)                        \
  ATTNCHECK_LAW_GROUP(window)                     \
  ATTNCHECK_LAW_GROUP(sinks)                      \
  ATTNCHECK_LAW_GROUP(softcap)                    \
  ATTNCHECK_LAW_GROUP(bias)                       \
  ATTNCHECK_LAW_GROUP(backward)                   \
  ATTNCHECK_LAW_GROUP(backward_sums)              \
  ATTNCHECK_LAW_GROUP(backward_relations)         \
  ATTNCHECK_LAW_GROUP(backward_exact)             \
  ATTNCHECK_LAW_GROUP(paged)                      \
  ATTNCHECK_LAW_GROUP(page_table)                 \
  ATTNCHECK_LAW_GROUP(ragged)

namespace attncheck::laws {

#define ATTNCHECK_DECLARE_LAW_GROUP(group) std::vector<law> group##_laws();
ATTNCHECK_LAW_GROUPS(ATTNCHECK_DECLARE_LAW_GROUP)
#undef ATTNCHECK_DECLARE_LAW_GROUP

/// The chunked plan of the cache law for this case (also the causal law's cache path).
cache_plan plan_cache_steps(const attn_case& c);

}  // namespace attncheck::laws
