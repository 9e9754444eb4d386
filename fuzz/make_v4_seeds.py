#!/usr/bin/env python3
"""Writes the version 4 seeds of fuzz/corpus/ (docs/fuzz.md, "Input formats"):
the case space's choices encoded as byte_choices reads them (encode_choices'
byte order), with the contract 1.1 variant choices after the header, one seed
per variant and a few with several. The ranges mirror header_choices and
variant_choices (properties/laws/include/attncheck/case_space.hpp); a change
there that is not append-only breaks saved inputs anyway.
Usage: fuzz/make_v4_seeds.py   (from the repository root; rewrites fuzz/corpus/*/v4-*)"""
import os
import random

MAGIC = bytes([0xA7, ord("A"), ord("C"), 0x04])
HEADER = [("regime", 100), ("b", 64), ("hkv", 60), ("group", 60), ("lq", 840), ("lk", 840), ("d", 23 * 16),
          ("dv", 23 * 16), ("lq_mode", 12), ("hint", 64), ("hint_mode", 36), ("jitter", 1 << 13), ("type", 3),
          ("causal", 2), ("padding", 2), ("mask", 3), ("mask_dims", 16), ("values", 16), ("layout", 3),
          ("poison", 3), ("scale", 36)]
PAD_COUNT, PAD_KINDS, SEED_RANGE = 8, 12, 1 << 30
VARIANTS = [("any", 2), ("window", 5), ("window_left", 40), ("window_right", 40), ("chunk", 4), ("chunk_size", 40),
            ("softcap", 8), ("sinks", 6), ("alibi", 4), ("bias", 4), ("bias_dims", 16), ("bias_type", 3)]
N_LAWS, DIFFERENTIAL = 26, 10  # fuzzed_law_names(): its size and the differential law's index


def encode(records):
    """encode_choices: the first choice's bytes last, each most significant byte last."""
    out = bytearray()
    for lo, hi, value in reversed(records):
        rng, x = hi - lo, value - lo
        assert 0 <= x <= rng, (lo, hi, value)
        n = 0
        while n < 8 and (rng >> (8 * n)) > 0:
            n += 1
        out += bytes((x >> (8 * k)) & 0xFF for k in range(n))
    return bytes(out)


def space_records(rnd, fixed=()):
    """The case space's choices after the budget: header_choices (random, but
    small shapes and the subject's hints, the default scale, then `fixed`), the
    pad cuts and the seed."""
    h = {name: rnd.randrange(n) for name, n in HEADER}
    h["regime"] = rnd.randrange(60)  # small shapes and the subject's hints
    h["scale"] = rnd.randrange(27)   # the default scale
    h.update(fixed)
    rec = [(0, n - 1, h[name]) for name, n in HEADER]
    rec += [(0, PAD_KINDS - 1, rnd.randrange(PAD_KINDS)) for _ in range(PAD_COUNT)]
    rec.append((0, SEED_RANGE - 1, rnd.randrange(SEED_RANGE)))
    return rec


def variant_records(variant):
    """variant_choices: `variant` drawn ("any" set), every other variant off."""
    v = {name: 0 for name, _ in VARIANTS}
    v["any"] = 1
    v.update(variant)
    return [(0, n - 1, v[name]) for name, n in VARIANTS]


def seed(rnd, variant, laws):
    rec = []
    if laws:
        rec.append((0, N_LAWS - 1, DIFFERENTIAL))
    else:
        rec.append((0, 1, 0))  # one-shot (variants are drawn for one-shot inputs only)
    rec.append((0, 255, rnd.randrange(224)))  # budget: cap / 100
    rec += space_records(rnd) + variant_records(variant)
    values = bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 8, 32, 96])))
    return MAGIC + values + encode(rec)


SEEDS = [
    {"window": 3, "window_left": 5, "window_right": 2},  # both sides, at a hint
    {"window": 1, "window_left": 1},                      # left only, 1 key
    {"window": 4, "window_left": 20},                     # (left, 0)
    {"chunk": 3, "chunk_size": 6},
    {"chunk": 3, "chunk_size": 2},
    {"softcap": 1},
    {"softcap": 5},
    {"sinks": 1},
    {"sinks": 4},
    {"alibi": 1},
    {"alibi": 3},
    {"bias": 1, "bias_dims": 15, "bias_type": 0},
    {"bias": 2, "bias_dims": 12, "bias_type": 1},
    {"bias": 3, "bias_dims": 8, "bias_type": 2},
    {"window": 3, "window_left": 4, "window_right": 4, "softcap": 3, "sinks": 2, "alibi": 2},
    {"chunk": 3, "chunk_size": 5, "bias": 1, "bias_dims": 5, "softcap": 7},
    {"window": 2, "window_right": 3, "chunk": 3, "chunk_size": 7, "sinks": 3, "alibi": 1, "bias": 2,
     "bias_dims": 15, "bias_type": 1, "softcap": 2},
]

if __name__ == "__main__":
    for harness, laws in (("fuzz_differential", False), ("fuzz_laws", True)):
        rnd = random.Random(4 if not laws else 44)
        folder = os.path.join("fuzz", "corpus", harness)
        for i, v in enumerate(SEEDS):
            with open(os.path.join(folder, "v4-%02d" % i), "wb") as f:
                f.write(seed(rnd, v, laws))
