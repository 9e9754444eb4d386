// Mutation points: deliberate bugs, each a one-line alternative next to the
// correct code (`if (ATTNIMPL_MUTANT(id)) ...`), so the verification suite
// can prove it catches them (ci/mutation, docs/mutation.md).
//
// In the production library ATTNIMPL_MUTANT(id) is the constant `false`: the
// alternatives compile away and the code is the same as without them. Only
// the separate target attnimpl_mutation defines ATTNIMPL_MUTATION; there the
// mutant is chosen at run time by name (select(); the mutation plugin sets it
// from its instance's mutant= option at every entry point).
#pragma once

// Every mutant of the kernel, in one list: MUTANTS.md rows first, then ours.
#define ATTNIMPL_MUTANT_LIST(X)                                                       \
  X(scale_model_dim) X(scale_dropped) X(softmax_wrong_axis) X(no_max_shift)           \
  X(rescale_inverted) X(rescale_skipped) X(masked_row_nan) X(masked_row_mean)         \
  X(causal_top_left) X(causal_no_diagonal) X(causal_dropped_chunk) X(mask_polarity)   \
  X(masked_value_leak) X(padding_off_by_one) X(gqa_modulo) X(gqa_wrong_divisor)       \
  X(tail_tile_unmasked) X(head_dim_tail) X(dv_equals_d) X(v_uses_k_strides)           \
  X(cache_append_offset) X(decode_position) X(low_precision_acc) X(thread_order)      \
  X(lse_missing_max)                                                                  \
  X(rescale_sum_skipped) X(merge_unscaled) X(merge_min_not_max) X(split_boundary_key_dropped) \
  X(kpack_counts_visible) X(prefix_ignores_holes) X(f16_round_to_zero) X(bf16_truncate) \
  X(exp_reduction_lo_dropped) X(exp_poly_low_degree) X(cache_identity_page_table)    \
  X(cache_head_stride) X(load_ignores_stride) X(query_tail_tile_dropped)              \
  X(empty_row_lse_zero) X(causal_unit_stops_at_first_row) X(mask_head_uses_kv_head)    \
  X(padding_uses_first_length)

#ifdef ATTNIMPL_MUTATION

namespace attnimpl::mutation {

enum class id : int {
  none = 0,
#define ATTNIMPL_MUTANT_ENUM(name) name,
  ATTNIMPL_MUTANT_LIST(ATTNIMPL_MUTANT_ENUM)
#undef ATTNIMPL_MUTANT_ENUM
};

/// The mutant in effect (id::none until select() says otherwise).
extern id active;

/// Selects a mutant by name ("none" or "" for none); false for an unknown name.
bool select(const char* name);

/// Null-terminated list of every mutant's name, in list order.
const char* const* names();

}  // namespace attnimpl::mutation

#define ATTNIMPL_MUTANT(name) (::attnimpl::mutation::active == ::attnimpl::mutation::id::name)

#else

#define ATTNIMPL_MUTANT(name) false

#endif
