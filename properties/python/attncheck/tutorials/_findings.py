"""What each tutorial module gets wrong, where the seed prints it, and which
kind of finding it is (docs/tutorials.md, "The findings").

Kinds:
  seed       a defect of the seed's code in its own use: counted in the
             module's verdict;
  interface  a shape or argument the seed's API cannot take (no scale, one
             head width, one input x): never a defect; the layer mode skips
             such cases with the reason, the kernel gate (which has no way to
             refuse a case) fails the `only_` variant, and that failure is not
             counted;
  contract   a requirement of this project beyond the seed's use (NaN in a
             masked slot skipped, a row with no visible key exactly 0): shown,
             not counted;
  caller     this project's own adapter code standing in for a caller the
             seed does not print: not counted.

Each entry: (item, kind, "file:line", how it is caught). How: ("kernel", bug
or variant[, law]) reads the gate run of `only_<bug>` (or of the variant
named: `pair_<bug>`, `tutorial_bf16`) and names that law; ("layer", variant, law) the layer mode's
run of `layer_<variant>`; ("none", why) says why no law reaches it.
"""
S000, S002, S003, S004 = ("000_e41d98dc2c856e1e.txt", "002_a08601b61fdd35e6.txt", "003_4f85a3ef761c20b4.txt",
                          "004_aaf55d68f2fac64f.txt")
MASKED_KEYS = "contract"


def _seed000(fc_q, scores, add, matmul):
    """The findings seed 000's MHA and MQA share, at their own lines: the test
    script's mask (000:323-324), fc_q's width, the additive mask, the scale."""
    return [
        ("top_left_mask", "seed", f"{S000}:323-324", ("kernel", "top_left_mask")),
        ("fc_q_width", "seed", f"{S000}:{fc_q}", ("layer", "only_fc_q_width", "layer.output_within_bound_of_oracle")),
        ("nan_rows", "contract", f"{S000}:{add}-{add + 1}",
         ("kernel", "pair_nan_rows", "masked.fully_masked_rows_are_zero")),
        ("masked_keys_weighted", MASKED_KEYS, f"{S000}:{matmul}", ("kernel", "masked_keys_weighted")),
        ("own_scale", "interface", f"{S000}:{scores}", ("kernel", "own_scale")),
        ("float32 mask added to bf16 scores: the sum is float32 and matmul with bf16 V raises", "seed",
         f"{S000}:{add},323", ("kernel", "pair_mask_dtype_bf16")),
    ]

FINDINGS = {
    "self_attention": [
        ("own_scale", "interface", f"{S002}:48", ("kernel", "own_scale")),
        ("square_causal", "interface", f"{S002}:52", ("kernel", "square_causal")),
        ("nan_rows", "contract", f"{S002}:53-55", ("kernel", "pair_nan_rows", "masked.fully_masked_rows_are_zero")),
        ("masked_keys_weighted", MASKED_KEYS, f"{S002}:56", ("kernel", "masked_keys_weighted")),
        ("tab in the causal branch, seq_len read from a global", "seed", f"{S002}:51-52",
         ("none", "Python refuses the class (IndentationError: unindent does not match any outer indentation "
                  "level) and seq_len is a global of the test script; the mirror "
                  "indents the branch and takes L from x, the closest code that runs")),
    ],
    "mha_model_width": [
        ("scale", "seed", f"{S002}:229", ("kernel", "scale")),
        ("scale (whole module)", "seed", f"{S002}:229", ("layer", "tutorial", "layer.output_within_bound_of_oracle")),
        ("square_causal", "interface", f"{S002}:245", ("kernel", "square_causal")),
        ("nan_rows", "contract", f"{S002}:246-247", ("kernel", "pair_nan_rows", "masked.fully_masked_rows_are_zero")),
        ("square_seq", "interface", f"{S002}:239-240", ("kernel", "square_seq")),
        ("one_head_dim", "interface", f"{S002}:240", ("kernel", "one_head_dim")),
        ("masked_keys_weighted", MASKED_KEYS, f"{S002}:249", ("kernel", "masked_keys_weighted")),
        ("test script: create_mask undefined, a mask tensor passed as iscausal", "seed", f"{S002}:262-266",
         ("none", "the script stops with NameError at create_mask before the module runs; were a mask returned, "
                  "`if iscausal:` on a tensor of more than one element raises")),
    ],
    "gqa_float_heads": [
        ("float_heads", "seed", f"{S002}:288-289", ("kernel", "float_heads")),
        ("contiguous_call", "seed", f"{S002}:332", ("kernel", "contiguous_call")),
        ("dropout_train", "seed", f"{S002}:296,328,335",
         ("layer", "only_dropout_train", "layer.deterministic_as_built")),
        ("own_scale", "interface", f"{S002}:290,321", ("kernel", "own_scale")),
        ("square_causal", "interface", f"{S002}:323", ("kernel", "square_causal")),
        ("nan_rows", "contract", f"{S002}:324-327", ("kernel", "pair_nan_rows", "masked.fully_masked_rows_are_zero")),
        ("square_seq", "interface", f"{S002}:308,316", ("kernel", "square_seq")),
        ("one_head_dim", "interface", f"{S002}:316", ("kernel", "one_head_dim")),
        ("masked_keys_weighted", MASKED_KEYS, f"{S002}:330", ("kernel", "masked_keys_weighted")),
    ],
    "mqa": _seed000(fc_q=261, scores=292, add=294, matmul=299) + [
        ("one_kv_head", "interface", f"{S000}:263-264", ("kernel", "one_kv_head")),
    ],
    "cached_mha": [
        ("unshifted_causal", "caller", "-", ("kernel", "unshifted_causal")),
        ("finfo_min", "contract", f"{S003}:21", ("kernel", "pair_finfo_min", "masked.fully_masked_rows_are_zero")),
        ("masked_keys_weighted", MASKED_KEYS, f"{S003}:24", ("kernel", "masked_keys_weighted")),
        ("own_scale", "interface", f"{S003}:17", ("kernel", "own_scale")),
        ("one_head_dim", "interface", f"{S003}:51", ("kernel", "one_head_dim")),
    ],
    "cross_attention": _seed000(fc_q=195, scores=229, add=233, matmul=238),
    "seed004_mha": [
        ("kv_from_query (walk-through)", "seed", f"{S004}:22-24", ("kernel", "kv_from_query")),
        ("kv_from_query (whole module)", "seed", f"{S004}:22-24",
         ("layer", "only_kv_from_query", "layer.output_within_bound_of_oracle")),
        ("batch_from_query", "seed", f"{S004}:326,335-336",
         ("layer", "only_batch_from_query", "layer.broadcast_context_matches_each_batch")),
        ("mask == 0 met by an additive 0/-inf mask", "seed", f"{S004}:84,339",
         ("layer", "additive_caller", "layer.masked_keys_ignored")),
        ("fill_1e9: a row with no visible key gets mean(V)", "contract", f"{S004}:339",
         ("kernel", "pair_fill_1e9", "masked.fully_masked_rows_are_zero")),
        ("fill_1e9 (whole module): out = w_o(mean V) for a row with no key", "contract", f"{S004}:339",
         ("layer", "only_fill_1e9", "layer.rows_with_no_key_give_the_bias")),
        ("fill_1e9: a visible key scoring below -1e9 loses to masked ones", "seed", f"{S004}:339",
         ("none", "needs scores below -1e9; the gate's extreme law reaches logits near the f32 exp range, "
                  "not 1e9: only_fill_1e9 passes every law, extreme.large_logits_within_bound included")),
        ("fill_1e9: masked_fill(-1e9) overflows in fp16", "seed", f"{S004}:339",
         ("none", "torch 1.13 on the CPU has no fp16 matmul (\"bmm\" not implemented for 'Half'), so no fp16 "
                  "run gets as far as the fill; masked_fill(-1e9) on a Half tensor raises 'value cannot be "
                  "converted to type at::Half without overflow' in the same torch")),
        ("masked_keys_weighted", MASKED_KEYS, f"{S004}:342", ("kernel", "masked_keys_weighted")),
        ("x_context documented optional, no default", "seed", f"{S004}:315,321",
         ("none", "a TypeError at the call mha(x) the docstring allows; not an arithmetic property, no law")),
        ("own scale, one head width, one K/V head per head", "interface", f"{S004}:79,309-313",
         ("none", "adapted exactly in the kernel subjects (caller's scale, zero-padded widths, repeated K/V "
                  "heads); skipped with the reason in the layer mode")),
    ],
}

# The seed lines of each module as a whole (tutorial, corrected, bf16 rows).
MODULE_SEED = {
    "self_attention": f"{S002}:27-58", "mha_model_width": f"{S002}:215-270", "gqa_float_heads": f"{S002}:280-337",
    "mqa": f"{S000}:253-300", "cached_mha": f"{S003}:10-95", "cross_attention": f"{S000}:185-250",
    "seed004_mha": f"{S004}:284-347",
}


def cite(module, variant):
    """The seed line a table row of `variant` (kernel `only_x`, `pair_x`, or
    layer `layer_only_x`, ...) stands for: its finding's, else the module's."""
    bare = variant[len("layer_"):] if variant.startswith("layer_") else variant
    for _, _, where, how in FINDINGS[module]:
        names = {how[1], "only_" + how[1], how[1].replace("pair_", "only_", 1)}
        if how[0] == "layer" and variant.startswith("layer_") and bare in names:
            return where
        if how[0] == "kernel" and not variant.startswith("layer_") and bare in names:
            return where
    if bare == "walkthrough":
        return f"{S004}:22-24"
    return MODULE_SEED[module]
