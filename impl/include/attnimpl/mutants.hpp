// Every deliberate bug of the bundled kernel, in one list (mutation testing,
// docs/mutation.md): the kernel's mutation points (impl/src/mutation.hpp),
// the mutant plugin and `attncheck mutation` all read it.
//
// X(name, expected laws, smallest shape): the expected laws are the ones that
// name the broken behaviour (short names as in docs/mutation.md's tables;
// any of them must kill the mutant on every seed), the differential law alone
// only where no more specific law applies; the shape is the smallest one the
// bug class is expected to show on (T: k_tile, S: split_keys). The bug
// classes of docs/mutation.md come first, in their order, then neighbours of
// them in this kernel's structure.
#pragma once

#define ATTNIMPL_MUTANTS(X)                                                              \
  X(scale_model_dim, "differential scale", "Hq=2, Lk=2")                                 \
  X(scale_dropped, "scale", "Lk=2")                                                      \
  X(softmax_wrong_axis, "softmax", "Lq=Lk=2")                                            \
  X(no_max_shift, "extreme", "Lk=1")                                                     \
  X(rescale_inverted, "differential", "Lk=3")                                            \
  X(rescale_skipped, "differential", "Lk=3")                                             \
  X(masked_row_nan, "fully_masked", "Lq=Lk=1")                                           \
  X(masked_row_mean, "fully_masked", "Lq=Lk=1")                                          \
  X(causal_top_left, "cache", "Lq=1, Lk=2")                                              \
  X(causal_no_diagonal, "differential hull", "Lq=Lk=1")                                  \
  X(causal_dropped_chunk, "causal", "Lq=2, Lk=3")                                        \
  X(mask_polarity, "masked_slots differential", "Lk=2")                                  \
  X(masked_value_leak, "masked_slots", "Lk=2")                                           \
  X(padding_off_by_one, "padding masked_slots", "Lk=2")                                  \
  X(gqa_modulo, "gqa", "Hq=6, Hkv=2")                                                    \
  X(gqa_wrong_divisor, "gqa", "Hq=6, Hkv=2")                                             \
  X(tail_tile_unmasked, "differential", "Lk=T+1")                                        \
  X(head_dim_tail, "differential", "D=3")                                                \
  X(dv_equals_d, "differential", "D=2, Dv=3")                                            \
  X(v_uses_k_strides, "determinism", "H=2, L=2")                                         \
  X(cache_append_offset, "cache", "Lk=2")                                                \
  X(decode_position, "cache", "Lk=2")                                                    \
  X(low_precision_acc, "differential", "Lk=70")                                          \
  X(thread_order, "determinism", "2 blocks")                                             \
  X(lse_missing_max, "lse", "Lk=1")                                                      \
  /* Ours: neighbours of the rows above in this kernel's structure. */                   \
  X(rescale_sum_skipped, "differential", "Lk=3")                                         \
  X(merge_unscaled, "differential lse", "Lk=T*S+1")                                      \
  X(merge_min_not_max, "extreme", "Lk=S+1")                                              \
  X(split_boundary_key_dropped, "differential hull", "Lk=S")                             \
  X(kpack_counts_visible, "differential", "Lk=2 (mask hole)")                            \
  X(prefix_ignores_holes, "masked_slots", "Lk=2 (mask hole)")                            \
  X(f16_round_to_zero, "differential", "Lk=2 (f16)")                                     \
  X(bf16_truncate, "differential", "Lk=2 (bf16)")                                        \
  X(exp_reduction_lo_dropped, "differential", "Lk=2")                                    \
  X(exp_poly_low_degree, "differential", "Lk=2")                                         \
  X(cache_identity_page_table, "cache", "Lk=2 (shuffled pages)")                         \
  X(cache_head_stride, "cache", "Hkv=2, Lk=2")                                           \
  X(load_ignores_stride, "determinism", "D=2 (strided)")                                 \
  X(query_tail_tile_dropped, "differential", "Lq=3")                                     \
  X(empty_row_lse_zero, "fully_masked", "Lq=Lk=1")                                       \
  X(causal_unit_stops_at_first_row, "differential", "Lq=2, Lk=2")                        \
  X(mask_head_uses_kv_head, "differential", "Hq=2, Hkv=1")                               \
  X(padding_uses_first_length, "batch padding", "B=2")                                   \
  /* Contract 1.1 variants (docs/mutation.md, "Variants"). */                            \
  X(window_ignored, "differential window window_plain", "Lq=1, Lk=2, left=0")            \
  X(window_right_dropped, "differential window", "Lq=Lk=2, right=0")                     \
  X(window_left_off_by_one, "differential window", "Lq=1, Lk=2, left=0")                 \
  X(window_right_off_by_one, "differential window", "Lq=Lk=2, right=0")                  \
  X(chunk_ignored, "differential window", "Lq=1, Lk=2, C=1")                             \
  X(chunk_off_by_one, "differential window", "Lq=Lk=1, C=1")                             \
  X(softcap_ignored, "differential softcap", "Lk=1, softcap (LSE)")                      \
  X(softcap_after_bias, "differential softcap softcap_far", "Lk=1, softcap + bias")      \
  X(sinks_ignored, "differential sinks", "Lk=1, sinks")                                  \
  X(sinks_decode_only, "differential sinks", "Lq=2, Lk=1, sinks")                        \
  X(sink_counted_per_split, "differential lse sinks sink_shift", "Lk=S+1, sinks")        \
  X(alibi_ignored, "differential alibi", "Lk=2, ALiBi")                                  \
  X(alibi_wrong_head, "differential alibi", "Hq=2, Lk=2, ALiBi")                         \
  X(bias_ignored, "differential bias_mask bias_row", "Lk=1, bias (LSE)")                 \
  X(bias_broadcast_wrong, "differential bias_broadcast", "Hq=2, Hkv=1, Lk=1, bias")      \
  /* Paged K/V and ragged batches (contract 1.2). */                                     \
  X(paged_table_tail_read, "page_table paged", "Lk=P, spare entry")                      \
  X(paged_last_page_past_n, "paged page_table", "Lk=P+1")                                \
  X(paged_wrong_page_size, "paged", "Lk=P+1, P=3")                                       \
  X(paged_decode_first_slot, "paged cache", "Lq=1, Lk=P+1")                              \
  X(paged_page_stride_from_slots, "paged", "Lk=P+1, padded or head-major pages")         \
  X(ragged_key_offset_first, "ragged", "B=2")                                            \
  X(ragged_empty_writes_neighbour, "ragged", "B=2, qlen=[1,0]")                          \
  X(ragged_causal_total, "ragged", "B=2, causal")                                        \
  X(key_index_wraps_32768, "differential", "Lq=1, Lk>2^15, late dominant key")           \
  X(key_index_wraps_65536, "differential", "Lq=1, Lk>2^16, late dominant key")           \
  X(paged_page_index_16_bits, "paged", "Lq=1, over 2^16 pages of 1..3 keys")             \
  /* The backward pass (docs/mutation.md, "Backward"). */                                \
  X(backward_dq_scale_dropped, "backward_gradients", "Lk=2")                             \
  X(backward_d_from_do_squared, "backward_gradients backward_key", "Lk=1")               \
  X(backward_p_unscaled, "backward_gradients backward_value", "Lk=1")                    \
  X(backward_lse_previous_row, "backward_gradients backward_value", "Lq=2, Lk=1")        \
  X(backward_causal_ignored, "backward_gradients backward_masked", "Lq=2, Lk=1, causal") \
  X(backward_causal_top_left, "backward_gradients backward_value", "Lq=2, Lk=1, causal") \
  X(backward_gqa_last_head_only, "backward_gradients backward_value", "Hq=2, Hkv=1")     \
  X(backward_key_tail_tile_dropped, "backward_gradients backward_value", "Lk=1 (< T)")   \
  X(backward_ds_without_p, "backward_gradients backward_key", "Lk=2")                    \
  X(backward_dq_order_nondeterministic, "backward_same", "Lk=2")                         \
  X(backward_softcap_grad_ignored, "backward_variant", "Lk=2, softcap")                  \
  X(backward_window_ignored, "backward_variant", "Lq=1, Lk=2, left=0")                   \
  X(backward_sink_grad_dropped, "backward_variant", "Lk=1, sinks")                       \
  X(backward_alibi_ignored, "backward_variant", "Lk=2, ALiBi")
