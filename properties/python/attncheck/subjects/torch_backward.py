"""torch autograd as a backward subject (docs/python.md, "Backward").

    attncheck gate --subject python:attncheck.subjects.torch_backward:math_unmasked --only backward
    attncheck gate --subject python:attncheck.subjects.torch_backward:math --only backward
    attncheck gate --subject python:attncheck.subjects.torch_backward:sdpa_unmasked --only backward
    attncheck gate --subject python:attncheck.subjects.torch_backward:tutorial_self_attention_corrected --only backward

`autograd(forward, **declaration)` makes a subject of any differentiable
torch forward taking the calling convention (q, k, v, *, scale, causal,
key_len, mask, dtype): its backward recomputes the forward on fresh leaf
copies of Q, K and V with gradients on and returns torch.autograd.grad of O
against them for the dO handed in. Like FlashAttention's backward the
contract hands in O and LSE; autograd ignores them and uses the O and
softmax it recomputed (the difference is within the backward bound: both are
the forward's answer to within its own bound).

Subjects (f32, u = 2^-24, exp 1 ulp: torch's CPU expf, docs/python.md "Which
exp_ulps"):

- `math`: torch_math's four-op path (matmul, masked_fill(-inf), softmax,
  matmul) with the contract's masks, differentiated by autograd;
- `math_unmasked`: the same, declaring no mask of any kind;
- `sdpa`, `sdpa_unmasked`: torch 1.13's `_scaled_dot_product_attention` (its
  math path on the CPU) with the contract's visibility as its boolean
  attn_mask, and declaring no mask; it takes no scale and divides Q by
  sqrt(D), so the case's scale is folded into Q as scale * sqrt(D) (one
  rounding, as torch_mha does);
- `tutorial_<module>_corrected`: the corrected modules of the tutorials
  (attncheck.tutorials, docs/tutorials.md) whose forward is differentiable,
  with their masks.
"""
import math as _pymath

import torch

from .torch_math import allowed_keys, math_attention

_sdpa = torch.nn.functional._scaled_dot_product_attention


def autograd_backward(forward):
    """The backward of a differentiable forward, by torch.autograd: (dQ, dK, dV) of L = sum dO * O."""

    def backward(q, k, v, o, lse, d_o, **kw):
        with torch.enable_grad():
            leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
            out = forward(*leaves, **kw)
            if isinstance(out, (tuple, list)):
                out = out[0]
            grads = torch.autograd.grad(out, leaves, grad_outputs=d_o.to(out.dtype), allow_unused=True)
        # A leaf the forward never used (no key at all) has no gradient: it is zero.
        return tuple(torch.zeros_like(x) if g is None else g.detach() for g, x in zip(grads, leaves))

    return backward


def autograd(forward, **declaration):
    """A subject: `forward` for attend (run without gradients), autograd for backward."""
    raw = getattr(forward, "__wrapped__", forward)

    def attend(q, k, v, **kw):
        with torch.no_grad():
            return raw(q, k, v, **kw)

    attend.__name__ = getattr(raw, "__name__", "attend")
    attend.__attncheck__ = dict(declaration, tensors="torch", backward=autograd_backward(raw))
    return attend


_F32 = dict(dtypes=["f32"], u=2**-24, exp_ulps=1, claims=["deterministic"])
_MASKS = ["causal", "padding", "mask"]


def _math(q, k, v, *, scale, causal, key_len, mask, dtype):
    return math_attention(q, k, v, scale=scale, causal=causal, key_len=key_len, mask=mask)


def _guarded(q, k, v, *, scale, causal, key_len, mask, dtype):
    """The math path with the contract's guards written so that autograd's gradients stay finite: the K and V
    slots of keys no row sees and the Q of rows that see no key become zeros before any product (a NaN there
    would reach dQ or dK through 0 * NaN in matmul's backward), a row that sees no key gets finite scores before the softmax (0 / 0 has a NaN
    gradient) and O = 0 after it; torch.where then routes a zero gradient to finite values only."""
    b, lq, hq, _ = q.shape
    lk, hkv = k.shape[1], k.shape[2]
    ok = allowed_keys(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask)  # (B, Hq, Lq, Lk)
    seen_row = ok.any(dim=-1, keepdim=True)  # (B, Hq, Lq, 1)
    seen_key = ok.reshape(b, hkv, hq // hkv, lq, lk).any(dim=3).any(dim=2)  # (B, Hkv, Lk)
    keep = seen_key.transpose(1, 2).unsqueeze(-1)  # (B, Lk, Hkv, 1)
    zero = torch.zeros((), dtype=q.dtype)
    k, v = torch.where(keep, k, zero), torch.where(keep, v, zero)
    q = torch.where(seen_row.squeeze(-1).transpose(1, 2).unsqueeze(-1), q, zero)  # a row that sees nothing: Q unread
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if hq != hkv:
        kt = kt.repeat_interleave(hq // hkv, dim=1)
        vt = vt.repeat_interleave(hq // hkv, dim=1)
    scores = torch.matmul(qt, kt.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~ok, float("-inf")).masked_fill(~seen_row, 0.0)
    weights = torch.softmax(scores, dim=-1).masked_fill(~ok, 0.0)
    out = torch.where(seen_row, torch.matmul(weights, vt), zero)
    return out.transpose(1, 2)


def _sdpa_forward(q, k, v, *, scale, causal, key_len, mask, dtype):
    hq, d = q.shape[2], q.shape[3]
    if k.shape[2] != hq:
        k = k.repeat_interleave(hq // k.shape[2], dim=2)
        v = v.repeat_interleave(hq // v.shape[2], dim=2)
    # _scaled_dot_product_attention divides Q by sqrt(D): hand it Q * scale * sqrt(D).
    qs = q * (scale * _pymath.sqrt(d))
    visible = None
    if causal or key_len is not None or mask is not None:
        visible = allowed_keys(q.shape[0], hq, q.shape[1], k.shape[1], causal=causal, key_len=key_len, mask=mask)
    out, _ = _sdpa(qs.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), visible, 0.0, False, False)
    return out.transpose(1, 2)


math = autograd(_math, name="torch-math f32 autograd", features=_MASKS, **_F32)
math_guarded = autograd(_guarded, name="torch-math f32 guarded autograd", features=_MASKS, **_F32)
math_unmasked = autograd(_math, name="torch-math f32 autograd unmasked", features=[], **_F32)
sdpa = autograd(_sdpa_forward, name="torch-1.13 _scaled_dot_product_attention autograd", features=_MASKS, **_F32)
sdpa_unmasked = autograd(_sdpa_forward, name="torch-1.13 _scaled_dot_product_attention autograd unmasked", features=[],
                         **_F32)


def _tutorials():
    from importlib import import_module

    out = {}
    for name in ("self_attention", "cross_attention", "mqa", "mha_model_width", "gqa_float_heads", "cached_mha",
                 "seed004_mha"):
        mod = import_module(f"attncheck.tutorials.{name}")
        fwd = getattr(mod, "corrected", None)
        if fwd is None:
            continue
        decl = {k: v for k, v in fwd.__attncheck__.items() if k not in ("cache", "tensors", "name")}
        out[f"tutorial_{name}_corrected"] = autograd(fwd, name=f"tutorial {name} (corrected) autograd", **decl)
    return out


globals().update(_tutorials())
