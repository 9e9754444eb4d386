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
import math
import sys

import torch
from torch import nn

from ._adapt import SEED000, fed_modules, no_grad, seed000_layers, skip_masked_keys, variants
from ._seed_mask import additive_mask

BUGS = ("top_left_mask", "nan_rows", "masked_keys_weighted", "own_scale", "one_kv_head")


class MQA(nn.Module):
    def __init__(self, num_head, dimension_k, dimension_v, d_k, d_v, d_o, fixed=frozenset(), dimension_q=None):
        super().__init__()
        self.num_head = num_head
        self.d_k = d_k
        self.d_v = d_v
        self.d_o = d_o
        self.fixed = fixed
        # as written Linear(dimension_k, ...): fc_q_width corrected takes the query's own width
        self.fc_q = nn.Linear(dimension_q if "fc_q_width" in fixed else dimension_k, num_head * d_k)
        self.fc_k = nn.Linear(dimension_k, d_k)
        self.fc_v = nn.Linear(dimension_v, d_v)
        self.fc_o = nn.Linear(num_head * d_v, d_o)
        self.softmax = nn.Softmax(dim=2)

    def _heads_of_kv(self, x, batch, n, width):
        if "one_kv_head" not in self.fixed:
            return x.repeat(self.num_head, 1, 1)
        # Any number of KV heads: head h reads KV head h // (heads / kv heads),
        # laid out as q is, (head, batch) flattened.
        kv = x.view(batch, n, -1, width)
        group = self.num_head // kv.shape[2]
        return kv.repeat_interleave(group, dim=2).permute(2, 0, 1, 3).reshape(-1, n, width)

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


def _attend(fixed):
    modules = fed_modules(lambda hq, d, dv: MQA(hq, hq * d, hq * dv, d, dv, hq * dv, fixed), ("fc_q", "fc_k", "fc_v"),
                          "fc_o")

    @no_grad
    def attend(q, k, v, *, scale, causal, key_len, mask, dtype):
        b, lq, hq, d = q.shape
        lk, dv = k.shape[1], v.shape[3]
        m = modules((hq, d, dv), q.reshape(b, lq, -1), k.reshape(b, lk, -1), v.reshape(b, lk, -1))
        add = additive_mask(b, lq, lk, causal=causal, key_len=key_len, top_left="top_left_mask" not in fixed)
        _, out = m(m.fc_q.value, m.fc_k.value, m.fc_v.value, add, scale=scale)
        return out.view(b, lq, hq, dv)

    return attend


globals().update(variants(sys.modules[__name__], _attend, BUGS, **SEED000))


# ---- The layer mode (attncheck.layer): _adapt.seed000_layers, fc_q_width a
# switch of the module (fixed: fc_q takes dimension_q).
globals().update(seed000_layers(MQA, "mqa", lambda case: "exactly one K/V head (000:263-264)" if case.kv_heads != 1 else None))
