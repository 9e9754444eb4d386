// all_laws(): every law group's laws, in the order of ATTNCHECK_LAW_GROUPS.
#include "registry.hpp"

namespace attncheck {

namespace {

std::vector<law> make_laws() {
  std::vector<law> v;
  const auto append = [&v](std::vector<law> group) {
    for (auto& l : group) v.push_back(std::move(l));
  };
#define ATTNCHECK_APPEND_LAW_GROUP(group) append(laws::group##_laws());
  ATTNCHECK_LAW_GROUPS(ATTNCHECK_APPEND_LAW_GROUP)
#undef ATTNCHECK_APPEND_LAW_GROUP
  return v;
}

}  // namespace

const std::vector<law>& all_laws() {
  static const std::vector<law> laws = make_laws();
  return laws;
}

const law* find_law(const std::string& name) {
  for (const auto& l : all_laws())
    if (l.name == name) return &l;
  return nullptr;
}

const std::vector<std::string>& fuzzed_law_names() {
  // Append only, never reorder or remove: fuzz_laws inputs select a law by
  // its index here (the first ten were the first harness's laws).
  static const std::vector<std::string> names = {
      "causal.future_keys_never_change_past_outputs",         // 0
      "gqa.matches_mha_on_repeated_kv",                       // 1
      "cache.chunked_decode_equals_prefill",                  // 2
      "independence.masked_slots_are_ignored",                // 3
      "independence.batch_elements_do_not_interact",          // 4
      "independence.padding_equals_truncation",               // 5
      "scale.power_of_two_scalings_are_exact",                // 6
      "determinism.same_bits_every_run_thread_count_layout",  // 7
      "masked.fully_masked_rows_are_zero",                    // 8
      "lse.split_keys_merge_by_lse",                          // 9
      "differential.output_within_bound_of_oracle",           // 10
      "softmax.weights_form_a_distribution",                  // 11
      "shift.constant_score_offset_changes_nothing",          // 12
      "permutation.keys_queries_batch_heads_commute",         // 13
      "hull.output_within_visible_values",                    // 14
      "extreme.large_logits_within_bound",                    // 15
      "window.outside_keys_never_matter",                     // 16
      "window.wide_window_equals_plain",                      // 17
      "sinks.sink_rescales_plain_output",                     // 18
      "sinks.common_shift_changes_nothing",                   // 19
      "softcap.weights_within_capped_range",                  // 20
      "softcap.far_cap_equals_none",                          // 21
      "bias.alibi_equals_explicit_bias",                      // 22
      "bias.row_constant_changes_nothing",                    // 23
      "bias.minus_inf_equals_mask",                           // 24
      "bias.broadcast_equals_materialized",                   // 25
      "backward.gradients_within_bound_of_oracle",            // 26
      "backward.key_gradients_sum_to_zero",                   // 27
      "backward.value_gradients_sum_to_output_gradients",     // 28
      "backward.linear_in_output_gradient",                   // 29
      "backward.masked_keys_get_zero",                        // 30
      "backward.same_bits_every_run_and_thread_count",        // 31
      "paged.equals_dense",                                   // 32
      "page_table.unspecified_entries_never_matter",          // 33
      "ragged.equals_dense_per_sequence",                     // 34
      "paged.placement_changes_nothing",                      // 35
      "paged.shared_prefix_equals_private_copies",            // 36
      "ragged.zero_length_sequences_are_inert",               // 37
      "backward.own_forward_within_bound_of_oracle",          // 38
      "backward.translated_keys_change_no_gradient",          // 39
      "backward.gqa_sums_repeated_mha_gradients",             // 40
      "backward.additive_in_output_gradient",                 // 41
      "backward.variant_gradients_within_bound_of_oracle",    // 42
  };
  return names;
}

}  // namespace attncheck
