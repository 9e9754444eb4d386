"""A kernel that takes only part of the variants, as ggml's CPU flash attention
does, declared honestly: the subject of the acceptance "a declining subject"
(docs/abi.md "Static limits", "Return status: declined").

    attncheck gate --subject python:tests/python/ggml_like.py:attend
    attncheck gate --subject python:tests/python/ggml_like.py:attend_sink_bug
    attncheck gate --subject python:tests/python/ggml_like.py:attend_rule_declared
    attncheck gate --subject python:tests/python/ggml_like.py:attend_max_bias_4

What it takes, and how it says so:
- head sizes up to 256, an additive bias only in f16 (ggml's KQ mask is
  f16), and ALiBi distances |j - p| up to 2048 (positions held exactly):
  static limits, so the gate draws inside them;
- ALiBi slopes only from one max_bias (ggml derives them: m0 = 2^(-8/n),
  m1 = 2^(-4/n), n the largest power of two <= Hq; the published family at
  max_bias 8): any other slopes are declined per case,
  `attncheck.Declined("alibi slopes outside the max_bias family")`;
- sinks, causal, padding, the boolean mask and LSE.

Its arithmetic is ggml's order, in float32 with numpy's float32 exp
(declared 3 ulps, as numpy_variants' attend_f32): the keys' running max M,
sum S and accumulator O first, then the sink merged as one more score:
    Mn = max(M, sink); ms = exp(M - Mn); vs = exp(sink - Mn)
    S = S * ms + vs;   O = O * ms;   O = O / S,   LSE = Mn + log(S).
`attend` guards the two exponentials where their operand is -inf (a row
that sees no key, a sink of -inf), as ggml's fix does; `attend_sink_bug`
does not, so a row that sees no key under a -inf sink computes
exp(-inf - -inf) = NaN where the contract wants O = 0: the bug the
declines and limits must not hide. `attend_rule_declared` is `attend` with
its slope rule declared as a limit too ("alibi_slopes": "geometric",
"alibi_max_bias": 8), so that the gate draws only those slopes;
`attend_max_bias_4` derives its slopes from max_bias 4 (m0 = 2^(-4/n)) and
declares that rule.
"""
import numpy as np

import attncheck

_VALUES = {"f32": np.float32, "f16": np.float16}


def _values(x):
    """Storage -> float32 values (bf16 arrives as its bits in uint16)."""
    if x.dtype == np.uint16:
        return attncheck.bf16_values(x).astype(np.float32)
    return np.asarray(x).astype(np.float32)


def _store(x, dtype):
    if dtype == "bf16":
        return attncheck.bf16_bits(x.astype(np.float32))
    return x.astype(_VALUES[dtype])


def max_bias_slopes(hq, max_bias=8.0):
    """ggml's ALiBi slopes of Hq heads from one max_bias, in float32."""
    n = 1 << (hq.bit_length() - 1)
    m0 = np.float32(2.0) ** np.float32(-max_bias / n)
    m1 = np.float32(2.0) ** np.float32(-max_bias / 2 / n)
    return np.array([m0 ** (h + 1) if h < n else m1 ** (2 * (h - n) + 1) for h in range(hq)], dtype=np.float32)


def _attention(q, k, v, *, scale, causal, key_len, mask, dtype, sinks=None, alibi_slopes=None, bias=None, guard=True,
               max_bias=8.0):
    b, lq, hq, _ = q.shape
    lk, hkv = k.shape[1], k.shape[2]
    if alibi_slopes is not None:
        given = np.asarray(alibi_slopes, dtype=np.float32)
        if not np.allclose(given, max_bias_slopes(hq, max_bias), rtol=1e-6, atol=0):
            raise attncheck.Declined(f"alibi slopes outside the max_bias family: {given[:4]}")
    f32 = np.float32
    heads = [h // (hq // hkv) for h in range(hq)]
    qf, kf, vf = _values(q), _values(k)[:, :, heads, :], _values(v)[:, :, heads, :]
    n = np.full(b, lk, dtype=np.int64) if key_len is None else np.asarray(key_len, dtype=np.int64)
    j = np.arange(lk)[None, None, None, :]
    p = n[:, None, None, None] - lq + np.arange(lq)[None, None, :, None]
    ok = j < n[:, None, None, None]
    if causal:
        ok = ok & (j <= p)
    if mask is not None:
        ok = ok & np.asarray(mask, dtype=bool)
    x = np.einsum("bihd,bjhd->bhij", qf, kf).astype(f32) * f32(scale)
    if alibi_slopes is not None:
        x = x + np.asarray(alibi_slopes, dtype=f32)[None, :, None, None] * (j - p).astype(f32)
    if bias is not None:
        bv = np.broadcast_to(_values(np.asarray(bias)), x.shape)
        ok = ok & (bv != -np.inf)
        x = x + np.where(bv == -np.inf, f32(0), bv)
    ok = np.broadcast_to(ok, x.shape)
    s = np.where(ok, x, -np.inf).astype(f32)
    m = s.max(axis=-1, keepdims=True)
    w = np.where(ok, np.exp(s - np.where(np.isfinite(m), m, f32(0))), f32(0)).astype(f32)
    big_s = w.sum(axis=-1, keepdims=True, dtype=f32)
    vt = vf.transpose(0, 2, 1, 3)  # (b, hq, lk, dv)
    acc = np.zeros(x.shape[:3] + (vf.shape[-1],), dtype=f32)
    for jj in range(lk):  # masked keys are skipped, never weighted by zero (their V may be NaN)
        use = ok[..., jj:jj + 1]
        acc = np.where(use, acc + w[..., jj:jj + 1] * vt[:, :, None, jj, :], acc).astype(f32)
    if sinks is not None:
        sink = np.asarray(sinks, dtype=f32)[None, :, None, None]
        mn = np.maximum(m, sink)
        if guard:
            ms = np.where(m == -np.inf, f32(0), np.exp(m - np.where(mn == -np.inf, f32(0), mn)))
            vs = np.where(sink == -np.inf, f32(0), np.exp(sink - np.where(mn == -np.inf, f32(0), mn)))
        else:
            ms, vs = np.exp(m - mn), np.exp(sink - mn)
        big_s = (big_s * ms + vs).astype(f32)
        acc = (acc * ms).astype(f32)
        m = mn
    o = np.where(big_s == 0, f32(0), acc / np.where(big_s == 0, f32(1), big_s)).astype(f32)
    lse = (m + np.log(big_s))[..., 0]
    return _store(o.transpose(0, 2, 1, 3), dtype), lse.astype(f32)


_DECLARATION = dict(u=2**-24, exp_ulps=3, dtypes=("f32", "f16", "bf16"),
                    features=("causal", "padding", "mask", "lse", "sinks", "alibi", "bias"),
                    limits={"max_head_dim": 256, "bias_dtypes": ["f16"], "alibi_max_distance": 2048})


@attncheck.declare(name="ggml-like", **_DECLARATION)
def attend(q, k, v, **kw):
    with np.errstate(all="ignore"):
        return _attention(q, k, v, **kw)


@attncheck.declare(name="ggml-like, -inf sink bug", **_DECLARATION)
def attend_sink_bug(q, k, v, **kw):
    with np.errstate(all="ignore"):
        return _attention(q, k, v, **kw, guard=False)


@attncheck.declare(name="ggml-like, slope rule declared",
                   **dict(_DECLARATION, limits=dict(_DECLARATION["limits"], alibi_slopes="geometric", alibi_max_bias=8)))
def attend_rule_declared(q, k, v, **kw):
    with np.errstate(all="ignore"):
        return _attention(q, k, v, **kw)


@attncheck.declare(name="ggml-like, max_bias 4",
                   **dict(_DECLARATION, limits=dict(_DECLARATION["limits"], alibi_slopes="geometric", alibi_max_bias=4)))
def attend_max_bias_4(q, k, v, **kw):
    with np.errstate(all="ignore"):
        return _attention(q, k, v, **kw, max_bias=4.0)
