"""Python subjects for the bridge's tests (tests/python/CMakeLists.txt).

reference        a correct numpy kernel (float64 inside, one rounding into
                 the storage type); every law passes
gqa_modulo       the same with the MUTANTS.md GQA bug: query head h reads
                 KV head h % Hkv instead of h // (Hq / Hkv)
declining        the reference, declining (attncheck.Declined) head sizes above 32
bf16_p           the reference with P rounded to bf16 before P V, declared in its profile
fp8_reference    the reference on fp8 inputs with descales (uint8 bits decoded by table,
                 times their descales in float64); fp8_k_descale_dropped drops K's
limited          the reference under static limits (D, Dv <= 32, Lk >= 2, no GQA), raising
                 (a failure) on any case outside them: the host must never hand it one
limits_typo, limits_negative
                 limits with a misspelt key, and with max_head_dim = -4: refused at load
raises, segfaults, aborts, hangs
                 the reference on Lk < 3, and on Lk >= 3 a Python exception,
                 a segfault through ctypes, os.abort(), an endless loop
"""
import ctypes
import os
import time

import numpy as np

import attncheck

F64 = {"f32": np.float32, "f16": np.float16}


def attention64(q, k, v, *, scale, causal, key_len, mask, dtype, kv_head=None, lse=False, p_round=None):
    """Attention per docs/spec.md in float64, rounded once into the storage type;
    p_round rounds P before P V (the row sum keeps the unrounded weights)."""
    b, lq, hq, _ = q.shape
    lk, hkv = k.shape[1], k.shape[2]
    heads = [kv_head(h, hq, hkv) if kv_head else h // (hq // hkv) for h in range(hq)]
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    k64, v64 = k64[:, :, heads, :], v64[:, :, heads, :]
    s = np.einsum("bihd,bjhd->bhij", q64, k64) * scale
    n = np.full(b, lk, dtype=np.int64) if key_len is None else np.asarray(key_len, dtype=np.int64)
    j = np.arange(lk)[None, None, None, :]
    i = np.arange(lq)[None, None, :, None]
    allowed = j < n[:, None, None, None]
    if causal:
        allowed = allowed & (j <= n[:, None, None, None] - lq + i)  # bottom-right, aligned to the valid keys
    if mask is not None:
        allowed = allowed & mask
    allowed = np.broadcast_to(allowed, s.shape)
    s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.where(allowed, np.exp(s - m), 0.0)
    l = p.sum(axis=-1)
    # A masked key is skipped, not weighted by zero: its slots may hold NaN.
    pv = p if p_round is None else p_round(p)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = pv[..., None] * v64.transpose(0, 2, 1, 3)[:, :, None, :, :]  # (b, hq, lq, lk, dv)
    o = np.where(allowed[..., None], terms, 0.0).sum(axis=3).transpose(0, 2, 1, 3)
    seen = (l > 0).transpose(0, 2, 1)[..., None]  # (b, lq, hq, 1)
    o = np.where(seen, o / np.where(seen, l.transpose(0, 2, 1)[..., None], 1.0), 0.0)
    out = o.astype(F64[dtype])
    if not lse:
        return out
    with np.errstate(divide="ignore", over="ignore"):
        lse_out = np.where(l > 0, m[..., 0] + np.log(l), -np.inf).astype(np.float32)
    return out, lse_out


# u = 2^-53: the arithmetic is binary64. (With it, the LSE law once failed at
# 1.09 of its bound on far_above scores, LSE near 2e7: its merge bound was only
# first order in the parts' LSE errors, which f32 storage makes about 1 there;
# properties/laws/catalogue/lse.cpp now bounds the merge exactly.)
_everything = dict(u=2**-53, exp_ulps=1, dtypes=("f32", "f16"), features=("causal", "padding", "mask", "lse"),
                   claims=("deterministic", "batch", "layout", "lq"))


@attncheck.declare(name="numpy-reference", **_everything)
def reference(q, k, v, **kw):
    return attention64(q, k, v, **kw, lse=True)


def fp8_table(name):
    """The 256 values of an fp8 type (OCP E4M3FN: no infinity, S.1111.111 its NaN; E5M2: IEEE-like)."""
    e4m3 = name == "e4m3"
    mant, bias = (3, 7) if e4m3 else (2, 15)
    top = (1 << (7 - mant)) - 1
    out = np.empty(256)
    for x in range(256):
        e, m = (x >> mant) & top, x & ((1 << mant) - 1)
        sign = -1.0 if x & 0x80 else 1.0
        if (e4m3 and e == top and m == (1 << mant) - 1) or (not e4m3 and e == top and m):
            out[x] = np.nan
        elif not e4m3 and e == top:
            out[x] = sign * np.inf
        else:
            out[x] = sign * np.ldexp(float(m | (1 << mant) if e else m), (e if e else 1) - bias - mant)
    return out


def dequantized(x, name, descale):
    """An input's values: fp8 bits decoded, times the descale (one value, or (B, heads)), exact in float64."""
    values = fp8_table(name)[x] if name in ("e4m3", "e5m2") else x.astype(np.float64)
    if descale is None:
        return values
    d = np.asarray(descale, dtype=np.float64)
    return values * (d[0] if d.shape == (1,) else d[:, None, :, None])


_fp8 = dict(_everything, dtypes=("f32", "f16", "e4m3", "e5m2"), features=("causal", "padding", "mask", "lse", "fp8"))


@attncheck.declare(name="numpy-fp8", **_fp8)
def fp8_reference(q, k, v, *, dtypes=None, q_descale=None, k_descale=None, v_descale=None, **kw):
    if dtypes:
        q, k, v = (dequantized(x, dtypes[t], d) for x, t, d in zip((q, k, v), "qkv", (q_descale, k_descale, v_descale)))
    return attention64(q, k, v, **kw, lse=True)


@attncheck.declare(name="numpy-fp8-k-descale-dropped", **_fp8)
def fp8_k_descale_dropped(q, k, v, *, dtypes=None, q_descale=None, k_descale=None, v_descale=None, **kw):
    if dtypes:
        q, k, v = (dequantized(x, dtypes[t], d) for x, t, d in zip((q, k, v), "qkv", (q_descale, None, v_descale)))
    return attention64(q, k, v, **kw, lse=True)


@attncheck.declare(name="numpy-gqa-modulo", **_everything)
def gqa_modulo(q, k, v, **kw):
    return attention64(q, k, v, **kw, kv_head=lambda h, hq, hkv: h % hkv, lse=True)


def round_bf16(x):
    """x (float64, >= 0, below 1) rounded once to bf16 (8 significant bits, to nearest even)."""
    m, e = np.frexp(x)
    return np.ldexp(np.rint(np.ldexp(m, 8)), e - 8)


# P rounded to bf16 before P V, the row sum taken before the rounding, binary64 elsewhere:
# correct under its stage-wise profile (docs/abi.md "Stage-wise precision profile").
@attncheck.declare(name="numpy-bf16-p", profile={"p_format": "bf16", "row_sum": "before_cast", "scale_mode": "after_dot"},
                   **_everything)
def bf16_p(q, k, v, **kw):
    return attention64(q, k, v, **kw, lse=True, p_round=round_bf16)


@attncheck.declare(name="numpy-profile-typo", profile={"p_fromat": "bf16"}, **_everything)
def profile_typo(q, k, v, **kw):
    return attention64(q, k, v, **kw, lse=True)


@attncheck.declare(name="numpy-limited", limits={"max_head_dim": 32, "min_lk": 2, "max_group": 1}, **_everything)
def limited(q, k, v, **kw):
    """The reference; a case outside its declared limits is the host's bug, so it raises."""
    if max(q.shape[-1], v.shape[-1]) > 32 or k.shape[1] < 2 or q.shape[2] != k.shape[2]:
        raise ValueError(f"handed a case outside the declared limits: q {q.shape}, k {k.shape}, v {v.shape}")
    return attention64(q, k, v, **kw, lse=True)


@attncheck.declare(name="numpy-limits-typo", limits={"max_head_dimm": 32}, **_everything)
def limits_typo(q, k, v, **kw):
    return attention64(q, k, v, **kw, lse=True)


@attncheck.declare(name="numpy-limits-negative", limits={"max_head_dim": -4}, **_everything)
def limits_negative(q, k, v, **kw):
    return attention64(q, k, v, **kw, lse=True)


_plain = dict(u=2**-53, exp_ulps=1, dtypes=("f32",), features=("causal", "padding"), claims=("deterministic",))


@attncheck.declare(name="numpy-declining", **_everything)
def declining(q, k, v, **kw):
    """The reference, declining head sizes above 32 as a kernel with a size limit does."""
    if q.shape[-1] > 32 or v.shape[-1] > 32:
        raise attncheck.Declined(f"head size > 32: got {q.shape[-1]}")
    return attention64(q, k, v, **kw, lse=True)


@attncheck.declare(name="raises", **_plain)
def raises(q, k, v, **kw):
    if k.shape[1] >= 3:
        raise ValueError(f"this subject refuses lk={k.shape[1]}")
    return attention64(q, k, v, **kw)


@attncheck.declare(name="segfaults", **_plain)
def segfaults(q, k, v, **kw):
    if k.shape[1] >= 3:
        ctypes.string_at(0)  # reads address 0: SIGSEGV inside a C call
    return attention64(q, k, v, **kw)


@attncheck.declare(name="aborts", **_plain)
def aborts(q, k, v, **kw):
    if k.shape[1] >= 3:
        os.abort()
    return attention64(q, k, v, **kw)


@attncheck.declare(name="hangs", **_plain)
def hangs(q, k, v, **kw):
    while k.shape[1] >= 3:
        time.sleep(0.1)
    return attention64(q, k, v, **kw)


def undeclared(q, k, v, **kw):
    return attention64(q, k, v, **kw)


@attncheck.declare(name="absurd-u", u=2**-4, exp_ulps=1)
def absurd_u(q, k, v, **kw):
    return attention64(q, k, v, **kw)


@attncheck.declare(name="numpy-noop", u=2**-24, exp_ulps=1, dtypes=("f32",))
def noop(q, k, v, **kw):
    """Returns zeros: what the bridge costs with no kernel behind it."""
    return np.zeros((q.shape[0], q.shape[1], q.shape[2], v.shape[3]), dtype=np.float32)


@attncheck.declare(name="torch-noop", u=2**-24, exp_ulps=1, dtypes=("f32",), tensors="torch")
def torch_noop(q, k, v, **kw):
    """Returns zeros as a torch tensor: the bridge's cost in torch mode."""
    import torch

    return torch.zeros((q.shape[0], q.shape[1], q.shape[2], v.shape[3]), dtype=torch.float32)


class ReferenceCache:
    """The cache protocol on the reference: each sequence keeps copies of its
    keys and values (the views handed to append die with the call)."""

    def __init__(self, config):
        self.k = [np.zeros((0, config.hkv, config.d), dtype=F64[config.dtype]) for _ in range(config.b)]
        self.v = [np.zeros((0, config.hkv, config.dv), dtype=F64[config.dtype]) for _ in range(config.b)]

    def append(self, k, v, count):
        for b, c in enumerate(count):
            self.k[b] = np.concatenate([self.k[b], k[b, :c]])
            self.v[b] = np.concatenate([self.v[b], v[b, :c]])

    def attend(self, q, *, scale, causal, dtype):
        b, lq, hq, _ = q.shape
        dv = self.v[0].shape[2]
        o = np.zeros((b, lq, hq, dv), dtype=F64[dtype])
        lse = np.full((b, hq, lq), -np.inf, dtype=np.float32)
        for bi in range(b):
            if len(self.k[bi]) == 0:
                continue  # no key yet: O = 0, LSE = -inf
            o[bi], lse[bi] = (x[0] for x in attention64(q[bi : bi + 1], self.k[bi][None], self.v[bi][None], scale=scale,
                                                         causal=causal, key_len=None, mask=None, dtype=dtype, lse=True))
        return o, lse


@attncheck.declare(name="numpy-reference-cached", cache=ReferenceCache, **_everything)
def reference_cached(q, k, v, **kw):
    return attention64(q, k, v, **kw, lse=True)


class CountIgnoringCache(ReferenceCache):
    """Appends every row it is handed, not the count of each sequence."""

    def append(self, k, v, count):
        super().append(k, v, [k.shape[1]] * k.shape[0])


@attncheck.declare(name="numpy-cache-ignores-count", cache=CountIgnoringCache, **_everything)
def cache_ignores_count(q, k, v, **kw):
    return attention64(q, k, v, **kw, lse=True)


# ---- Contract 1.1 variants: accepted but not applied ------------------------
# Each declares a variant, takes its keyword, and does not (fully) apply it:
# the gate must fail them (python_gate.variant_*_ignored_fails). The kernel is
# attncheck.subjects.numpy_variants, which passes with the variant applied.
from attncheck.subjects import numpy_variants as _nv  # noqa: E402

_variant_decl = dict(u=2**-53, exp_ulps=1, dtypes=("f32",), features=("causal", "padding", "mask", "lse"),
                     claims=("deterministic",))


@attncheck.declare(name="numpy-softcap-ignored", tanh_ulps=2, **{**_variant_decl,
                                                                 "features": _variant_decl["features"] + ("softcap",)})
def softcap_ignored(q, k, v, *, softcap=None, **kw):
    """Declares the softcap and takes softcap=, then never caps a score."""
    return _nv.attention(q, k, v, **kw)


@attncheck.declare(name="numpy-window-right-ignored", **{**_variant_decl,
                                                         "features": _variant_decl["features"] + ("window",)})
def window_right_ignored(q, k, v, *, window=None, **kw):
    """Declares the sliding window and applies its left end only: keys past p + right stay visible."""
    if window is not None:
        window = (window[0], -1)
    return _nv.attention(q, k, v, window=window, **kw)


@attncheck.declare(name="numpy-sinks-ignored", **{**_variant_decl, "features": _variant_decl["features"] + ("sinks",)})
def sinks_ignored(q, k, v, *, sinks=None, **kw):
    """Declares attention sinks and leaves the sink out of the denominator."""
    return _nv.attention(q, k, v, **kw)


class VariantDroppingCache(_nv.Cache):
    """The variant kernel's cache, but its attend drops the variants it is handed."""

    def attend(self, q, *, scale, causal, dtype, **variants):
        return super().attend(q, scale=scale, causal=causal, dtype=dtype)


@attncheck.declare(name="numpy-cache-drops-variants", tanh_ulps=2, cache=VariantDroppingCache,
                   **{**_variant_decl, "features": _variant_decl["features"] + _nv.VARIANTS})
def cache_drops_variants(q, k, v, **kw):
    """One-shot calls apply every variant; only the cached path loses them."""
    return _nv.attention(q, k, v, **kw)


def softcap_without_tanh(q, k, v, **kw):
    return _nv.attention(q, k, v, **kw)


softcap_without_tanh.__attncheck__ = dict(u=2**-53, exp_ulps=1, features=["softcap"])


def tanh_without_softcap(q, k, v, **kw):
    return _nv.attention(q, k, v, **kw)


tanh_without_softcap.__attncheck__ = dict(u=2**-53, exp_ulps=1, tanh_ulps=2, features=["window"])


def backward_variants_without_backward(q, k, v, **kw):
    return _nv.attention(q, k, v, **kw)


backward_variants_without_backward.__attncheck__ = dict(u=2**-53, exp_ulps=1, features=["window", "backward_variants"])


def backward_variants_without_variants(q, k, v, **kw):
    return _nv.attention(q, k, v, **kw)


backward_variants_without_variants.__attncheck__ = dict(u=2**-53, exp_ulps=1, features=["backward_variants"],
                                                        backward=lambda *a, **kw: None)


def tanh_ulps_too_large(q, k, v, **kw):
    return _nv.attention(q, k, v, **kw)


tanh_ulps_too_large.__attncheck__ = dict(u=2**-53, exp_ulps=1, tanh_ulps=5000, features=["softcap"])


# Contract 1.2 input forms through torch tensors (docs/python.md, "Paged K/V
# and ragged batches"): every form keyword arrives as the documented tensor
# type (the arenas in the storage dtype, the table int32, the offsets int64),
# then numpy_paged's kernel computes on the numpy views of the same memory.
_FORM_TYPES = {"block_table": "torch.int32", "cu_seqlens_q": "torch.int64", "cu_seqlens_k": "torch.int64",
               "key_len": "torch.int64"}


@attncheck.declare(name="torch-paged-ragged", u=2**-53, exp_ulps=1, dtypes=("f32", "f16", "bf16"), tensors="torch",
                   features=("causal", "padding", "lse", "paged", "ragged"))
def torch_paged(q, k, v, **kw):
    import torch

    from attncheck.subjects.numpy_paged import paged_attention

    storage = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[kw["dtype"]]
    for name, x in (("q", q), ("k", k), ("v", v), ("k_pages", kw.get("k_pages")), ("v_pages", kw.get("v_pages"))):
        if x is not None and (not isinstance(x, torch.Tensor) or x.dtype != storage):
            raise TypeError(f"{name} arrived as {type(x).__name__} {getattr(x, 'dtype', '')}, expected {storage}")
    for name, want in _FORM_TYPES.items():
        x = kw.get(name)
        if x is not None and (not isinstance(x, torch.Tensor) or str(x.dtype) != want):
            raise TypeError(f"{name} arrived as {type(x).__name__} {getattr(x, 'dtype', '')}, expected {want}")
    if (kw.get("k_pages") is None) != (k is not None) or ("page_size" in kw and not isinstance(kw["page_size"], int)):
        raise TypeError("k and k_pages: exactly one is given; page_size is an int")

    def arr(x):
        if not isinstance(x, torch.Tensor):
            return x
        return x.view(torch.int16).numpy().view(np.uint16) if x.dtype == torch.bfloat16 else x.numpy()

    return paged_attention(arr(q), arr(k), arr(v), **{key: arr(x) for key, x in kw.items()})


# Backward (docs/python.md, "Backward"): numpy_backward's gradients with the
# GQA head-mapping bug in dK and dV (a KV head takes its first query head's
# contribution only, not the sum over its group).
def _first_head_only(q, k, v, o, lse, d_o, **kw):
    from attncheck.subjects.numpy_backward import gradients

    hq, hkv = q.shape[2], k.shape[2]
    group = hq // hkv
    first = [g * group for g in range(hkv)]
    mask = kw["mask"]
    one = dict(kw, mask=None if mask is None else mask[:, first])
    return (gradients(q, k, v, o, lse, d_o, **kw)[0],) + tuple(
        gradients(q[:, :, first], k, v, o[:, :, first], lse[:, first], d_o[:, :, first], **one)[1:])


@attncheck.declare(name="numpy-backward-first-head-only", u=2**-53, exp_ulps=1, dtypes=("f32",),
                   features=("causal", "padding", "mask"), backward=_first_head_only)
def backward_first_head_only(q, k, v, **kw):
    from attncheck.subjects.numpy_variants import attention

    return attention(q, k, v, **kw)[0]
