#!/usr/bin/env python3
"""Writes the seeds of fuzz/corpus/fuzz_backward/ (docs/fuzz.md, "fuzz_backward").
Each seed is encoded choice by choice as the harness reads it (from the end of
the input, as FuzzedDataProvider and byte_choices do: the first choice's bytes
last, each choice's most significant byte last):
  b1-*  version 1: the dO recipe, then decode_header's choices (dtype, Lk, Lq,
        D, Dv, B, Hkv, G, causal, padding, mask, scale, layout, values, poison,
        seed), then decode_values' (mask bits, dense runs, patches);
  b3-*  version 3: the dO recipe, the budget, then the case space's choices
        (header_choices, the pad cuts, the seed), as fuzz/make_v4_seeds.py;
  b4-*  version 4: the same, then the contract 1.1 variant choices
        (variant_choices), judged by backward.variant_gradients_within_bound_of_oracle
        on a subject whose backward takes variants.
The ranges mirror decode_header (fuzz/fuzz_support.cpp), fuzz_backward.cpp's
v1 caps and header_choices (properties/laws/include/attncheck/case_space.hpp)
for a subject that takes f32, f16 and bf16, causal, padding and masks (the
bundled kernel). What each seed decodes to is in tests/fuzz/decoded_cases.txt.
Usage: fuzz/make_backward_seeds.py   (from the repository root; rewrites fuzz/corpus/fuzz_backward/b*)"""
import os
import random

from make_v4_seeds import MAGIC as MAGIC4, encode, space_records, variant_records

MAGIC3 = bytes([0xA7, ord("A"), ord("C"), 0x03])
GRADS = {"dyadic": 0, "normal": 1, "adversarial": 2}
TYPES = {"f32": 0, "f16": 1, "bf16": 2}
# fuzz_backward.cpp v1_caps
CAPS = {"batch": 3, "kv_heads": 3, "group": 3, "q_len": 5, "k_len": 13, "head_dim": 9, "work": 3000}
# value_kind's first 8 (version 1 draws those), layout_kind, poison_kind
VALUES = ["dyadic", "normal", "uniform", "large_logits", "dominant", "equal_keys", "huge_v", "tiny_v"]
LAYOUTS = ["bshd", "bhsd", "padded"]
POISONS = ["none", "nan", "big"]
QUIET_NAN = 17 + 9  # interesting_bits: the pick of a quiet NaN
PLUS_INF = 17 + 7


def clamp(x, lo, hi):
    return max(lo, min(x, hi))


def v1_seed(grad, type, lk, lq, d, dv, b, hkv, g, causal=False, key_len=None, mask=None, layout="bshd",
            values="normal", poison="none", seed=1, patches=()):
    """patches: (tensor 0..2 = Q, K, V; element; interesting_bits pick)."""
    r = [(0, 2, GRADS[grad]), (0, 2, TYPES[type]), (1, CAPS["k_len"], lk), (1, CAPS["q_len"], lq),
         (1, CAPS["head_dim"], d), (1, CAPS["head_dim"], dv)]
    rows = max(1, CAPS["work"] // (lq * lk * (d + dv + 8)))
    r.append((1, clamp(rows, 1, CAPS["batch"]), b))
    r.append((1, clamp(rows // b, 1, CAPS["kv_heads"]), hkv))
    r.append((1, clamp(rows // (b * hkv), 1, CAPS["group"]), g))
    r.append((0, 255, int(causal)))
    r.append((0, 255, int(key_len is not None)))
    for n in key_len or []:
        r.append((0, lk, n))
    r.append((0, 255, int(mask is not None)))
    for dim in mask or []:
        r.append((0, 255, dim))
    r.append((0, 3, 0))  # the default scale 1/sqrt(D)
    r += [(0, 2, LAYOUTS.index(layout)), (0, 7, VALUES.index(values)), (0, 2, POISONS.index(poison)),
          (0, (1 << 64) - 1, seed)]
    # decode_values: keep the drawn mask, no dense runs, then the patches.
    if mask is not None:
        r.append((0, 255, 0))
    r.append((0, 255, 0))
    hq = hkv * g
    sizes = [b * lq * hq * d, b * lk * hkv * d, b * lk * hkv * dv]
    for t, e, pick in patches:
        r += [(0, 2, t), (0, sizes[t] - 1, e), (0, 3, 0), (0, 255, pick)]
    return encode(r)


# The case space's choices (header_choices, the pad cuts, the seed) and the
# variant choices are fuzz/make_v4_seeds.py's, after the dO recipe and the budget.
def v3_seed(rnd, grad, budget, fixed):
    r = [(0, 2, GRADS[grad]), (0, 255, budget)] + space_records(rnd, fixed)
    values = bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 8, 32])))
    return MAGIC3 + values + encode(r)


def v4_seed(rnd, grad, budget, fixed, variant):
    r = [(0, 2, GRADS[grad]), (0, 255, budget)] + space_records(rnd, fixed) + variant_records(variant)
    values = bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 8, 32])))
    return MAGIC4 + values + encode(r)


V1_SEEDS = {
    # MHA, no mask, every dtype and recipe once at least
    "b1-00-mha-f32-dyadic": dict(grad="dyadic", type="f32", lk=7, lq=5, d=4, dv=4, b=1, hkv=2, g=1, values="dyadic"),
    "b1-01-gqa-f16-normal": dict(grad="normal", type="f16", lk=7, lq=3, d=5, dv=3, b=1, hkv=2, g=3, values="normal"),
    "b1-02-gqa-bf16-adversarial": dict(grad="adversarial", type="bf16", lk=5, lq=4, d=4, dv=4, b=1, hkv=3, g=2,
                                       values="uniform"),
    # causal with Lq < Lk (bottom-right alignment), Lq = Lk, and across tile tails
    "b1-03-causal-f32-normal": dict(grad="normal", type="f32", lk=13, lq=5, d=9, dv=9, b=1, hkv=1, g=1, causal=True),
    "b1-04-causal-gqa-bf16-dyadic": dict(grad="dyadic", type="bf16", lk=4, lq=4, d=8, dv=8, b=2, hkv=1, g=3,
                                         causal=True, values="dyadic", layout="bhsd"),
    # key padding (a sequence with no key among them) and causal with padding
    "b1-05-padding-f16-adversarial": dict(grad="adversarial", type="f16", lk=7, lq=3, d=4, dv=6, b=3, hkv=1, g=2,
                                          key_len=[7, 0, 4], layout="padded"),
    "b1-06-padding-causal-f32-dyadic": dict(grad="dyadic", type="f32", lk=6, lq=4, d=3, dv=3, b=2, hkv=2, g=2,
                                            causal=True, key_len=[5, 2], values="dominant"),
    # boolean masks: full and broadcast shapes, with padding and poison in the hidden slots
    "b1-07-mask-full-bf16-normal": dict(grad="normal", type="bf16", lk=5, lq=5, d=4, dv=4, b=2, hkv=1, g=2,
                                        mask=[1, 1, 1, 1], poison="nan"),
    "b1-08-mask-broadcast-f32-adversarial": dict(grad="adversarial", type="f32", lk=6, lq=3, d=6, dv=2, b=2,
                                                 hkv=2, g=1, mask=[0, 1, 1, 1], key_len=[6, 3], poison="big",
                                                 values="equal_keys"),
    "b1-09-mask-causal-f16-dyadic": dict(grad="dyadic", type="f16", lk=9, lq=5, d=2, dv=5, b=1, hkv=1, g=3,
                                         causal=True, mask=[0, 0, 1, 1], values="large_logits"),
    # specials: a NaN in Q (its row's dQ and the dK, dV it feeds have no bound) and +inf in V
    "b1-10-nan-q-f32-normal": dict(grad="normal", type="f32", lk=5, lq=3, d=4, dv=4, b=1, hkv=1, g=2,
                                   patches=[(0, 0, QUIET_NAN)]),
    "b1-11-inf-v-bf16-dyadic": dict(grad="dyadic", type="bf16", lk=4, lq=2, d=3, dv=3, b=1, hkv=1, g=1,
                                    values="huge_v", patches=[(2, 4, PLUS_INF)]),
}

# Version 3: the gate's case space (every value kind, the head-size list, the
# subject's hints), the flags chosen, the shapes random; budget 0 (cap / 100:
# the law's 3000) and 250 (cap / 10, cut to 3000 by the law's prepare).
V3_SEEDS = [
    ("b3-00", "dyadic", 0, {"type": 0, "causal": 1, "padding": 0, "mask": 0}),
    ("b3-01", "normal", 0, {"type": 1, "causal": 0, "padding": 1, "mask": 1, "mask_dims": 15}),
    ("b3-02", "adversarial", 0, {"type": 2, "causal": 1, "padding": 1, "mask": 2, "mask_dims": 6}),
    ("b3-03", "normal", 250, {"type": 0, "causal": 0, "padding": 0, "mask": 0}),
    ("b3-04", "adversarial", 250, {"type": 1, "causal": 1, "padding": 1, "mask": 0}),
    ("b3-05", "dyadic", 0, {"type": 2, "causal": 0, "padding": 0, "mask": 1, "mask_dims": 3}),
]

# Version 4: each variant alone once, and two with several; budget 0 (the law's 3000).
V4_SEEDS = [
    ("b4-00-window", "normal", {"type": 0, "causal": 1}, {"window": 3, "window_left": 2, "window_right": 1}),
    ("b4-01-chunk", "dyadic", {"type": 1}, {"chunk": 3, "chunk_size": 3}),
    ("b4-02-softcap", "adversarial", {"type": 0}, {"softcap": 1}),
    ("b4-03-sinks", "normal", {"type": 2}, {"sinks": 4}),
    ("b4-04-alibi", "dyadic", {"type": 0, "causal": 1}, {"alibi": 1}),
    ("b4-05-bias", "normal", {"type": 1}, {"bias": 2, "bias_dims": 12, "bias_type": 1}),
    ("b4-06-several", "adversarial", {"type": 0, "padding": 1},
     {"window": 3, "window_left": 4, "window_right": 4, "softcap": 3, "sinks": 2, "alibi": 2}),
    ("b4-07-several", "normal", {"type": 2, "mask": 1, "mask_dims": 15},
     {"chunk": 3, "chunk_size": 5, "bias": 1, "bias_dims": 5, "softcap": 7, "sinks": 1}),
]

if __name__ == "__main__":
    folder = os.path.join("fuzz", "corpus", "fuzz_backward")
    os.makedirs(folder, exist_ok=True)
    for name, spec in V1_SEEDS.items():
        try:
            data = v1_seed(**spec)
        except AssertionError as e:
            raise SystemExit("%s: a choice out of its range (lo, hi, value): %s" % (name, e))
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    rnd = random.Random(26)
    for name, grad, budget, fixed in V3_SEEDS:
        with open(os.path.join(folder, name), "wb") as f:
            f.write(v3_seed(rnd, grad, budget, fixed))
    rnd = random.Random(40)
    for name, grad, fixed, variant in V4_SEEDS:
        with open(os.path.join(folder, name), "wb") as f:
            f.write(v4_seed(rnd, grad, 0, fixed, variant))
