"""numpy attention with its backward pass (docs/python.md, "Backward").

    attncheck gate --subject python:attncheck.subjects.numpy_backward:attend --only backward

A subject written from docs/python.md's backward convention: `attend` is
numpy_variants' float64 forward (f32, f16, bf16; causal, padding, mask,
LSE), and its declaration's `backward` computes dQ, dK and dV of
L = sum dO * O from the formulas of docs/spec.md "Backward", in float64 with
one rounding into the storage type, from the O and LSE handed in:

    P = exp(S - LSE) (visible keys; 0 otherwise),  dP = dO V^T,  D = sum_e dO O,
    dS = P (dP - D),  dQ = scale dS K,  dK = scale dS^T Q,  dV = P^T dO,

a KV head's dK and dV summed over its query heads. A masked key is skipped
per row, never weighted by zero (its K and V slots may hold NaN); a row that
sees no key adds nothing and its dO is not read. u = 2^-53 and exp 1 ulp, as
the forward. `attend_f32` is the same kernel declaring f32 storage only.
"""
import numpy as np

import attncheck
from attncheck.subjects.numpy_variants import _round, _values, attention, visible


def gradients(q, k, v, o, lse, d_o, *, scale, causal, key_len, mask, dtype):
    """(dQ, dK, dV) in the storage type, from the handed-in O and LSE (docs/spec.md "Backward")."""
    with np.errstate(all="ignore"):
        b, lq, hq, _ = q.shape
        lk, hkv = k.shape[1], k.shape[2]
        group = hq // hkv
        heads = [h // group for h in range(hq)]
        qf, kf, vf, of, gf = (_values(x, dtype).astype(np.float64) for x in (q, k, v, o, d_o))
        kh, vh = kf[:, :, heads, :], vf[:, :, heads, :]  # (B, Lk, Hq, *)
        ok, _ = visible(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask)  # (B, Hq, Lq, Lk)
        seen = ok.any(axis=-1)  # (B, Hq, Lq)
        lse64 = np.asarray(lse, dtype=np.float64)
        # Per-row, per-key products with the hidden pairs skipped (np.where, never 0 * slot).
        s_exact = _masked_dot(qf.transpose(0, 2, 1, 3), kh.transpose(0, 2, 1, 3), ok)  # (B, Hq, Lq, Lk)
        s = np.where(ok, s_exact * scale, -np.inf)
        p = np.where(ok, np.exp(s - np.where(np.isfinite(lse64), lse64, 0)[..., None]), 0.0)
        dpo = np.where(seen.transpose(0, 2, 1)[..., None], gf, 0.0)  # dO of rows that see nothing is not read
        dp = _masked_dot(dpo.transpose(0, 2, 1, 3), vh.transpose(0, 2, 1, 3), ok)
        dsum = np.where(seen, np.einsum("bihe,bihe->bhi", dpo, np.where(seen.transpose(0, 2, 1)[..., None], of, 0.0)), 0.0)
        ds = np.where(ok, p * (dp - dsum[..., None]), 0.0)
        dq = scale * _masked_mix(ds, kh.transpose(0, 2, 1, 3), ok)  # (B, Hq, Lq, D)
        dk = scale * _masked_mix(ds.transpose(0, 1, 3, 2), qf.transpose(0, 2, 1, 3), ok.transpose(0, 1, 3, 2))
        dv = _masked_mix(p.transpose(0, 1, 3, 2), dpo.transpose(0, 2, 1, 3), ok.transpose(0, 1, 3, 2))
        # (B, Hq, Lk, *) -> sum over each KV head's query heads -> (B, Lk, Hkv, *)
        dk = dk.reshape(b, hkv, group, lk, -1).sum(axis=2).transpose(0, 2, 1, 3)
        dv = dv.reshape(b, hkv, group, lk, -1).sum(axis=2).transpose(0, 2, 1, 3)
        return _round(dq.transpose(0, 2, 1, 3), dtype), _round(dk, dtype), _round(dv, dtype)


def _masked_dot(a, bm, ok):
    """sum_d a[..., i, d] * bm[..., j, d] over the pairs ok[..., i, j] only: (B, H, Li, Lj)."""
    terms = a[:, :, :, None, :] * bm[:, :, None, :, :]
    return np.where(ok[..., None], terms, 0.0).sum(axis=-1)


def _masked_mix(w, x, ok):
    """sum_j w[..., i, j] * x[..., j, :] over the pairs ok[..., i, j] only: (B, H, Li, D)."""
    terms = w[..., None] * x[:, :, None, :, :]
    return np.where(ok[..., None], terms, 0.0).sum(axis=-2)


_FEATURES = ("causal", "padding", "mask", "lse")


@attncheck.declare(name="numpy f64 with backward", u=2**-53, exp_ulps=1, dtypes=("f32", "f16", "bf16"),
                   features=_FEATURES, claims=("deterministic", "backward_deterministic"), backward=gradients)
def attend(q, k, v, **kw):
    return attention(q, k, v, **kw)


@attncheck.declare(name="numpy f64 with backward, f32 only", u=2**-53, exp_ulps=1, dtypes=("f32",), features=_FEATURES,
                   claims=("deterministic", "backward_deterministic"), backward=gradients)
def attend_f32(q, k, v, **kw):
    return attention(q, k, v, **kw)
