"""Tutorial: multi-query attention (the MQA module of the MHA/MQA hand-coding
tutorial; docs/tutorials.md).

As written, the module (and the causal mask of its test script)
  top_left_mask  the test's mask triu(full((B, n_q, n_k), -inf), 1) lets query
                 i see keys 0..i: top-left, wrong whenever n_q != n_k (the
                 tutorial's own example has n_q = 2, n_k = 4);
  nan_rows       adds -inf and takes the softmax: a row that sees no key is
                 NaN, where the contract says 0;
  masked_keys_weighted
                 adds the mask to the scores (a NaN score stays NaN under
                 -inf) and multiplies each masked key's zero weight by its
                 value: NaN in a masked slot reaches O;
  own_scale      divides by sqrt(d_k) (the right default) and takes no scale
                 from the caller;
  one_kv_head    repeats a single K/V head: exactly one KV head.
"""
import sys

from ._adapt import SEED000, seed000_attend, seed000_layers, variants
from .cross_attention import MHA

BUGS = ("top_left_mask", "nan_rows", "masked_keys_weighted", "own_scale", "one_kv_head")


class MQA(MHA):
    """The tutorial's MQA (000:253-300) mirrored as its MHA (000:185-250,
    cross_attention.MHA) with one K/V head: fc_k and fc_v project to a single
    head, which every query head reads; the scores, the mask and the output
    are the MHA's (000:292, 294, 299 as 000:229, 233, 238), bugs included."""

    def __init__(self, num_head, dimension_k, dimension_v, d_k, d_v, d_o, fixed=frozenset(), dimension_q=None):
        super().__init__(num_head, dimension_k, dimension_v, d_k, d_v, d_o, fixed, dimension_q, kv_heads=1)

    def _heads_of_kv(self, x, batch, n, width):
        if "one_kv_head" not in self.fixed:
            return x.repeat(self.num_head, 1, 1)
        # Any number of KV heads: head h reads KV head h // (heads / kv heads),
        # laid out as q is, (head, batch) flattened.
        kv = x.view(batch, n, -1, width)
        group = self.num_head // kv.shape[2]
        return kv.repeat_interleave(group, dim=2).permute(2, 0, 1, 3).reshape(-1, n, width)


# The kernel subjects: K/V heads as the case has them (the module repeats them).
globals().update(variants(sys.modules[__name__], seed000_attend(MQA, repeat_heads=False), BUGS, **SEED000))


# ---- The layer mode (attncheck.layer): _adapt.seed000_layers, fc_q_width a
# switch of the module (fixed: fc_q takes dimension_q).
globals().update(seed000_layers(MQA, "mqa", lambda case: "exactly one K/V head (000:263-264)" if case.kv_heads != 1 else None))
