"""Tutorial: single-head self-attention (the SelfAttention module of the
hand-written PyTorch attention tutorial; docs/tutorials.md).

As written, the module
  own_scale      divides the scores by embed_dim ** 0.5, its own width, and
                 takes no scale from the caller;
  square_causal  masks with triu(ones(L, L), 1) of the input's length L: a
                 top-left square mask, right only while queries and keys are
                 one sequence;
  nan_rows       takes the softmax of a row of -inf: a row that sees no key
                 (none arises in the tutorial's square self-attention, but
                 key padding or a mask makes them) is NaN instead of 0;
  masked_keys_weighted
                 multiplies each masked key's zero weight by its value
                 (softmax, then matmul): NaN in a masked slot reaches O.
The printed code also mixes a tab into the causal branch (Python refuses that
indentation) and reads seq_len from a global of its test script; here the
branch is indented and L comes from the input: the closest version that runs.
The module is single-head: the subject runs it on every (batch, head) pair.
As written it takes no key padding and no mask, so `tutorial` declares causal
only; the other variants also take padding and a boolean mask (with every bug
but one fixed, the module is extended to them).
"""
import sys

import torch
from torch import nn

from ..layer import SELF, Layer, one_width
from ._adapt import SEED002, contract_visibility, fed_modules, no_grad, repeat_kv, skip_masked_keys, variants

BUGS = ("own_scale", "square_causal", "nan_rows", "masked_keys_weighted")


class SelfAttention(nn.Module):
    def __init__(self, embed_dim, fixed=frozenset()):
        super().__init__()
        self.embed_dim = embed_dim
        self.fixed = fixed
        self.WQ = nn.Linear(embed_dim, embed_dim)
        self.WK = nn.Linear(embed_dim, embed_dim)
        self.WV = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(0.1)  # built and never applied, as in the tutorial

    def forward(self, x, iscausal, scale=None, allowed=None, others=None):
        Q, K, V = self.WQ(x), self.WK(x), self.WV(x)
        if "own_scale" in self.fixed:
            scores = torch.matmul(Q, K.transpose(-2, -1)) * scale
        else:
            scores = torch.matmul(Q, K.transpose(-2, -1)) / (self.embed_dim**0.5)
        visible = others  # key padding and the boolean mask, once the subject takes them
        if iscausal:
            if "square_causal" in self.fixed:
                visible = allowed
            else:
                seq_len = x.shape[1]
                mask = torch.triu(torch.ones(seq_len, seq_len), diagonal=1)
                visible = (mask != 1) if visible is None else visible & (mask != 1)
        if visible is not None:
            scores = scores.masked_fill(~visible, float("-inf"))
        weights = torch.softmax(scores, -1)
        if "nan_rows" in self.fixed and visible is not None:
            weights = weights.masked_fill(~visible.any(-1, keepdim=True), 0.0)  # a row that sees no key: O = 0
        if "masked_keys_weighted" in self.fixed and visible is not None:
            return skip_masked_keys(weights, V, visible), weights
        return torch.matmul(weights, V), weights


def _attend(fixed):
    modules = fed_modules(lambda d: SelfAttention(d, fixed), ("WQ", "WK", "WV"))

    @no_grad
    def attend(q, k, v, *, scale, causal, key_len, mask, dtype):
        b, lq, hq, d = q.shape
        lk = k.shape[1]

        def fold(x):  # (B, L, Hq, D) -> (B * Hq, L, D): one single-head problem per (batch, head)
            return x.transpose(1, 2).reshape(b * hq, x.shape[1], x.shape[3])

        m = modules((d,), fold(q), fold(repeat_kv(k, hq)), fold(repeat_kv(v, hq)))
        full, others = contract_visibility(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask)
        fold_mask = (lambda t: None if t is None else t.reshape(b * hq, lq, lk))
        out, _ = m(torch.empty(b * hq, lq, d), causal, scale=scale, allowed=fold_mask(full), others=fold_mask(others))
        return out.reshape(b, hq, lq, -1).transpose(1, 2)

    return attend


globals().update(variants(sys.modules[__name__], _attend, BUGS, **SEED002))


# ---- The layer mode (attncheck.layer): the module with its own weights, called
# as its test script calls it, self_attention(x, iscausal=True) (002:73); a
# causal flag is the only mask it takes. Its causal triangle is right for one
# x, its scale 1/sqrt(embed_dim) is 1/sqrt(head_dim) for one head: in its own
# domain the module as written is correct, and so is `layer_tutorial`.

def _layer(fixed, label):
    def build(case):
        return SelfAttention(case.width("x"), fixed)

    def call(m, xs, visible):
        return m(xs["x"], visible is not None)[0]

    def weights(m):
        return {"q": m.WQ, "k": m.WK, "v": m.WV}

    return Layer(build, call, weights, SELF, one_width("002:27-37", single_head=True), "causal",
                 name=f"self_attention {label}")


layer_tutorial = _layer(frozenset(), "as written")
layer_corrected = _layer(frozenset({"nan_rows", "masked_keys_weighted"}), "corrected")
