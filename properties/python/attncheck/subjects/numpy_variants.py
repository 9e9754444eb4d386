"""numpy attention with every contract 1.1 variant (docs/spec.md "Variants").

    attncheck gate --subject python:attncheck.subjects.numpy_variants:attend       (float64 inside)
    attncheck gate --subject python:attncheck.subjects.numpy_variants:attend_f32   (float32 inside)

Both take f32, f16 and bf16 storage, causal, key padding, the boolean mask
and LSE, and all six variants: sliding window, chunked local attention,
logit softcap, attention sinks, ALiBi and the additive bias, in any
combination. The order of operations is the contract's:

    S = softcap(scale * q.k) + alibi[h] * (j - p) + bias[b,h,i,j]

then the masks (padding, causal, boolean mask, window, chunk, a -inf bias
entry), then the softmax with the sink logit in the denominator. A row that
sees no key gets O = 0 and LSE = sinks[h] (-inf without a sink).

`attend` computes in float64 and rounds once into the storage type
(u = 2^-53; exp and tanh are the C library's double ones, within 1 and 2
ulps). `attend_f32` computes every step in float32 with numpy's float32
exp and tanh (u = 2^-24; measured on this machine at 2.37 and 1.37 ulps,
declared 3 and 2: docs/python.md, "Which exp_ulps").

`attend_cached` is `attend` with a KV cache (`Cache`, docs/python.md "KV
cache"): its `attend` takes the same variant keywords for the cached keys.

`attend_*` one-feature subjects (window, chunk, softcap, sinks, alibi,
bias) are the float64 kernel declaring that variant alone, so that every
case the gate draws for it carries it (or nothing).
"""
import numpy as np

import attncheck
from attncheck.subjects._window import window_and_chunk

_STORAGE = {"f32": np.float32, "f16": np.float16}


def _values(x, dtype):
    """Storage -> float values: bf16 arrives as its bits in uint16 (docs/python.md)."""
    if x.dtype == np.uint16:
        return attncheck.bf16_values(x)
    return x


def _round(x, dtype):
    """float -> the storage type, one rounding (bf16: round to nearest even, as bits)."""
    if dtype == "bf16":
        return attncheck.bf16_bits(x.astype(np.float32)) if x.dtype == np.float32 else _bf16_of64(x)
    return x.astype(_STORAGE[dtype])


def _bf16_of64(x):
    # float64 -> bf16 directly (through float32 would round twice): keep 8 significant bits.
    x = np.asarray(x, dtype=np.float64)
    out = np.empty(x.shape, dtype=np.float64)
    fin = np.isfinite(x) & (x != 0)
    m, e = np.frexp(np.where(fin, x, 1.0))
    r = np.ldexp(np.round(np.ldexp(m, 8)), e - 8)  # np.round: half to even
    out[...] = np.where(fin, r, x)
    # Results below bf16's normal range or past its largest value: f32's handling is exact there
    # (bf16 has f32's exponent range), so only the rounding above needs float64.
    return attncheck.bf16_bits(out.astype(np.float32))


def visible(b, hq, lq, lk, *, causal, key_len, mask, window=None, chunk=None, bias=None):
    """The contract's visibility as a (B, Hq, Lq, Lk) bool array, and the aligned positions p (B, 1, Lq, 1)."""
    n = np.full(b, lk, dtype=np.int64) if key_len is None else np.asarray(key_len, dtype=np.int64)
    j = np.arange(lk, dtype=np.int64)[None, None, None, :]
    p = n[:, None, None, None] - lq + np.arange(lq, dtype=np.int64)[None, None, :, None]
    ok = j < n[:, None, None, None]
    if causal:
        ok = ok & (j <= p)
    if mask is not None:
        ok = ok & np.asarray(mask, dtype=bool)
    ok = window_and_chunk(ok, j, p, window=window, chunk=chunk, floor_div=np.floor_divide)
    if bias is not None:
        ok = ok & (_values(np.asarray(bias), None) != -np.inf)
    return np.broadcast_to(ok, (b, hq, lq, lk)), p


def attention(q, k, v, *, scale, causal, key_len, mask, dtype, window=None, chunk=None, softcap=None, sinks=None,
              alibi_slopes=None, bias=None, compute=np.float64):
    """(O, LSE) per docs/spec.md with the variants, every step in `compute`, O rounded once into the storage type."""
    # Adversarial cases overflow on purpose (huge V, far-above scores): the gate judges the result.
    with np.errstate(all="ignore"):
        return _attention(q, k, v, scale=scale, causal=causal, key_len=key_len, mask=mask, dtype=dtype, window=window,
                          chunk=chunk, softcap=softcap, sinks=sinks, alibi_slopes=alibi_slopes, bias=bias,
                          compute=compute)


def _attention(q, k, v, *, scale, causal, key_len, mask, dtype, window, chunk, softcap, sinks, alibi_slopes, bias,
               compute):
    ct = np.dtype(compute)
    b, lq, hq, _ = q.shape
    lk, hkv = k.shape[1], k.shape[2]
    heads = [h // (hq // hkv) for h in range(hq)]
    qf, kf, vf = (_values(x, dtype).astype(ct) for x in (q, k, v))
    kf, vf = kf[:, :, heads, :], vf[:, :, heads, :]
    ok, p = visible(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask, window=window, chunk=chunk, bias=bias)
    with np.errstate(invalid="ignore", over="ignore"):
        # Masked keys may hold NaN or inf: their scores are computed, then never used.
        x = np.einsum("bihd,bjhd->bhij", qf, kf).astype(ct) * ct.type(scale)
        if softcap is not None:
            c = ct.type(softcap)
            x = c * np.tanh(x / c)
        if alibi_slopes is not None:
            rel = (np.arange(lk, dtype=np.int64)[None, None, None, :] - p).astype(ct)
            x = x + np.asarray(alibi_slopes).astype(ct)[None, :, None, None] * rel
        if bias is not None:
            bv = _values(np.asarray(bias), dtype).astype(ct)
            x = x + np.where(np.broadcast_to(bv, x.shape) == -np.inf, ct.type(0), bv)
    s = np.where(ok, x, -np.inf).astype(ct)
    m = s.max(axis=-1, keepdims=True)
    sigma = None
    if sinks is not None:
        sigma = np.asarray(sinks).astype(ct)[None, :, None, None]  # (1, Hq, 1, 1)
        m = np.maximum(m, sigma)  # the sink shifts like one more score
    m = np.where(np.isfinite(m), m, ct.type(0))
    with np.errstate(over="ignore"):
        w = np.where(ok, np.exp(s - m), ct.type(0)).astype(ct)
    l = w.sum(axis=-1, dtype=ct)
    if sigma is not None:
        l = l + np.exp(np.broadcast_to(sigma, m.shape) - m)[..., 0]
    # A masked key is skipped, not weighted by zero: its V slots may hold NaN.
    vt = np.broadcast_to(vf.transpose(0, 2, 1, 3)[:, :, None, :, :], (b, hq, lq, lk, vf.shape[-1]))
    with np.errstate(invalid="ignore", over="ignore"):
        terms = np.where(ok[..., None], w[..., None] * vt, ct.type(0))
    num = terms.sum(axis=3, dtype=ct)  # (b, hq, lq, dv)
    seen = ok.any(axis=-1)  # (b, hq, lq)
    o = np.where(seen[..., None], num / np.where(l > 0, l, ct.type(1))[..., None], ct.type(0))
    o = o.transpose(0, 2, 1, 3)
    with np.errstate(divide="ignore"):
        lse = (m[..., 0] + np.log(l)).astype(ct)
    if sigma is not None:
        lse = np.where(seen, lse, np.broadcast_to(sigma[..., 0], lse.shape))
    else:
        lse = np.where(seen, lse, -np.inf)
    return _round(o, dtype), lse.astype(np.float32)


_FEATURES = ("causal", "padding", "mask", "lse")
VARIANTS = ("window", "chunk", "softcap", "sinks", "alibi", "bias")
_DTYPES = ("f32", "f16", "bf16")


@attncheck.declare(name="numpy-variants f64", u=2**-53, exp_ulps=1, tanh_ulps=2, dtypes=_DTYPES,
                   features=_FEATURES + VARIANTS, claims=("deterministic",))
def attend(q, k, v, **kw):
    return attention(q, k, v, **kw)


@attncheck.declare(name="numpy-variants f32", u=2**-24, exp_ulps=3, tanh_ulps=2, dtypes=_DTYPES,
                   features=_FEATURES + VARIANTS, claims=("deterministic",))
def attend_f32(q, k, v, **kw):
    return attention(q, k, v, **kw, compute=np.float32)


def _one(*features):
    """A subject that declares only these variants: the same arithmetic, a subset's declaration."""
    def fn(q, k, v, **kw):
        return attention(q, k, v, **kw)

    extra = {"tanh_ulps": 2} if "softcap" in features else {}
    fn.__name__ = "attend_" + "_".join(features)
    return attncheck.declare(name="numpy-variants " + "+".join(features), u=2**-53, exp_ulps=1, dtypes=_DTYPES,
                             features=_FEATURES + features, claims=("deterministic",), **extra)(fn)


attend_window = _one("window")
attend_chunk = _one("chunk")
attend_softcap = _one("softcap")
attend_sinks = _one("sinks")
attend_alibi = _one("alibi")
attend_bias = _one("bias")
# Two of the six: --stats prints the shares of the variants a subject declares, whichever they are.
attend_window_softcap = _one("window", "softcap")


class Cache:
    """The KV-cache protocol with every variant: each sequence keeps copies of
    its keys and values (the views handed to append die with the call);
    attend takes the same variant keywords as `attend`, positions counted
    from the start of each sequence."""

    def __init__(self, config):
        self.hkv, self.d, self.dv = config.hkv, config.d, config.dv
        self.k = [None] * config.b
        self.v = [None] * config.b

    def append(self, k, v, count):
        for b, c in enumerate(count):
            rows_k, rows_v = np.array(k[b, :c]), np.array(v[b, :c])
            self.k[b] = rows_k if self.k[b] is None else np.concatenate([self.k[b], rows_k])
            self.v[b] = rows_v if self.v[b] is None else np.concatenate([self.v[b], rows_v])

    def attend(self, q, *, scale, causal, dtype, bias=None, **variants):
        b = q.shape[0]
        n = np.array([0 if x is None else len(x) for x in self.k], dtype=np.int64)
        lk = max(1, int(n.max()))  # a key slot even before the first append: key_len 0 masks it
        storage = q.dtype
        k = np.zeros((b, lk, self.hkv, self.d), dtype=storage)
        v = np.zeros((b, lk, self.hkv, self.dv), dtype=storage)
        for bi in range(b):
            if n[bi]:
                k[bi, : n[bi]], v[bi, : n[bi]] = self.k[bi], self.v[bi]
        if bias is not None:
            bias = np.asarray(bias)[..., :lk]  # the step's rows over the case's keys: key j is cached key j
        return attention(q, k, v, scale=scale, causal=causal, key_len=n, mask=None, dtype=dtype, bias=bias, **variants)


@attncheck.declare(name="numpy-variants f64 cached", u=2**-53, exp_ulps=1, tanh_ulps=2, dtypes=_DTYPES,
                   features=_FEATURES + VARIANTS, claims=("deterministic",), cache=Cache)
def attend_cached(q, k, v, **kw):
    return attention(q, k, v, **kw)
