"""Tutorial: grouped-query attention with float head arithmetic (the
GroupedQueryAttention module of the hand-written PyTorch tutorial;
docs/tutorials.md).

As written, the module
  float_heads      computes head_dim = embed_dim / nums_head and the heads per
                   group with '/', so both are floats: nn.Linear refuses a
                   float width, and view and repeat would too;
  contiguous_call  merges heads with `.contiguous.view(...)`: the method is
                   never called, and a bound method has no view;
  own_scale        divides by head_dim ** 0.5 (the right default) and takes
                   no scale from the caller;
  square_causal    masks with triu(ones(L, L), 1) of the query length: top-left;
  nan_rows         takes the softmax of a row of -inf: a row that sees no key
                   (key padding or a mask makes them) is NaN instead of 0;
  square_seq       views K and V with the query's length (one input x);
  one_head_dim     views V with the query head width, so D must equal Dv;
  masked_keys_weighted
                   multiplies each masked key's zero weight by its value
                   (softmax, then matmul): NaN in a masked slot reaches O.
As written the module takes no key padding and no mask, so `tutorial`
declares causal only; the other variants also take them. Dropout is applied as written; the subject runs the module in eval mode, as
inference does, so it passes values through.
"""
import sys

import torch
from torch import nn

from ..layer import SELF, Layer, one_width
from ._adapt import SEED002, contract_visibility, fed_modules, no_grad, skip_masked_keys, variants

BUGS = ("float_heads", "contiguous_call", "own_scale", "square_causal", "nan_rows", "square_seq", "one_head_dim", "masked_keys_weighted")


class GroupedQueryAttention(nn.Module):
    def __init__(self, embed_dim, nums_head, nums_group, dropout, fixed=frozenset()):
        super().__init__()
        self.embed_dim = embed_dim
        self.nums_head = nums_head
        self.nums_group = nums_group
        self.fixed = fixed
        assert nums_head % nums_group == 0
        assert embed_dim % nums_head == 0
        if "float_heads" in fixed:
            self.head_dim = embed_dim // nums_head
            self.num_heads_per_group = nums_head // nums_group
        else:
            self.head_dim = embed_dim / nums_head
            self.num_heads_per_group = nums_head / nums_group
        self.scale = self.head_dim**0.5
        self.wq = nn.Linear(embed_dim, embed_dim)
        self.wk = nn.Linear(embed_dim, self.nums_group * self.head_dim)
        self.wv = nn.Linear(embed_dim, self.nums_group * self.head_dim)
        self.wo = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, is_causal, scale=None, allowed=None, others=None):
        batch_size, seq_len, _ = x.shape
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        k_len = k.shape[1] if "square_seq" in self.fixed else seq_len
        v_dim = -1 if "one_head_dim" in self.fixed else self.head_dim
        q = q.view(batch_size, seq_len, self.nums_head, self.head_dim).transpose(1, 2)
        k = k.view(batch_size, k_len, self.nums_group, self.head_dim).transpose(1, 2)
        k = k.unsqueeze(2).repeat(1, 1, self.num_heads_per_group, 1, 1).view(batch_size, self.nums_head, k_len, self.head_dim)
        v = v.view(batch_size, k_len, self.nums_group, v_dim).transpose(1, 2)
        dv = v.shape[-1]
        v = v.unsqueeze(2).repeat(1, 1, self.num_heads_per_group, 1, 1).view(batch_size, self.nums_head, k_len, dv)
        if "own_scale" in self.fixed:
            attn_scores = torch.matmul(q, k.transpose(-1, -2)) * scale
        else:
            attn_scores = torch.matmul(q, k.transpose(-1, -2)) / self.scale
        visible = others  # key padding and the boolean mask, once the subject takes them
        if is_causal:
            if "square_causal" in self.fixed:
                visible = allowed
            else:
                mask = torch.triu(torch.ones(seq_len, seq_len), diagonal=1)
                visible = (mask != 1) if visible is None else visible & (mask != 1)
        if visible is not None:
            attn_scores = attn_scores.masked_fill(~visible, float("-inf"))
        attn_weights = torch.softmax(attn_scores, dim=-1)
        if "nan_rows" in self.fixed and visible is not None:
            attn_weights = attn_weights.masked_fill(~visible.any(-1, keepdim=True), 0.0)
        attn_weights = self.dropout(attn_weights)
        if "masked_keys_weighted" in self.fixed and visible is not None:
            attn_outputs = skip_masked_keys(attn_weights, v, visible)
        else:
            attn_outputs = torch.matmul(attn_weights, v)
        width = -1 if "one_head_dim" in self.fixed else self.embed_dim
        if "contiguous_call" in self.fixed:
            attn_outputs = attn_outputs.transpose(1, 2).contiguous().view(batch_size, seq_len, width)
        else:
            attn_outputs = attn_outputs.transpose(1, 2).contiguous.view(batch_size, seq_len, width)
        outputs = self.wo(attn_outputs)
        return self.dropout(outputs)


def _attend(fixed):
    modules = fed_modules(lambda hq, hkv, d: GroupedQueryAttention(hq * d, hq, hkv, dropout=0.1, fixed=fixed),
                          ("wq", "wk", "wv"), "wo")

    @no_grad
    def attend(q, k, v, *, scale, causal, key_len, mask, dtype):
        b, lq, hq, d = q.shape
        lk, hkv = k.shape[1], k.shape[2]
        m = modules((hq, hkv, d), q.reshape(b, lq, -1), k.reshape(b, lk, -1), v.reshape(b, lk, -1))
        full, others = contract_visibility(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask)
        out = m(torch.empty(b, lq, hq * d), causal, scale=scale, allowed=full, others=others)
        return out.view(b, lq, hq, -1)

    return attend


globals().update(variants(sys.modules[__name__], _attend, BUGS, **SEED002))


# ---- The layer mode (attncheck.layer): the module with its own weights, built
# as the tutorial builds it (dropout applied to the weights and the output,
# 002:296, 328, 335) and left in train mode, as an nn.Module is built and as
# the tutorial never calls eval(); called as module(x, is_causal).
# `dropout_train` corrected: the caller puts the module in eval mode.
LAYER_BUGS = ("float_heads", "contiguous_call", "dropout_train")


def _layer(fixed, label):
    def build(case):
        m = GroupedQueryAttention(case.width("x"), case.heads, case.kv_heads, dropout=0.1,
                                  fixed=fixed - {"dropout_train"})
        return m.eval() if "dropout_train" in fixed else m

    def call(m, xs, visible):
        return m(xs["x"], visible is not None)

    def weights(m):
        return {"q": m.wq, "k": m.wk, "v": m.wv, "o": m.wo}

    return Layer(build, call, weights, SELF, one_width("002:280-296", kv_heads="any"), "causal",
                 name=f"gqa_float_heads {label}")


layer_tutorial = _layer(frozenset(), "as written")
for _bug in LAYER_BUGS:
    globals()["layer_only_" + _bug] = _layer(frozenset(LAYER_BUGS) - {_bug}, "only " + _bug)
layer_corrected = _layer(frozenset(LAYER_BUGS), "corrected")
