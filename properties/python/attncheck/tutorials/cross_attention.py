"""Tutorial: cross-attention MHA with its own query, key and value widths (the
MHA module of the MHA/MQA hand-coding tutorial, dimension_q/k/v and
d_k/d_v/d_o; docs/tutorials.md).

As written, the module (and the causal mask of its test script)
  top_left_mask  the test's mask triu(full((B, n_q, n_k), -inf), 1): top-left,
                 wrong whenever n_q != n_k (its own example: n_q = 2, n_k = 4);
  nan_rows       adds -inf and takes the softmax: a row that sees no key is NaN;
  masked_keys_weighted
                 adds the mask to the scores (a NaN score stays NaN under
                 -inf) and multiplies each masked key's zero weight by its
                 value: NaN in a masked slot reaches O;
  own_scale      divides by sqrt(d_k) and takes no scale from the caller.
A fourth bug lives in a projection, where a kernel gate does not look: fc_q is
built as Linear(dimension_k, ...), so the module only runs while the query
width equals the key width. The subject feeds the projections (identity), so
that bug stays invisible here (docs/tutorials.md says so).
"""
import math
import sys

import torch
from torch import nn

from ._adapt import SEED000, seed000_attend, seed000_layers, skip_masked_keys, variants

BUGS = ("top_left_mask", "nan_rows", "masked_keys_weighted", "own_scale")


class MHA(nn.Module):
    def __init__(self, num_head, dimension_k, dimension_v, d_k, d_v, d_o, fixed=frozenset(), dimension_q=None,
                 kv_heads=None):
        super().__init__()
        kv_heads = num_head if kv_heads is None else kv_heads  # the MQA (mqa.py): one
        self.num_head = num_head
        self.d_k = d_k
        self.d_v = d_v
        self.d_o = d_o
        self.fixed = fixed
        # as written Linear(dimension_k, ...): fc_q_width corrected takes the query's own width
        self.fc_q = nn.Linear(dimension_q if "fc_q_width" in fixed else dimension_k, num_head * d_k)
        self.fc_k = nn.Linear(dimension_k, kv_heads * d_k)
        self.fc_v = nn.Linear(dimension_v, kv_heads * d_v)
        self.fc_o = nn.Linear(num_head * d_v, d_o)
        self.softmax = nn.Softmax(dim=2)

    def _heads_of_kv(self, x, batch, n, width):
        return x.view(batch, n, self.num_head, width).permute(2, 0, 1, 3).contiguous().view(-1, n, width)

    def forward(self, q, k, v, mask, scale=None):
        batch, n_q, dimension_q = q.size()
        batch, n_k, dimension_k = k.size()
        batch, n_v, dimension_v = v.size()
        q, k, v = self.fc_q(q), self.fc_k(k), self.fc_v(v)
        q = q.view(batch, n_q, self.num_head, self.d_k).permute(2, 0, 1, 3).contiguous().view(-1, n_q, self.d_k)
        k = self._heads_of_kv(k, batch, n_k, self.d_k)
        v = self._heads_of_kv(v, batch, n_v, self.d_v)
        if "own_scale" in self.fixed:
            attention = torch.matmul(q, k.transpose(-1, -2)) * scale
        else:
            attention = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d_k)
        mask = mask.repeat(self.num_head, 1, 1)
        if "mask_dtype" in self.fixed:  # the script's mask is float32 (000:323); below f32 the sum is promoted
            mask = mask.to(attention.dtype)
        if "masked_keys_weighted" in self.fixed:
            attention = attention.masked_fill(torch.isinf(mask), float("-inf"))
        else:
            attention = attention + mask
        attention = self.softmax(attention)
        if "nan_rows" in self.fixed:
            attention = attention.masked_fill(torch.isinf(mask).all(-1, keepdim=True), 0.0)
        if "masked_keys_weighted" in self.fixed:
            output = skip_masked_keys(attention, v, ~torch.isinf(mask))
        else:
            output = torch.matmul(attention, v)
        output = output.view(self.num_head, batch, n_q, self.d_v).permute(1, 2, 0, 3).contiguous().view(batch, n_q, -1)
        output = self.fc_o(output)
        return attention, output


# The kernel subjects: K/V heads repeated to the query heads (the module has
# one K/V head per query head).
globals().update(variants(sys.modules[__name__], seed000_attend(MHA, repeat_heads=True), BUGS, **SEED000))


# ---- The layer mode (attncheck.layer): _adapt.seed000_layers, fc_q_width a
# switch of the module (fixed: fc_q takes dimension_q).
globals().update(seed000_layers(MHA, "cross_attention", lambda case: "as many K/V heads as query heads (000:196-197)" if case.kv_heads != case.heads else None))
