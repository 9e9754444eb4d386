"""A minimal Python subject: naive attention in numpy, float64 inside, f32 storage, with LSE.
    build/attncheck gate --subject python:docs/examples/minimal_subject.py:attend"""
import numpy as np

import attncheck


@attncheck.declare(u=2**-53, exp_ulps=1, dtypes=["f32"], features=["lse"])
def attend(q, k, v, *, scale, causal, key_len, mask, dtype):
    g = q.shape[2] // k.shape[2]  # query head h reads KV head h // g
    k, v = (np.repeat(x.astype(np.float64), g, axis=2) for x in (k, v))
    s = np.einsum("bihd,bjhd->bhij", q.astype(np.float64), k) * scale
    m = s.max(axis=-1, keepdims=True)
    w = np.exp(s - m)
    l = w.sum(axis=-1)
    o = np.einsum("bhij,bjhd->bihd", w, v) / l.transpose(0, 2, 1)[..., None]
    return o.astype(np.float32), (m[..., 0] + np.log(l)).astype(np.float32)
