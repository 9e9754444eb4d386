"""attncheck from Python (docs/python.md).

Pure Python, importable without the compiled part:
  declare(...)          the declaration a Python subject carries (capabilities,
                        claims, bound numbers), checked by the gate exactly as
                        a C plugin's
  bf16_bits / bf16_values   bfloat16 as numpy uint16 bits, both ways

Compiled (attncheck._core, loaded on first use):
  oracle(q, k, v, ...)  the high-precision reference: O, LSE, the per-element bound
  gate(fn, ...)         the gate on a Python callable; raises GateFailure on failure
  Case                  the one-line case form: parse, print, materialize
"""
import numpy as _np

__all__ = ["declare", "bf16_bits", "bf16_values", "oracle", "gate", "Case", "GateFailure"]

_DTYPES = ("f32", "f16", "bf16")
_FEATURES = ("causal", "padding", "mask", "lse", "threads")
_CLAIMS = ("deterministic", "threads", "batch", "cache", "layout", "lq")


def declare(*, u, exp_ulps, name=None, dtypes=("f32",), features=(), claims=(), key_blocks=1, hints=None,
            tensors="numpy", cache=None):
    """Marks a callable as an attncheck subject.

    u          unit roundoff of the compute type, in [2^-64, 2^-8] (2**-24 for f32 compute)
    exp_ulps   accuracy of the exp used, in ulps, in [0, 4096]
    dtypes     storage types taken: any of "f32", "f16", "bf16"
    features   any of "causal", "padding", "mask", "lse", "threads"
    claims     invariances checked bit for bit: "deterministic", "threads",
               "batch", "cache", "layout", "lq"
    key_blocks online-softmax blocks per row (an int, or a function of Lk); 1
               for a kernel that sees all keys at once
    hints      size hints: {"q_tile", "k_tile", "split_keys", "lengths": [...], "head_dims": [...]}
    tensors    "numpy" (arrays) or "torch" (tensors, zero-copy where the dtype allows)
    cache      a class with append(k, v, count) and attend(q, scale=, causal=, dtype=)
               that makes the cache laws run (docs/python.md, "KV cache")
    The gate refuses unknown names and numbers out of range, naming the field.
    """
    for group, allowed in (("dtypes", _DTYPES), ("features", _FEATURES), ("claims", _CLAIMS)):
        for v in locals()[group]:
            if v not in allowed:
                raise ValueError(f"{group}: unknown entry '{v}' (known: {', '.join(allowed)})")
    decl = {"u": u, "exp_ulps": exp_ulps, "dtypes": list(dtypes), "features": list(features), "claims": list(claims),
            "key_blocks": key_blocks, "hints": dict(hints or {}), "tensors": tensors}
    if name is not None:
        decl["name"] = name
    if cache is not None:
        decl["cache"] = cache

    def mark(fn):
        fn.__attncheck__ = decl
        return fn

    return mark


def bf16_bits(x):
    """float32 values -> bfloat16 bits (uint16), rounded to nearest even; NaN stays NaN."""
    x = _np.ascontiguousarray(x, dtype=_np.float32)
    u = x.view(_np.uint32).astype(_np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(_np.uint16)
    nan = _np.isnan(x)
    return _np.where(nan, ((u >> 16) | 0x40).astype(_np.uint16), rounded)


def bf16_values(bits):
    """bfloat16 bits (uint16) -> float32 values, exactly."""
    bits = _np.ascontiguousarray(bits, dtype=_np.uint16)
    return (bits.astype(_np.uint32) << 16).view(_np.float32)


def __getattr__(name):
    # The compiled part loads on first use, so a subject module that only
    # declares itself never needs it (the gate's own process does not load it).
    if name in ("oracle", "gate", "Case", "GateFailure"):
        from . import _core

        return getattr(_core, name)
    raise AttributeError(f"module 'attncheck' has no attribute '{name}'")
