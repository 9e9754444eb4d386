"""torch 1.13's scaled-dot-product-attention entry point (docs/python.md).

torch 1.13 has no public torch.nn.functional.scaled_dot_product_attention;
its private torch.nn.functional._scaled_dot_product_attention(query, key,
value, attn_mask, dropout_p, need_attn_weights, is_causal) is the entry point
that version has. It takes no scale (it uses 1/sqrt(E) of the query), and a
boolean attn_mask where True takes part.

    attend            the contract's visibility (padding, bottom-right causal,
                      the boolean mask) passed as attn_mask
    attend_is_causal  causal through the entry point's own is_causal flag
                      (padding and the mask through attn_mask)
"""
import torch

from .torch_math import allowed_keys, repeat_kv

_sdpa = torch.nn.functional._scaled_dot_product_attention


def _bhsd(q, k, v):
    hq = q.shape[2]
    return q.transpose(1, 2), repeat_kv(k, hq).transpose(1, 2), repeat_kv(v, hq).transpose(1, 2)


def attend(q, k, v, *, scale, causal, key_len, mask, dtype):
    b, lq, hq, _ = q.shape
    lk = k.shape[1]
    visible = allowed_keys(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask)
    with torch.no_grad():
        out, _ = _sdpa(*_bhsd(q, k, v), visible, 0.0, False, False)
    return out.transpose(1, 2)


def attend_is_causal(q, k, v, *, scale, causal, key_len, mask, dtype):
    b, lq, hq, _ = q.shape
    lk = k.shape[1]
    visible = None
    if key_len is not None or mask is not None:
        visible = allowed_keys(b, hq, lq, lk, causal=False, key_len=key_len, mask=mask)
    with torch.no_grad():
        out, _ = _sdpa(*_bhsd(q, k, v), visible, 0.0, False, bool(causal))
    return out.transpose(1, 2)


for _fn, _name in ((attend, "torch-1.13 _scaled_dot_product_attention"),
                   (attend_is_causal, "torch-1.13 _scaled_dot_product_attention is_causal")):
    _fn.__attncheck__ = dict(name=_name, tensors="torch", dtypes=["f32"], features=["causal", "padding", "mask"],
                             claims=["deterministic"], u=2**-24, exp_ulps=1)
