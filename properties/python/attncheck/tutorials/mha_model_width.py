"""Tutorial: multi-head attention that scales by the model width (the
Multi_Head_Attention module of the hand-written PyTorch tutorial;
docs/tutorials.md).

As written, the module
  scale          divides the scores by sqrt(embed_dim), the model width, not
                 sqrt(head_dim), and takes no scale from the caller;
  square_causal  masks with triu(ones(L, L), 1) of the query length: top-left;
  nan_rows       takes the softmax of a row of -inf: a row that sees no key
                 (key padding or a mask makes them) is NaN instead of 0;
  square_seq     views K and V with the query's length (one input x), so keys
                 and queries must be equally many;
  one_head_dim   views V with the query head width, so D must equal Dv;
  masked_keys_weighted
                 multiplies each masked key's zero weight by its value
                 (softmax, then matmul): NaN in a masked slot reaches O.
As in self_attention, the causal branch is indented so that Python accepts it,
and `tutorial` declares causal only (the module takes no padding and no mask).
"""
import math
import sys

import torch
from torch import nn

from ..layer import SELF, Layer, one_width
from ._adapt import SEED002, contract_visibility, fed_modules, no_grad, repeat_kv, skip_masked_keys, variants

BUGS = ("scale", "square_causal", "nan_rows", "square_seq", "one_head_dim", "masked_keys_weighted")


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, nums_heads, fixed=frozenset()):
        super().__init__()
        assert embed_dim % nums_heads == 0, "embed_dim must be divisible by nums_heads"
        self.embed_dim = embed_dim
        self.nums_heads = nums_heads
        self.head_dim = embed_dim // nums_heads
        self.fixed = fixed
        self.WQ = nn.Linear(embed_dim, embed_dim)
        self.WK = nn.Linear(embed_dim, embed_dim)
        self.WV = nn.Linear(embed_dim, embed_dim)
        self.fc = nn.Linear(embed_dim, embed_dim)
        self.scale = math.sqrt(embed_dim)

    def forward(self, x, iscausal, scale=None, allowed=None, others=None):
        batch_size, seq_len, embed_dim = x.shape
        Q, K, V = self.WQ(x), self.WK(x), self.WV(x)
        k_len = K.shape[1] if "square_seq" in self.fixed else seq_len
        v_dim = -1 if "one_head_dim" in self.fixed else self.head_dim
        Q = Q.view(batch_size, seq_len, self.nums_heads, self.head_dim).transpose(1, 2)
        K = K.view(batch_size, k_len, self.nums_heads, self.head_dim).transpose(1, 2)
        V = V.view(batch_size, k_len, self.nums_heads, v_dim).transpose(1, 2)
        if "scale" in self.fixed:
            attn_scores = torch.matmul(Q, K.transpose(-1, -2)) * scale
        else:
            attn_scores = torch.matmul(Q, K.transpose(-1, -2)) / self.scale
        visible = others  # key padding and the boolean mask, once the subject takes them
        if iscausal:
            if "square_causal" in self.fixed:
                visible = allowed
            else:
                mask = torch.triu(torch.ones(seq_len, seq_len), diagonal=1)
                visible = (mask != 1) if visible is None else visible & (mask != 1)
        if visible is not None:
            attn_scores = attn_scores.masked_fill(~visible, float("-inf"))
        attn_weights = torch.softmax(attn_scores, -1)
        if "nan_rows" in self.fixed and visible is not None:
            attn_weights = attn_weights.masked_fill(~visible.any(-1, keepdim=True), 0.0)
        if "masked_keys_weighted" in self.fixed and visible is not None:
            output = skip_masked_keys(attn_weights, V, visible)
        else:
            output = torch.matmul(attn_weights, V)
        width = -1 if "one_head_dim" in self.fixed else self.embed_dim
        output = output.transpose(1, 2).contiguous().view(batch_size, seq_len, width)
        return self.fc(output), attn_weights


def _attend(fixed):
    modules = fed_modules(lambda hq, d: MultiHeadAttention(hq * d, hq, fixed), ("WQ", "WK", "WV"), "fc")

    @no_grad
    def attend(q, k, v, *, scale, causal, key_len, mask, dtype):
        b, lq, hq, d = q.shape
        lk = k.shape[1]
        m = modules((hq, d), q.reshape(b, lq, -1), repeat_kv(k, hq).reshape(b, lk, -1),
                    repeat_kv(v, hq).reshape(b, lk, -1))
        full, others = contract_visibility(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask)
        out, _ = m(torch.empty(b, lq, hq * d), causal, scale=scale, allowed=full, others=others)
        return out.view(b, lq, hq, -1)

    return attend


globals().update(variants(sys.modules[__name__], _attend, BUGS, **SEED002))


# ---- The layer mode (attncheck.layer): the module with its own weights, called
# as multiheadattention(x, iscausal) (002:264-265 passes a mask tensor there,
# from a create_mask the script never defines: docs/tutorials.md). `scale`
# corrected sets self.scale = sqrt(head_dim), the one-line fix of 002:229.

def _layer(fixed, label):
    def build(case):
        m = MultiHeadAttention(case.width("x"), case.heads, fixed - {"scale"})
        if "scale" in fixed:
            m.scale = math.sqrt(m.head_dim)
        return m

    def call(m, xs, visible):
        return m(xs["x"], visible is not None)[0]

    def weights(m):
        return {"q": m.WQ, "k": m.WK, "v": m.WV, "o": m.fc}

    return Layer(build, call, weights, SELF, one_width("002:215-229"), "causal", name=f"mha_model_width {label}")


layer_tutorial = _layer(frozenset(), "as written")
layer_corrected = _layer(frozenset({"scale", "nan_rows", "masked_keys_weighted"}), "corrected")
