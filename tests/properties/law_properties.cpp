// Every law as a rapidcheck property under GoogleTest, on the bundled kernel
// and on the naive f32 subject. Budget: RC_PARAMS (ctest sets max_success).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "attncheck/generators.hpp"
#include "attncheck/laws.hpp"

namespace attncheck {
namespace {

const subject& builtin() {
  static const auto s = subject::load("builtin");
  return *s;
}
const subject& naive() {
  static const auto s = subject::load("naive");
  return *s;
}

// One case of a law: generate, prepare, materialize, check; fail with the law's message.
void holds(const std::string& law_name, const subject& s) {
  const law* l = find_law(law_name);
  RC_ASSERT(l != nullptr);
  if (!l->applicable(s).empty()) RC_DISCARD("law not applicable: " + l->applicable(s));
  attn_case c = *any_case(s);
  l->prepare(c, s);
  materialize(c);
  const law_outcome o = l->check(s, c);
  RC_TAG(o.v == verdict::pass ? "pass" : "fail");
  if (o.v == verdict::fail) RC_FAIL(o.message + (o.worst.where.empty() ? "" : "\n  worst: " + o.worst.describe()));
}

#define ATTNCHECK_LAW_PROP(group, name)                                                   \
  RC_GTEST_PROP(group, name##_builtin, ()) { holds(#group "." #name, builtin()); }       \
  RC_GTEST_PROP(group, name##_naive, ()) { holds(#group "." #name, naive()); }

ATTNCHECK_LAW_PROP(differential, output_within_bound_of_oracle)
ATTNCHECK_LAW_PROP(softmax, weights_form_a_distribution)
ATTNCHECK_LAW_PROP(causal, future_keys_never_change_past_outputs)
ATTNCHECK_LAW_PROP(gqa, matches_mha_on_repeated_kv)
ATTNCHECK_LAW_PROP(scale, power_of_two_scalings_are_exact)
ATTNCHECK_LAW_PROP(shift, constant_score_offset_changes_nothing)
ATTNCHECK_LAW_PROP(permutation, keys_queries_batch_heads_commute)
ATTNCHECK_LAW_PROP(independence, batch_elements_do_not_interact)
ATTNCHECK_LAW_PROP(independence, masked_slots_are_ignored)
ATTNCHECK_LAW_PROP(independence, padding_equals_truncation)
ATTNCHECK_LAW_PROP(hull, output_within_visible_values)
ATTNCHECK_LAW_PROP(masked, fully_masked_rows_are_zero)
ATTNCHECK_LAW_PROP(extreme, large_logits_within_bound)
ATTNCHECK_LAW_PROP(determinism, same_bits_every_run_thread_count_layout)
ATTNCHECK_LAW_PROP(lse, split_keys_merge_by_lse)

// The cache law: the naive subject has a cache; the bundled one once its
// cache is behind the ABI (it is skipped, never passed, until then).
RC_GTEST_PROP(cache, chunked_decode_equals_prefill_naive, ()) { holds("cache.chunked_decode_equals_prefill", naive()); }
TEST(cache, chunked_decode_equals_prefill_builtin) {
  const law* l = find_law("cache.chunked_decode_equals_prefill");
  ASSERT_NE(l, nullptr);
  if (!l->applicable(builtin()).empty()) GTEST_SKIP() << l->applicable(builtin());
  rc::detail::checkGTest([] { holds("cache.chunked_decode_equals_prefill", builtin()); });
}

TEST(laws, every_law_is_covered_here) {
  // 16 laws in the registry; this file names each one.
  EXPECT_EQ(all_laws().size(), 16u);
}

}  // namespace
}  // namespace attncheck
