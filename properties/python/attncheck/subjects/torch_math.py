"""PyTorch's plain math path, as users write it: matmul, masked_fill, softmax, matmul.

    attncheck gate --subject python:attncheck.subjects.torch_math:attend        (f32)
    attncheck gate --subject python:attncheck.subjects.torch_math:attend_bf16   (bf16)
    attncheck gate --subject python:attncheck.subjects.torch_math:attend_unmasked  (f32, no masks declared)
    attncheck gate --subject python:attncheck.subjects.torch_math:attend_nan_rows  (f32, empty rows declared NaN)
    attncheck gate --subject python:attncheck.subjects.torch_math:attend_as_it_is  (f32, both conventions declared)

The kernel is what a tutorial or a model file writes by hand; the subject
only moves the gate's BSHD tensors into torch's (B, H, L, D) order, repeats
KV heads for grouped queries, and builds the boolean mask that the contract
describes (key padding, bottom-right causal, the gate's mask). Two subjects,
because a declaration has one compute type: f32 (torch's CPU f32 matmul and
softmax; Sleef's expf is within 1 ulp) and bf16 (bf16 storage between every op).
torch 1.13's CPU softmax has no f16 kernel, so f16 is not declared.
"""
import torch

_DTYPE = {"f32": torch.float32, "bf16": torch.bfloat16}


def allowed_keys(b, hq, lq, lk, *, causal, key_len, mask, device="cpu"):
    """The contract's visibility as a (B, Hq, Lq, Lk) bool tensor: valid keys,
    bottom-right causal aligned to each sequence's valid keys, the boolean mask."""
    j = torch.arange(lk, device=device).view(1, 1, 1, lk)
    n = torch.full((b,), lk, dtype=torch.int64) if key_len is None else key_len.to(torch.int64)
    n = n.view(b, 1, 1, 1)
    ok = j < n
    if causal:
        i = torch.arange(lq, device=device).view(1, 1, lq, 1)
        ok = ok & (j <= n - lq + i)
    if mask is not None:
        ok = ok & mask
    return ok.expand(b, hq, lq, lk)


def repeat_kv(x, hq):
    """(B, L, Hkv, D) -> (B, L, Hq, D): query head h reads KV head h // (Hq / Hkv)."""
    return x.repeat_interleave(hq // x.shape[2], dim=2) if x.shape[2] != hq else x


def heads_first(q, k, v):
    """BSHD -> (B, H, L, D), K and V heads repeated after the transpose so that
    query head h reads KV head h // (Hq / Hkv)."""
    hq, hkv = q.shape[2], k.shape[2]
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if hq != hkv:
        k = k.repeat_interleave(hq // hkv, dim=1)
        v = v.repeat_interleave(hq // hkv, dim=1)
    return q, k, v


def math_attention(q, k, v, *, scale, causal, key_len, mask):
    """BSHD in, BSHD out: the four-op math path."""
    b, lq, hq, _ = q.shape
    lk = k.shape[1]
    q, k, v = heads_first(q, k, v)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~allowed_keys(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v).transpose(1, 2)


def _declared(fn, **kw):
    fn.__attncheck__ = dict(tensors="torch", features=["causal", "padding", "mask"], claims=["deterministic"], **kw)
    return fn


def attend(q, k, v, *, scale, causal, key_len, mask, dtype):
    return math_attention(q, k, v, scale=scale, causal=causal, key_len=key_len, mask=mask)


def attend_bf16(q, k, v, *, scale, causal, key_len, mask, dtype):
    return math_attention(q, k, v, scale=scale, causal=causal, key_len=key_len, mask=mask)


def attend_unmasked(q, k, v, *, scale, causal, key_len, mask, dtype):
    return math_attention(q, k, v, scale=scale, causal=causal, key_len=key_len, mask=mask)


def attend_nan_rows(q, k, v, *, scale, causal, key_len, mask, dtype):
    return math_attention(q, k, v, scale=scale, causal=causal, key_len=key_len, mask=mask)


def attend_as_it_is(q, k, v, *, scale, causal, key_len, mask, dtype):
    return math_attention(q, k, v, scale=scale, causal=causal, key_len=key_len, mask=mask)


_declared(attend, name="torch-math f32", dtypes=["f32"], u=2**-24, exp_ulps=1)
# The same kernel declaring no mask of any kind: what the math path does where
# no row is empty and no key is masked (docs/python.md, "PyTorch").
_declared(attend_unmasked, name="torch-math f32 unmasked", dtypes=["f32"], u=2**-24, exp_ulps=1)
attend_unmasked.__attncheck__["features"] = []
_declared(attend_bf16, name="torch-math bf16", dtypes=["bf16"], u=2**-8, exp_ulps=1)
# The same kernel with masks, declaring what its softmax gives a row that sees
# no key (every score -inf: NaN), as a version 4 convention (docs/abi.md "Conventions").
_declared(attend_nan_rows, name="torch-math f32, empty rows NaN", dtypes=["f32"], u=2**-24, exp_ulps=1,
          conventions={"empty_row_o": "nan"})
# The same kernel declaring both of its conventions: a row that sees no key is
# NaN, and softmax(...) @ v multiplies a masked key's weight 0 by its value
# (docs/abi.md "Conventions"), so the gate fills masked slots with finite values.
_declared(attend_as_it_is, name="torch-math f32, as it is", dtypes=["f32"], u=2**-24, exp_ulps=1,
          conventions={"empty_row_o": "nan", "masked_slots": "weighted_by_zero"})
