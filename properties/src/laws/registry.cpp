// The laws in gate order, each with its judged floor.
#include "registry.hpp"

namespace attncheck {

namespace {

std::string always(const subject&) { return {}; }
void as_generated(attn_case&, const subject&) {}

std::vector<law> make_laws() {
  using namespace laws;
  std::vector<law> v;
  v.push_back({"differential.output_within_bound_of_oracle",
               "every O and LSE element within the SPEC bound of the high-precision oracle", always, as_generated,
               output_within_bound,
               // min_judged: every element unbounded (scores that may overflow) is rare: 100% judged on builtin, naive, tiny tiles, example at 1000 cases.
               0.9});
  v.push_back({"softmax.weights_form_a_distribution",
               "with V = identity rows are the weights: each within the bound of the oracle's P, >= 0, masked exactly 0, summing to 1; V = ones gives 1", always,
               prepare_distribution, weights_form_a_distribution,
               // min_judged: 89-96% judged: cases whose every row is outside the bound's domain (scale 1e20) or sees no key.
               0.75});
  v.push_back({"causal.future_keys_never_change_past_outputs",
               "NaN or huge values in any input a row cannot see (several future keys, through the cache too) leave that row's O and LSE bit for bit", always, prepare_causal,
               invisible_inputs_never_change_outputs,
               // min_judged: 91-96% judged: prepare pads Lq = 1 cases; the rest see every key (a mask that allows all).
               0.75});
  v.push_back({"gqa.matches_mha_on_repeated_kv",
               "GQA equals MHA on K/V repeated in place; perturbing KV head g changes exactly heads h with h / G == g",
               always, prepare_gqa, gqa_matches_repeated_kv,
               // min_judged: 65-72% judged: prepare keeps Hkv = 1 (MQA) in half the cases, where no other KV head exists.
               0.4});
  v.push_back({"cache.chunked_decode_equals_prefill",
               "a prefill, chunks up to the whole sequence and single tokens through the cache (sequences advancing unevenly, shuffled pages) equal the one-shot call and the oracle",
               [](const subject& s) -> std::string {
                 if (!s.has(ATTNCHECK_FEATURE_CACHE)) return "subject has no cache";
                 if (!s.has(ATTNCHECK_FEATURE_CAUSAL)) return "subject has no causal mask";
                 return {};
               },
               prepare_cache, chunked_cache_equals_prefill,
               // min_judged: 100% judged on builtin and naive.
               0.9});
  v.push_back({"scale.power_of_two_scalings_are_exact",
               "Q or K * 2^a with scale * 2^-a gives the same bits; V * 2^a gives O * 2^a exactly and LSE unchanged; V * 3 gives 3 O within the bounds; another scale moves O", always, as_generated,
               power_of_two_scalings_are_exact,
               // min_judged: 86-87% judged on naive and builtin at 1000 cases (seeds 1, 2). Q/K exactness is judged row by
               // row, only where a row sees a key and its q k, q scale and k scale products stay within 2^+-100 of 1;
               // far_below, far_above and underflow_gaps values, scales 1e-30 and 1e20 and fully masked cases leave no such row.
               0.7});
  v.push_back({"shift.constant_score_offset_changes_nothing",
               "adding a constant (up to 1e4 in score units) to every score of a row (an extra head dimension) leaves O within the bound", always,
               as_generated, constant_score_shift_changes_nothing,
               // min_judged: 99.8-100% judged.
               0.9});
  v.push_back({"permutation.keys_queries_batch_heads_commute",
               "permuting keys with values leaves O within the bound; permuting queries, batch or heads permutes O",
               always, prepare_permutation, permutations_commute,
               // min_judged: 98% judged: a single key, query, batch element and KV head is rare after prepare.
               0.85});
  v.push_back({"independence.batch_elements_do_not_interact",
               "a batch element computed alone equals it inside the batch", always, prepare_batch,
               batch_elements_are_independent,
               // min_judged: 100% judged: prepare makes B >= 2.
               0.9});
  v.push_back({"independence.masked_slots_are_ignored",
               "NaN or +-1e30 in every slot no visible pair uses leaves O and LSE bit for bit", always, prepare_masked_slots,
               masked_slots_are_ignored,
               // min_judged: 94-96% judged: prepare pads cases without masks; masked cases may still use every slot.
               0.8});
  v.push_back({"independence.padding_equals_truncation", "a sequence padded to Lk equals it truncated to its length",
               [](const subject& s) -> std::string { return s.has(ATTNCHECK_FEATURE_PADDING) ? "" : "subject has no key padding"; },
               prepare_padding, padding_equals_truncation,
               // min_judged: 99.8-100% judged: prepare pads one sequence to 1 <= n < Lk.
               0.9});
  v.push_back({"hull.output_within_visible_values",
               "O within [min V, max V] over visible keys; one visible key gives V exactly; equal keys give mean(V)", always,
               as_generated, output_in_convex_hull,
               // min_judged: 88-96% judged: all-unbounded cases (scores that may overflow).
               0.75});
  v.push_back({"masked.fully_masked_rows_are_zero", "rows that see no key give O = 0 and LSE = -inf, never NaN",
               [](const subject& s) -> std::string {
                 return s.has(ATTNCHECK_FEATURE_PADDING) || s.has(ATTNCHECK_FEATURE_CAUSAL) || s.has(ATTNCHECK_FEATURE_MASK)
                            ? ""
                            : "subject takes no mask";
               },
               prepare_fully_masked, fully_masked_rows_are_zero,
               // min_judged: 100% judged: prepare empties a sequence (or a causal prefix).
               0.9});
  v.push_back({"extreme.large_logits_within_bound",
               "logits near the type's limits or one dominant key: no overflow, O within the bound", always, prepare_extreme,
               extreme_logits_stay_within_bound,
               // min_judged: 100% judged.
               0.9});
  v.push_back({"determinism.same_bits_every_run_thread_count_layout",
               "repeated calls, thread counts 1/2/3/8, strided layouts, strided LSE, expanded masks and fewer query rows give identical bits (as claimed)",
               [](const subject& s) -> std::string {
                 return s.claims(ATTNCHECK_CLAIM_DETERMINISTIC) || s.claims(ATTNCHECK_CLAIM_THREADS) || s.claims(ATTNCHECK_CLAIM_LAYOUT) ||
                            s.claims(ATTNCHECK_CLAIM_LQ)
                            ? ""
                            : "subject claims no determinism";
               },
               prepare_determinism, runs_are_deterministic,
               // min_judged: 100% judged.
               0.9});
  v.push_back({"lse.split_keys_merge_by_lse", "two halves of the keys merged by their LSE equal the whole",
               [](const subject& s) -> std::string { return s.has_lse() ? "" : "subject has no LSE"; }, prepare_split,
               lse_merges_split_keys,
               // min_judged: 99.6% judged.
               0.9});
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

}  // namespace attncheck
