"""Tutorial: MHA with a one-layer KV cache (the scaled_dot_product_attention,
MultiHeadAttention and CachedMultiHeadAttention of the attention hand-coding
notes; docs/tutorials.md).

As written, the module (and the causal mask its caller builds)
  unshifted_causal  the causal mask is triu(ones(q_len, k_len), 1): not offset
                    by the cached prefix, so a new token sees only the first
                    keys (and a longer key list than queries shifts every row);
  finfo_min         masks with torch.finfo(dtype).min instead of -inf: a row
                    that sees no key averages every value instead of being 0;
  masked_keys_weighted
                    multiplies each masked key's zero weight by its value
                    (softmax, then matmul): NaN in a masked slot reaches O;
  own_scale         scales by 1/sqrt(head_dim) and takes no scale from the caller;
  one_head_dim      splits V with the query head width, so D must equal Dv.
The attention mask follows the notes' convention: True means masked.
"""
import math
import sys

import torch
from torch import nn

from ..layer import SELF, Layer, one_width
from ._adapt import allowed_keys, fed_modules, no_grad, repeat_kv, skip_masked_keys, variants

BUGS = ("unshifted_causal", "finfo_min", "masked_keys_weighted", "own_scale", "one_head_dim")


def scaled_dot_product_attention(query, key, value, attn_mask=None, fixed=frozenset(), scale=None):
    if "own_scale" in fixed:
        scores = torch.matmul(query, key.transpose(-1, -2)) * scale
    else:
        scores = torch.matmul(query, key.transpose(-1, -2)) * (1.0 / math.sqrt(query.size(-1)))
    if attn_mask is not None:
        fill = float("-inf") if "finfo_min" in fixed else torch.finfo(scores.dtype).min
        scores = scores.masked_fill(attn_mask, fill)
    weights = torch.softmax(scores, dim=-1)
    if attn_mask is not None and "finfo_min" in fixed:
        weights = weights.masked_fill(attn_mask.all(-1, keepdim=True), 0.0)  # a row that sees no key: O = 0
    if attn_mask is not None and "masked_keys_weighted" in fixed:
        return skip_masked_keys(weights, value, ~attn_mask), weights
    return torch.matmul(weights, value), weights


class MultiHeadAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, dropout=0.0, fixed=frozenset()):
        super().__init__()
        if hidden_size % num_heads != 0:
            raise ValueError("hidden_size must be divisible by num_heads")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.fixed = fixed
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(hidden_size, hidden_size)
        self.v_proj = nn.Linear(hidden_size, hidden_size)
        self.o_proj = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.scale = None  # the caller's scale, used once own_scale is fixed

    def _split_heads(self, x):
        batch, seq_len, _ = x.shape
        width = x.shape[-1] // self.num_heads if "one_head_dim" in self.fixed else self.head_dim
        x = x.view(batch, seq_len, self.num_heads, width)
        return x.transpose(1, 2)

    def _merge_heads(self, x):
        batch, _, seq_len, _ = x.shape
        x = x.transpose(1, 2).contiguous()
        return x.view(batch, seq_len, -1 if "one_head_dim" in self.fixed else self.hidden_size)

    def forward(self, hidden_states, attn_mask=None):
        query = self._split_heads(self.q_proj(hidden_states))
        key = self._split_heads(self.k_proj(hidden_states))
        value = self._split_heads(self.v_proj(hidden_states))
        output, weights = scaled_dot_product_attention(query, key, value, attn_mask, self.fixed, self.scale)
        return self.o_proj(self._merge_heads(output)), weights


class CachedMultiHeadAttention(MultiHeadAttention):
    def forward(self, hidden_states, attn_mask=None, past_key_value=None, use_cache=False):
        query = self._split_heads(self.q_proj(hidden_states))
        key = self._split_heads(self.k_proj(hidden_states))
        value = self._split_heads(self.v_proj(hidden_states))
        if past_key_value is not None:
            past_key, past_value = past_key_value
            key = torch.cat([past_key, key], dim=2)
            value = torch.cat([past_value, value], dim=2)
        output, weights = scaled_dot_product_attention(query, key, value, attn_mask, self.fixed, self.scale)
        output = self.o_proj(self._merge_heads(output))
        new_cache = (key, value) if use_cache else None
        return output, new_cache, weights


def masked_positions(b, hq, q_len, k_len, *, causal, key_len, mask, fixed):
    """The caller's attn_mask (True = masked), (B, Hq, q_len, k_len)."""
    if causal and "unshifted_causal" not in fixed:
        # As the notes' caller writes it: a causal triangle from the top-left
        # corner, whatever the cached prefix.
        hidden = torch.triu(torch.ones(q_len, k_len, dtype=torch.bool), diagonal=1).view(1, 1, q_len, k_len)
        return hidden | ~allowed_keys(b, hq, q_len, k_len, causal=False, key_len=key_len, mask=mask)
    return ~allowed_keys(b, hq, q_len, k_len, causal=causal, key_len=key_len, mask=mask)


def _modules(fixed):
    return fed_modules(lambda hq, d: CachedMultiHeadAttention(hq * d, hq, fixed=fixed), ("q_proj", "k_proj", "v_proj"),
                       "o_proj")


def _attend(fixed):
    modules = _modules(fixed)

    @no_grad
    def attend(q, k, v, *, scale, causal, key_len, mask, dtype):
        b, lq, hq, d = q.shape
        lk = k.shape[1]
        m = modules((hq, d), q.reshape(b, lq, -1), repeat_kv(k, hq).reshape(b, lk, -1),
                    repeat_kv(v, hq).reshape(b, lk, -1))
        m.scale = scale
        hidden = masked_positions(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask, fixed=fixed)
        out, _, _ = m(torch.empty(b, lq, hq * d), attn_mask=hidden)
        return out.view(b, lq, hq, -1)

    return attend


def _cache(fixed):
    class TutorialCache:
        """The cache protocol on the module's (key, value) tuples: one per
        sequence, since sequences grow by different counts."""

        def __init__(self, config):
            self.b = config.b
            self.past = [None] * config.b
            self.new_k = [[] for _ in range(config.b)]
            self.new_v = [[] for _ in range(config.b)]
            self.modules = _modules(fixed)

        def append(self, k, v, count):
            for bi in range(self.b):
                c = int(count[bi])
                self.new_k[bi].append(k[bi, :c].clone())
                self.new_v[bi].append(v[bi, :c].clone())

        @no_grad
        def attend(self, q, *, scale, causal, dtype):
            b, lq, hq, d = q.shape
            m = self.modules((hq, d))
            m.scale = scale
            outs = []
            for bi in range(b):
                k = repeat_kv(torch.cat(self.new_k[bi]).unsqueeze(0), hq)
                v = repeat_kv(torch.cat(self.new_v[bi]).unsqueeze(0), hq)
                past_len = 0 if self.past[bi] is None else self.past[bi][0].shape[2]
                m.q_proj.value = q[bi : bi + 1].reshape(1, lq, -1)
                m.k_proj.value = k.reshape(1, k.shape[1], hq * d)
                m.v_proj.value = v.reshape(1, v.shape[1], hq * v.shape[3])
                hidden = masked_positions(1, hq, lq, past_len + k.shape[1], causal=causal, key_len=None, mask=None,
                                          fixed=fixed)
                out, self.past[bi], _ = m(torch.empty(1, lq, hq * d), attn_mask=hidden,
                                          past_key_value=self.past[bi], use_cache=True)
                self.new_k[bi], self.new_v[bi] = [], []
                outs.append(out)
            return torch.cat(outs).view(b, lq, hq, -1)

    return TutorialCache


globals().update(variants(sys.modules[__name__], _attend, BUGS, features=["causal", "padding", "mask"], cache=_cache,
                         pairs=[("finfo_min", "masked_keys_weighted")]))


# ---- The layer mode (attncheck.layer): the module with its own weights, called
# as module(hidden_states, attn_mask) with attn_mask True = masked
# (003:21 fills where the mask is True), [B, 1, Lq, Lk].

def _layer(fixed, label):
    def build(case):
        return CachedMultiHeadAttention(case.width("x"), case.heads, fixed=fixed)

    def call(m, xs, visible):
        return m(xs["x"], attn_mask=None if visible is None else ~visible[:, None])[0]

    def weights(m):
        return {"q": m.q_proj, "k": m.k_proj, "v": m.v_proj, "o": m.o_proj}

    return Layer(build, call, weights, SELF, one_width("003:33-47"), "any", name=f"cached_mha {label}")


layer_tutorial = _layer(frozenset(), "as written")
layer_corrected = _layer(frozenset({"finfo_min", "masked_keys_weighted"}), "corrected")
