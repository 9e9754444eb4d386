"""torch 1.13's multi-head attention, both paths, with identity projections
so that its attention kernel is what the gate judges (docs/python.md).

    attncheck gate --subject python:attncheck.subjects.torch_mha:slow_path
    attncheck gate --subject python:attncheck.subjects.torch_mha:fast_path

slow_path   F.multi_head_attention_forward, the function nn.MultiheadAttention
            calls when it cannot take its fast path: q / sqrt(head_dim),
            baddbmm with the float mask, softmax, bmm. Takes causal, padding
            (key_padding_mask) and the boolean mask (a 3-D attn_mask).
fast_path   nn.MultiheadAttention.forward on its fast path,
            torch._native_multi_head_attention (self-attention in eval mode,
            no attn_mask, an even number of heads). Takes padding only: the
            fast path refuses any attn_mask, so causal and the boolean mask
            cannot reach it. The subject raises if a call did not take it.

How a gate case reaches the kernel unchanged:
- Head width. torch has one head width for q, k and v and divides q by
  sqrt(head_dim). Heads are padded with zeros to hd, the smallest power of
  four that holds them, so sqrt(hd) is a power of two and that division is
  exact; zeros add nothing to a dot product, and O's padding columns are
  dropped.
- Scale. The q projection is scale * I (the case's scale folded into Q: one
  rounding, as the contract allows) and K is multiplied by sqrt(hd) (exact),
  so the scores are scale * (Q . K) up to the roundings the bound counts.
- Projections are identities otherwise (zero biases): x * 1 + 0 * others is
  exact. The slow path receives K and V as static_k/static_v, its documented
  way to pass already-projected keys, so only Q and the output are projected.
  The fast path takes one tensor for query, key and value; queries and keys
  sit on separate tokens of it (queries first, masked as keys through
  key_padding_mask), the Q or K columns next to the V columns, so the
  in-projection picks out exactly Q, K and V and a NaN in a masked key's
  slots stays in that key.
- Heads are independent, so they go through torch in groups that keep the
  projection matrices small (the fast path projects every token through a
  dense 3E x E matrix, and Debian's torch uses a generic BLAS: about 2
  GFLOP/s here). The slow path takes up to 512 / hd heads per call (2 to 512
  at hd <= 256: the head reshaping is exercised); the fast path one head per
  call next to an all-zero second head whose output is dropped (it needs an
  even head count, and one real head per call keeps E = 2 hd smallest).
  Grouped-query KV heads are repeated, as the math path does.
"""
import math

import torch
import torch.nn.functional as F

from .torch_math import allowed_keys, repeat_kv

_SLOW_WIDTH = 512

_native = torch._native_multi_head_attention
_fast_calls = 0


def _counting_native(*args, **kwargs):
    global _fast_calls
    _fast_calls += 1
    return _native(*args, **kwargs)


# nn.MultiheadAttention looks the function up on torch at each call: counting
# here proves every fast_path call took the fast path.
torch._native_multi_head_attention = _counting_native


def _pow4_at_least(n):
    w = 1
    while w < n:
        w *= 4
    return w


def _pad_last(x, width):
    return F.pad(x, (0, width - x.shape[-1])) if x.shape[-1] != width else x


_eye_cache = {}


def _eye(n):
    if n not in _eye_cache:
        _eye_cache.clear()
        _eye_cache[n] = torch.eye(n, dtype=torch.float32)
    return _eye_cache[n]


def _slow_group(q, k, v, *, scale, visible, padded_keys, hd):
    """q (B, Lq, G, D), k (B, Lk, G, D), v (B, Lk, G, Dv), visible (B, G, Lq, Lk) or None,
    padded_keys (B, Lk) or None -> O (B, Lq, G, Dv) through F.multi_head_attention_forward."""
    b, lq, g, _ = q.shape
    lk, dv = k.shape[1], v.shape[3]
    e = g * hd
    query = _pad_last(q, hd).reshape(b, lq, e).transpose(0, 1)  # (Lq, B, E)
    static_k = (_pad_last(k, hd) * math.sqrt(hd)).permute(0, 2, 1, 3).reshape(b * g, lk, hd)
    static_v = _pad_last(v, hd).permute(0, 2, 1, 3).reshape(b * g, lk, hd)
    dummy = torch.zeros(lk, b, 1)  # key and value inputs, replaced by static_k / static_v
    zero_w = torch.zeros(e, 1)
    attn_mask = None if visible is None else (~visible).reshape(b * g, lq, lk)
    out, _ = F.multi_head_attention_forward(
        query, dummy, dummy, e, g, None, None, None, None, False, 0.0, _eye(e), None,
        training=False, key_padding_mask=padded_keys, need_weights=False, attn_mask=attn_mask,
        use_separate_proj_weight=True, q_proj_weight=_eye(e) * scale, k_proj_weight=zero_w, v_proj_weight=zero_w,
        static_k=static_k, static_v=static_v)
    return out.transpose(0, 1).reshape(b, lq, g, hd)[..., :dv]


def slow_path(q, k, v, *, scale, causal, key_len, mask, dtype):
    b, lq, hq, d = q.shape
    lk, dv = k.shape[1], v.shape[3]
    k, v = repeat_kv(k, hq), repeat_kv(v, hq)
    hd = _pow4_at_least(max(d, dv))
    visible = None
    if causal or mask is not None:
        visible = allowed_keys(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask)
    padded_keys = None
    if key_len is not None:
        padded_keys = torch.arange(lk).view(1, lk) >= key_len.to(torch.int64).view(b, 1)
    per = max(1, _SLOW_WIDTH // hd)
    parts = []
    with torch.no_grad():
        for h in range(0, hq, per):
            s = slice(h, min(hq, h + per))
            parts.append(_slow_group(q[:, :, s], k[:, :, s], v[:, :, s], scale=scale,
                                     visible=None if visible is None else visible[:, s], padded_keys=padded_keys, hd=hd))
    return torch.cat(parts, dim=2)


_modules = {}


def _module(e, heads):
    key = (e, heads)
    if key not in _modules:
        _modules.clear()
        m = torch.nn.MultiheadAttention(e, heads, batch_first=True, bias=True)
        m.eval()
        for p in m.parameters():
            p.requires_grad_(False)
        _modules[key] = m
    return _modules[key]


def _fast_head(q, k, v, *, scale, key_len):
    """q (B, Lq, D), k (B, Lk, D), v (B, Lk, Dv): one head -> O (B, Lq, Dv) through
    nn.MultiheadAttention's fast path with two heads of width hd, the second a
    dummy whose output is dropped. One input tensor: Lq query tokens, then Lk key
    tokens; columns [0, D) hold Q (query tokens) or K (key tokens), columns
    [D, D + Dv) hold V (key tokens)."""
    b, lq, d = q.shape
    lk, dv = k.shape[1], v.shape[2]
    hd = _pow4_at_least(max(d, dv, (d + dv + 1) // 2))
    e = 2 * hd
    x = torch.zeros(b, lq + lk, e)
    x[:, :lq, :d] = q
    x[:, lq:, :d] = k
    x[:, lq:, d:d + dv] = v
    m = _module(e, 2)
    w = m.in_proj_weight
    w.zero_()
    qk, vs = torch.arange(d), torch.arange(dv)
    w[qk, qk] = scale                  # head 0's Q: scale * Q
    w[e + qk, qk] = math.sqrt(hd)      # head 0's K: K * sqrt(hd), exact
    w[2 * e + vs, d + vs] = 1.0        # head 0's V
    m.in_proj_bias.zero_()
    m.out_proj.weight.copy_(_eye(e))
    m.out_proj.bias.zero_()
    ignored = torch.zeros(b, lq + lk, dtype=torch.bool)
    ignored[:, :lq] = True
    if key_len is not None:
        ignored[:, lq:] = torch.arange(lk).view(1, lk) >= key_len.to(torch.int64).view(b, 1)
    before = _fast_calls
    out, _ = m(x, x, x, key_padding_mask=ignored, need_weights=False)
    if _fast_calls != before + 1:
        raise RuntimeError("nn.MultiheadAttention did not take its fast path")
    return out[:, :lq, :dv]


def fast_path(q, k, v, *, scale, causal, key_len, mask, dtype):
    hq = q.shape[2]
    k, v = repeat_kv(k, hq), repeat_kv(v, hq)
    with torch.no_grad():
        return torch.stack([_fast_head(q[:, :, h], k[:, :, h], v[:, :, h], scale=scale, key_len=key_len)
                            for h in range(hq)], dim=2)


def slow_path_unmasked(q, k, v, *, scale, causal, key_len, mask, dtype):
    return slow_path(q, k, v, scale=scale, causal=causal, key_len=key_len, mask=mask, dtype=dtype)


def fast_path_unmasked(q, k, v, *, scale, causal, key_len, mask, dtype):
    return fast_path(q, k, v, scale=scale, causal=causal, key_len=key_len, mask=mask, dtype=dtype)


_f32 = dict(tensors="torch", dtypes=["f32"], claims=["deterministic"], u=2**-24, exp_ulps=1)
slow_path.__attncheck__ = dict(_f32, name="torch-1.13 F.multi_head_attention_forward (slow path)",
                               features=["causal", "padding", "mask"])
fast_path.__attncheck__ = dict(_f32, name="torch-1.13 nn.MultiheadAttention (fast path)", features=["padding"])
# The same kernels declaring no mask of any kind: what they do where no row is
# empty and no key is masked (docs/python.md, "PyTorch").
slow_path_unmasked.__attncheck__ = dict(_f32, name="torch-1.13 F.multi_head_attention_forward (slow path) unmasked",
                                        features=[])
fast_path_unmasked.__attncheck__ = dict(_f32, name="torch-1.13 nn.MultiheadAttention (fast path) unmasked", features=[])
