// Declarations of every law function; registry.cpp lists them in gate order.
#pragma once

#include "attncheck/laws.hpp"

namespace attncheck::laws {

law_outcome output_within_bound(const subject& s, const attn_case& c);
void prepare_extreme(attn_case& c, const subject& s);
law_outcome extreme_logits_stay_within_bound(const subject& s, const attn_case& c);

void prepare_distribution(attn_case& c, const subject& s);
law_outcome weights_form_a_distribution(const subject& s, const attn_case& c);

void prepare_causal(attn_case& c, const subject& s);
law_outcome invisible_inputs_never_change_outputs(const subject& s, const attn_case& c);

void prepare_gqa(attn_case& c, const subject& s);
law_outcome gqa_matches_repeated_kv(const subject& s, const attn_case& c);

void prepare_cache(attn_case& c, const subject& s);
/// The chunked plan of the cache law for this case (also the causal law's cache path).
cache_plan plan_cache_steps(const attn_case& c);
law_outcome chunked_cache_equals_prefill(const subject& s, const attn_case& c);

law_outcome power_of_two_scalings_are_exact(const subject& s, const attn_case& c);

law_outcome constant_score_shift_changes_nothing(const subject& s, const attn_case& c);

void prepare_permutation(attn_case& c, const subject& s);
law_outcome permutations_commute(const subject& s, const attn_case& c);

void prepare_batch(attn_case& c, const subject& s);
law_outcome batch_elements_are_independent(const subject& s, const attn_case& c);
void prepare_masked_slots(attn_case& c, const subject& s);
law_outcome masked_slots_are_ignored(const subject& s, const attn_case& c);
void prepare_padding(attn_case& c, const subject& s);
law_outcome padding_equals_truncation(const subject& s, const attn_case& c);

law_outcome output_in_convex_hull(const subject& s, const attn_case& c);

void prepare_fully_masked(attn_case& c, const subject& s);
law_outcome fully_masked_rows_are_zero(const subject& s, const attn_case& c);

law_outcome runs_are_deterministic(const subject& s, const attn_case& c);

void prepare_split(attn_case& c, const subject& s);
void prepare_determinism(attn_case& c, const subject& s);
law_outcome lse_merges_split_keys(const subject& s, const attn_case& c);

}  // namespace attncheck::laws
