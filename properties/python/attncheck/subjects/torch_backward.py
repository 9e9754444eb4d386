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
- `variants_guarded`: `math_guarded` with every contract 1.1 variant
  (declaring `backward_variants`): the softcap, ALiBi and bias added to the
  scores, window, chunk and -inf bias hiding keys, and the sink a column of
  the softmax; autograd differentiates the sink logits too, so d(sink) is
  torch's, independent of the oracle's formula;
- `variants_sink_detached`: the same with the sink logits detached in the
  forward (a common slip: the sink as a constant), so d(sink) comes back 0;
- `tutorial_<module>_corrected`: the corrected modules of the tutorials
  (attncheck.tutorials, docs/tutorials.md) whose forward is differentiable,
  with their masks.
"""
import math as _pymath

import torch

from .torch_math import allowed_keys, heads_first, math_attention, repeat_kv
from .torch_variants import variant_mask

_sdpa = torch.nn.functional._scaled_dot_product_attention


def autograd_backward(forward):
    """The backward of a differentiable forward, by torch.autograd: (dQ, dK, dV) of L = sum dO * O, and with
    sinks (a subject declaring backward_variants) d(sink) fourth, the sink logits a leaf too."""

    def backward(q, k, v, o, lse, d_o, **kw):
        with torch.enable_grad():
            leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
            if kw.get("sinks") is not None:
                kw["sinks"] = kw["sinks"].detach().clone().to(torch.float32).requires_grad_(True)
                leaves.append(kw["sinks"])
            out = forward(*leaves[:3], **kw)
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
    qt, kt, vt = heads_first(q, k, v)
    scores = torch.matmul(qt, kt.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~ok, float("-inf")).masked_fill(~seen_row, 0.0)
    weights = torch.softmax(scores, dim=-1).masked_fill(~ok, 0.0)
    out = torch.where(seen_row, torch.matmul(weights, vt), zero)
    return out.transpose(1, 2)


def _variants_guarded(q, k, v, *, scale, causal, key_len, mask, dtype, window=None, chunk=None, softcap=None,
                      sinks=None, alibi_slopes=None, bias=None):
    """_guarded with every contract 1.1 variant, written from docs/spec.md's order of operations:
    s = softcap(scale q.k) + alibi + bias, the window, chunk and -inf bias entries hiding keys as the masks
    do, and the sink a column of the softmax with no value (dropped after it). A row that sees no key and has
    no finite sink gets finite scores before the softmax and O = 0 after it, as in _guarded."""
    b, lq, hq, _ = q.shape
    lk, hkv = k.shape[1], k.shape[2]
    ok = allowed_keys(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask)
    hides = variant_mask(b, hq, lq, lk, key_len=key_len, window=window, chunk=chunk)  # 0 or -inf
    ok = ok & (hides == 0)
    if bias is not None:
        ok = ok & (bias.to(torch.float32).expand(b, hq, lq, lk) != float("-inf"))
    seen_row = ok.any(dim=-1, keepdim=True)
    seen_key = ok.reshape(b, hkv, hq // hkv, lq, lk).any(dim=3).any(dim=2)
    keep = seen_key.transpose(1, 2).unsqueeze(-1)
    zero = torch.zeros((), dtype=q.dtype)
    k, v = torch.where(keep, k, zero), torch.where(keep, v, zero)
    q = torch.where(seen_row.squeeze(-1).transpose(1, 2).unsqueeze(-1), q, zero)
    qt, kt, vt = heads_first(q, k, v)
    scores = torch.matmul(qt, kt.transpose(-1, -2)) * scale
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    if alibi_slopes is not None or bias is not None:
        add = variant_mask(b, hq, lq, lk, key_len=key_len, alibi_slopes=alibi_slopes, bias=bias)
        scores = scores + add.masked_fill(~ok, 0.0)  # hidden pairs: -inf below, never inf - inf
    scores = scores.masked_fill(~ok, float("-inf"))
    if sinks is not None:
        sink = sinks.to(torch.float32).view(1, hq, 1, 1).expand(b, hq, lq, 1)
        has_sink = sink > float("-inf")
        live = seen_row | has_sink
        scores = scores.masked_fill(~live, 0.0)
        col = torch.where(live, sink, torch.zeros((), dtype=torch.float32))  # finite where the row is dead
        weights = torch.softmax(torch.cat([scores, col], dim=-1), dim=-1)[..., :lk]
    else:
        scores = scores.masked_fill(~seen_row, 0.0)
        weights = torch.softmax(scores, dim=-1)
    weights = weights.masked_fill(~ok, 0.0)
    out = torch.where(seen_row, torch.matmul(weights, vt), zero)
    return out.transpose(1, 2)


def _sdpa_forward(q, k, v, *, scale, causal, key_len, mask, dtype):
    hq, d = q.shape[2], q.shape[3]
    k, v = repeat_kv(k, hq), repeat_kv(v, hq)
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
_VARIANTS = ["window", "chunk", "softcap", "sinks", "alibi", "bias"]
# torch's CPU tanhf (Sleef's, within 1 ulp); declared 2 as glibc's, the looser of the two.
variants_guarded = autograd(_variants_guarded, name="torch-math f32 guarded autograd, every variant",
                            features=_MASKS + _VARIANTS + ["backward_variants"], tanh_ulps=2, **_F32)


def _sink_detached(q, k, v, **kw):
    """_variants_guarded with the sink logits detached: the forward is right, d(sink) comes back 0."""
    if kw.get("sinks") is not None:
        kw["sinks"] = kw["sinks"].detach()
    return _variants_guarded(q, k, v, **kw)


variants_sink_detached = autograd(_sink_detached, name="torch-math f32 guarded autograd, sink detached",
                                  features=_MASKS + _VARIANTS + ["backward_variants"], tanh_ulps=2, **_F32)


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
