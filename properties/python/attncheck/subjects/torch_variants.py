"""Contract 1.1 variants through torch's float attn_mask (python3-torch 1.13).

    attncheck gate --subject python:attncheck.subjects.torch_variants:attend          (as users write it)
    attncheck gate --subject python:attncheck.subjects.torch_variants:attend_guarded  (the contract's guards)
    attncheck gate --subject python:attncheck.subjects.torch_variants:attend_key_guarded  (guards, P @ V one matmul)
    attncheck gate --subject python:attncheck.subjects.torch_variants:attend_alibi    (ALiBi alone)

What an additive float mask can express is four of the six variants: the
sliding window and chunked local attention (0 where visible, -inf where
not), ALiBi (slope[h] * (j - p) with p the aligned position) and the bias
itself (its -inf entries mask). The subject builds that (B, Hq, Lq, Lk)
float32 mask from the keywords the bridge passes and runs the math path of
attncheck.subjects.torch_math with it: matmul, scale, + mask, softmax,
matmul. The softcap (a function of the score, not an addend) and sinks (a
term of the denominator with no key) are not expressible as a mask, so they
are not declared. Neither are causal, key padding and the boolean mask:
declared, they fail on torch's NaN rows as torch_math's `attend` does
(docs/python.md, "PyTorch"), and the variants are what is gated here.

`attend` meets torch_math's two findings through the variants: a window or
chunk that hides every key of a row (or a bias row of -inf) gives
softmax(-inf, ...) = NaN where the contract says 0, and a hidden key is
weighted by zero, not skipped, so a NaN in its slots reaches O.
`attend_guarded` adds the guards the contract needs: hidden scores forced to
-inf, rows that see no key set to 0, and P @ V summed over each row's
visible keys (masked_fill on the products, not one matmul).
`attend_key_guarded` keeps the matmul and zeroes only the V slots of keys no
row of the head sees: not enough, since a key one row sees and another does
not may hold NaN for the other (docs/spec.md, "Non-finite inputs in visible
slots"), and window.outside_keys_never_matter shows it. `attend_alibi`
declares ALiBi alone, which never hides a key.

f32 storage and compute (u = 2^-24), exp within 1 ulp (Sleef's expf).
"""
import torch

from ._window import window_and_chunk
from .torch_math import heads_first


def variant_mask(b, hq, lq, lk, *, key_len=None, window=None, chunk=None, alibi_slopes=None, bias=None):
    """The additive float32 mask (B, Hq, Lq, Lk) of the variants: 0 or -inf for window and chunk,
    slope[h] * (j - p) for ALiBi, the bias as given (its -inf entries mask)."""
    n = torch.full((b,), lk, dtype=torch.int64) if key_len is None else key_len.to(torch.int64)
    j = torch.arange(lk, dtype=torch.int64).view(1, 1, 1, lk)
    p = n.view(b, 1, 1, 1) - lq + torch.arange(lq, dtype=torch.int64).view(1, 1, lq, 1)  # aligned positions
    ok = torch.ones((1, 1, 1, 1), dtype=torch.bool)
    ok = window_and_chunk(ok, j, p, window=window, chunk=chunk,
                          floor_div=lambda x, c: torch.div(x, c, rounding_mode="floor"))
    mask = torch.zeros((b, hq, lq, lk), dtype=torch.float32)
    mask = mask.masked_fill(~ok.expand(b, hq, lq, lk), float("-inf"))
    if alibi_slopes is not None:
        mask = mask + alibi_slopes.to(torch.float32).view(1, hq, 1, 1) * (j - p).to(torch.float32)
    if bias is not None:
        mask = mask + bias.to(torch.float32)
    return mask


def float_mask_attention(q, k, v, *, scale, key_len=None, window=None, chunk=None, alibi_slopes=None, bias=None,
                         guard="none"):
    """BSHD in, BSHD out: softmax(scale * q k^T + float mask) v.

    guard="none":  the math path as users write it.
    guard="keys":  hidden scores forced to -inf (NaN + -inf is NaN), the V slots of keys no row of
                   the head sees zeroed, rows that see no key set to 0; P @ V stays one matmul.
    guard="rows":  the same, with P @ V summed over each row's visible keys only (a hidden key is
                   skipped per row, never weighted by zero), as docs/spec.md asks.
    """
    b, lq, hq, _ = q.shape
    lk = k.shape[1]
    q, k, v = heads_first(q, k, v)
    mask = variant_mask(b, hq, lq, lk, key_len=key_len, window=window, chunk=chunk, alibi_slopes=alibi_slopes, bias=bias)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale + mask
    if guard == "none":
        return torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2)
    hidden = mask == float("-inf")
    scores = scores.masked_fill(hidden, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    zero = torch.zeros((), dtype=v.dtype)
    if guard == "keys":
        used = ~hidden.all(dim=2)  # (B, Hq, Lk): some row of the head sees the key
        out = torch.matmul(weights, torch.where(used.unsqueeze(-1), v, zero))
    else:
        terms = weights.unsqueeze(-1) * v.unsqueeze(2)  # (B, Hq, Lq, Lk, Dv)
        out = terms.masked_fill(hidden.unsqueeze(-1), 0.0).sum(dim=3)
    seen = (~hidden).any(dim=-1, keepdim=True)
    return torch.where(seen, out, zero).transpose(1, 2)


def _declared(fn, name, features):
    fn.__attncheck__ = dict(name=name, tensors="torch", dtypes=["f32"], u=2**-24, exp_ulps=1, features=list(features),
                            claims=["deterministic"])
    return fn


FEATURES = ("window", "chunk", "alibi", "bias")


def attend(q, k, v, *, scale, causal, key_len, mask, dtype, **variants):
    return float_mask_attention(q, k, v, scale=scale, key_len=key_len, **variants)


def attend_guarded(q, k, v, *, scale, causal, key_len, mask, dtype, **variants):
    return float_mask_attention(q, k, v, scale=scale, key_len=key_len, guard="rows", **variants)


def attend_key_guarded(q, k, v, *, scale, causal, key_len, mask, dtype, **variants):
    return float_mask_attention(q, k, v, scale=scale, key_len=key_len, guard="keys", **variants)


def attend_alibi(q, k, v, *, scale, causal, key_len, mask, dtype, alibi_slopes=None):
    return float_mask_attention(q, k, v, scale=scale, key_len=key_len, alibi_slopes=alibi_slopes)


_declared(attend, "torch-float-mask f32", FEATURES)
_declared(attend_guarded, "torch-float-mask f32 guarded", FEATURES)
_declared(attend_key_guarded, "torch-float-mask f32 key-guarded", FEATURES)
_declared(attend_alibi, "torch-float-mask f32 alibi", ("alibi",))
