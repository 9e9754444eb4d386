// What the law table (registry.cpp) reads from the law groups' files: each
// group's checks, preparations and applicability tests (catalogue/<group>.cpp
// holds them, with the helpers they share inside the group). The table itself,
// names, claims, judged floors and budgets, is registry.cpp: one entry a law,
// in gate order. Adding a law: write its check (and prepare) in its group's
// file, declare them here, add its entry to the table and append its name to
// fuzzed_law_names() (registry.cpp). The gate, the ctest properties
// (tests/laws/law_properties.cpp), the fuzzers and the mutation table all read
// all_laws(); law_properties.cpp fails when a law is missing from
// fuzzed_law_names() or two laws share a short name.
#pragma once

#include <string>

#include "attncheck/laws.hpp"

namespace attncheck::laws {

/// The chunked plan of the cache law for this case (also the causal law's cache path).
cache_plan plan_cache_steps(const attn_case& c);

// differential.cpp
void prepare_long_decodes(attn_case& c, const subject& s);

// softmax.cpp
void prepare_distribution(attn_case& c, const subject& s);
law_outcome weights_form_a_distribution(const subject& s, const attn_case& c);
std::string keeps_small_weights(const subject& s);
void prepare_peaked(attn_case& c, const subject& s);
law_outcome mass_kept_on_long_peaked_rows(const subject& s, const attn_case& c);

// causal.cpp
void prepare_causal(attn_case& c, const subject& s);
law_outcome invisible_inputs_never_change_outputs(const subject& s, const attn_case& c);

// gqa.cpp
void prepare_gqa(attn_case& c, const subject& s);
law_outcome gqa_matches_repeated_kv(const subject& s, const attn_case& c);

// cache.cpp
void prepare_cache(attn_case& c, const subject& s);
law_outcome chunked_cache_equals_prefill(const subject& s, const attn_case& c);

// scale.cpp
law_outcome power_of_two_scalings_are_exact(const subject& s, const attn_case& c);

// shift.cpp
law_outcome constant_score_shift_changes_nothing(const subject& s, const attn_case& c);

// permutation.cpp
void prepare_permutation(attn_case& c, const subject& s);
law_outcome permutations_commute(const subject& s, const attn_case& c);

// independence.cpp
void prepare_batch(attn_case& c, const subject& s);
void prepare_masked_slots(attn_case& c, const subject& s);
void prepare_padding(attn_case& c, const subject& s);
law_outcome batch_elements_are_independent(const subject& s, const attn_case& c);
law_outcome masked_slots_are_ignored(const subject& s, const attn_case& c);
law_outcome padding_equals_truncation(const subject& s, const attn_case& c);

// hull.cpp
law_outcome output_in_convex_hull(const subject& s, const attn_case& c);

// masked.cpp
void prepare_fully_masked(attn_case& c, const subject& s);
law_outcome fully_masked_rows_are_zero(const subject& s, const attn_case& c);

// extreme.cpp
void prepare_extreme(attn_case& c, const subject& s);
law_outcome extreme_within_bound(const subject& s, const attn_case& c);

// determinism.cpp
void prepare_determinism(attn_case& c, const subject& s);
law_outcome runs_are_deterministic(const subject& s, const attn_case& c);

// lse.cpp
void prepare_split(attn_case& c, const subject& s);
law_outcome lse_merges_split_keys(const subject& s, const attn_case& c);

// window.cpp
std::string declares_window_or_chunk(const subject& s);
void prepare_outside(attn_case& c, const subject& s);
law_outcome outside_keys_never_matter(const subject& s, const attn_case& c);
law_outcome degenerate_windows_equal_plain(const subject& s, const attn_case& c);

// sinks.cpp
std::string sinks_and_lse(const subject& s);
void prepare_sinks(attn_case& c, const subject& s);
void prepare_sink_shift(attn_case& c, const subject& s);
law_outcome sink_rescales_plain_output(const subject& s, const attn_case& c);
law_outcome common_shift_changes_nothing(const subject& s, const attn_case& c);

// softcap.cpp
void prepare_capped(attn_case& c, const subject& s);
law_outcome weights_within_capped_range(const subject& s, const attn_case& c);
law_outcome far_cap_equals_none(const subject& s, const attn_case& c);

// bias.cpp
std::string alibi_and_bias(const subject& s);
std::string bias_and_mask(const subject& s);
void prepare_alibi(attn_case& c, const subject& s);
void prepare_row_constant(attn_case& c, const subject& s);
void prepare_masking(attn_case& c, const subject& s);
void prepare_broadcast(attn_case& c, const subject& s);
law_outcome alibi_equals_explicit_bias(const subject& s, const attn_case& c);
law_outcome row_constant_changes_nothing(const subject& s, const attn_case& c);
law_outcome minus_inf_equals_mask(const subject& s, const attn_case& c);
law_outcome broadcast_equals_materialized(const subject& s, const attn_case& c);

// backward.cpp
std::string takes_backward_variants(const subject& s);
std::string takes_backward_with_lse(const subject& s);
void prepare_variant_gradients(attn_case& c, const subject& s);
law_outcome gradients_within_bound(const subject& s, const attn_case& c);
law_outcome own_forward_within_bound(const subject& s, const attn_case& c);

// backward_sums.cpp
law_outcome key_gradients_sum_to_zero(const subject& s, const attn_case& c);
law_outcome value_gradients_sum(const subject& s, const attn_case& c);

// backward_relations.cpp
void prepare_translated(attn_case& c, const subject& s);
void prepare_gqa_gradients(attn_case& c, const subject& s);
law_outcome translated_keys(const subject& s, const attn_case& c);
law_outcome gqa_sums_repeated_mha(const subject& s, const attn_case& c);
law_outcome additive_in_output_gradient(const subject& s, const attn_case& c);

// backward_exact.cpp
std::string claims_backward_determinism(const subject& s);
std::string takes_backward_and_mask(const subject& s);
void prepare_linear(attn_case& c, const subject& s);
void prepare_masked(attn_case& c, const subject& s);
law_outcome linear_in_output_gradient(const subject& s, const attn_case& c);
law_outcome masked_keys_get_zero(const subject& s, const attn_case& c);
law_outcome backward_same_bits(const subject& s, const attn_case& c);

// paged.cpp
void prepare_equals_dense(attn_case& c, const subject& s);
void prepare_shared(attn_case& c, const subject& s);
law_outcome paged_equals_dense(const subject& s, const attn_case& c);
law_outcome placement_changes_nothing(const subject& s, const attn_case& c);
law_outcome shared_prefix_equals_private_copies(const subject& s, const attn_case& c);

// page_table.cpp
law_outcome unspecified_entries_never_matter(const subject& s, const attn_case& c);

// descale.cpp
std::string declares_fp8(const subject& s);
void prepare_fp8(attn_case& c, const subject& s);
law_outcome power_of_two_moves_between_value_and_descale(const subject& s, const attn_case& c);
law_outcome per_head_descale_moves_only_its_head(const subject& s, const attn_case& c);
law_outcome unit_descale_equals_none(const subject& s, const attn_case& c);

// ragged.cpp
std::string declares_ragged(const subject& s);
void prepare_ragged(attn_case& c, const subject& s);
void prepare_zero_length(attn_case& c, const subject& s);
law_outcome ragged_equals_dense_per_sequence(const subject& s, const attn_case& c);
law_outcome zero_length_sequences_are_inert(const subject& s, const attn_case& c);

}  // namespace attncheck::laws
