"""attncheck from Python (docs/python.md).

Pure Python, importable without the compiled part and without numpy (numpy
loads on first use of a function that needs it):
  declare(...)          the declaration a Python subject carries (capabilities,
                        claims, bound numbers), checked by the gate exactly as
                        a C plugin's
  bf16_bits / bf16_values   bfloat16 as numpy uint16 bits, both ways

Backed by the compiled attncheck._core, loaded on first use:
  oracle(q, k, v, ...)  the high-precision reference: O, LSE, the per-element bound
  gate(fn, ...)         the gate on a Python callable; raises GateFailure on failure
  Case                  the one-line case form: parse, print, materialize
"""
import collections as _collections
import glob as _glob
import importlib as _importlib
import os as _os
import sys as _sys


def _built_for():
    """The CPython the compiled part (_core) was built for, from its file name, e.g. "CPython 3.11"."""
    for path in _glob.glob(_os.path.join(_os.path.dirname(__file__), "_core.*.so")):
        tag = _os.path.basename(path).split(".")[1]  # cpython-311-x86_64-linux-gnu
        if tag.startswith("cpython-") and tag[8:].split("-")[0].isdigit():
            digits = tag[8:].split("-")[0]
            return f"CPython {digits[0]}.{digits[1:]}"
    return None


def _which_python():
    return f"{_sys.executable} (Python {_sys.version.split()[0]})"


def _load(module, what, fix):
    """Imports module, or raises an ImportError saying what failed, in which interpreter, the one _core is built
    for, and the fix."""
    try:
        return _importlib.import_module(module)
    except ImportError as e:
        built = _built_for() or "the python3 CMake found"
        raise ImportError(f"{what} ({e}); this interpreter is {_which_python()}, attncheck's compiled part is built "
                          f"for {built}: {fix}") from e


def _numpy():
    return _load("numpy", "attncheck needs numpy", "run that interpreter (on Debian /usr/bin/python3 with "
                 "python3-numpy) or install numpy for this one")


def _core_module():
    return _load(__name__ + "._core", "attncheck's compiled part (attncheck._core) does not load", "run the "
                 "interpreter it was built for (`attncheck --version` names it), or rebuild with -DPython3_EXECUTABLE=...")

__all__ = ["declare", "bf16_bits", "bf16_values", "oracle", "Oracle", "gate", "Case", "GateFailure", "Declined"]

_DTYPES = ("f32", "f16", "bf16", "e4m3", "e5m2")  # e4m3 and e5m2: inputs only, with the feature "fp8"


def _features():
    # The feature names a declaration takes, from the contract's feature table (attncheck/features.hpp)
    # through the compiled side: the bridge plugin's embedded module, or attncheck._core. None when
    # neither loads (no compiled part, or none for this interpreter): the gate, which needs it, checks them.
    try:
        import attncheck_features as table
    except ImportError:
        try:
            from . import _core as table
        except ImportError:
            return None
    return tuple(f["name"] for f in table.contract_features() if f["python_declarable"])

_CLAIMS = ("deterministic", "threads", "batch", "cache", "layout", "lq", "page_placement", "paged_equals_dense",
           "ragged_equals_dense", "backward_deterministic", "scale_exact")


def declare(*, u, exp_ulps, name=None, dtypes=("f32",), features=(), claims=(), key_blocks=1, hints=None,
            tensors="numpy", cache=None, tanh_ulps=None, backward=None, profile=None, conventions=None,
            limits=None):
    """Marks a callable as an attncheck subject.

    u          unit roundoff of the compute type, in [2^-64, 2^-8] (2**-24 for f32 compute)
    exp_ulps   accuracy of the exp used, in ulps, in [0, 4096]
    dtypes     storage types taken: any of "f32", "f16", "bf16"
    features   any of "causal", "padding", "mask", "lse", "threads", and the
               contract 1.1 variants "window", "chunk", "softcap", "sinks",
               "alibi", "bias" (each reaches the callable as a keyword when a
               case uses it: docs/python.md, "Variants"), and the contract 1.2
               input forms "paged" and "ragged" (docs/python.md, "Paged K/V
               and ragged batches"), and "backward_variants" (with backward:
               the backward is handed the variants' keywords too and, with
               sinks, returns d_sinks fourth: docs/python.md, "Backward")
    tanh_ulps  accuracy of the tanh used, in ulps, in [0, 4096]: required with
               "softcap", refused without it
    claims     invariances checked bit for bit: "deterministic", "threads",
               "batch", "cache", "layout", "lq", and those of version 3:
               "page_placement", "paged_equals_dense", "ragged_equals_dense",
               "backward_deterministic", and of version 4: "scale_exact" (Q or
               K * 2^k with scale * 2^-k gives the same bits; not for a scale
               split as sqrt(scale) into Q and K)
    key_blocks online-softmax blocks per row (an int, or a function of Lk); 1
               for a kernel that sees all keys at once
    hints      size hints: {"q_tile", "k_tile", "split_keys", "lengths": [...], "head_dims": [...]}
    tensors    "numpy" (arrays) or "torch" (tensors, zero-copy where the dtype allows)
    cache      a class with append(k, v, count) and attend(q, scale=, causal=, dtype=)
               that makes the cache laws run (docs/python.md, "KV cache")
    backward   a callable (q, k, v, o, lse, d_o, *, scale=, causal=, key_len=,
               mask=, dtype=) returning (dQ, dK, dV) in the storage type, which
               makes the backward laws run (docs/python.md, "Backward")
    profile    the stage-wise precision profile, a dict of attncheck_profile's
               fields without prefixes, e.g. {"p_format": "bf16", "row_sum":
               "before_cast"} (docs/abi.md "Stage-wise precision profile")
    conventions what a row that sees no key holds, if not the contract's O = 0
               and LSE = -inf: {"empty_row_o": "nan", "empty_row_lse":
               "plus_inf"} (docs/abi.md "Conventions")
    limits     static limits, a dict of attncheck_limits' built fields:
               {"max_head_dim": 256, "head_dim_multiple": 8, "head_dims": [64,
               128], "dv_equals_d": True, "causal_lq_at_most_lk": True,
               "min_lk": 2, "max_group": 1, "scale_signs": ["positive"],
               "bias_dtypes": ["f16"], "alibi_slopes": "geometric",
               "alibi_max_bias": 8}: the
               gate draws inside them and never hands the callable a case
               outside them (docs/abi.md "Static limits")
    The gate refuses unknown names and numbers out of range, naming the field.
    """
    for group, allowed in (("dtypes", _DTYPES), ("features", _features()), ("claims", _CLAIMS)):
        for v in locals()[group] if allowed is not None else ():
            if v not in allowed:
                raise ValueError(f"{group}: unknown entry '{v}' (known: {', '.join(allowed)})")
    decl = {"u": u, "exp_ulps": exp_ulps, "dtypes": list(dtypes), "features": list(features), "claims": list(claims),
            "key_blocks": key_blocks, "hints": dict(hints or {}), "tensors": tensors}
    if name is not None:
        decl["name"] = name
    if cache is not None:
        decl["cache"] = cache
    if tanh_ulps is not None:
        decl["tanh_ulps"] = tanh_ulps
    if backward is not None:
        decl["backward"] = backward
    if profile is not None:
        decl["profile"] = dict(profile)
    if conventions is not None:
        decl["conventions"] = dict(conventions)
    if limits is not None:
        decl["limits"] = dict(limits)

    def mark(fn):
        fn.__attncheck__ = decl
        return fn

    return mark


def bf16_bits(x):
    """float32 values -> bfloat16 bits (uint16), rounded to nearest even; NaN stays NaN."""
    _np = _numpy()
    x = _np.ascontiguousarray(x, dtype=_np.float32)
    u = x.view(_np.uint32).astype(_np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(_np.uint16)
    nan = _np.isnan(x)
    return _np.where(nan, ((u >> 16) | 0x40).astype(_np.uint16), rounded)


def bf16_values(bits):
    """bfloat16 bits (uint16) -> float32 values, exactly."""
    _np = _numpy()
    bits = _np.ascontiguousarray(bits, dtype=_np.uint16)
    return (bits.astype(_np.uint32) << 16).view(_np.float32)


Oracle = _collections.namedtuple("Oracle", "o lse bound lse_bound")
Oracle.__doc__ = """The oracle's answer, as float64 numpy arrays: O (B, Lq, Hq, Dv), LSE (B, Hq, Lq),
and the per-element bounds on |subject - oracle| for O and LSE (docs/bound.md)."""


def oracle(q, k=None, v=None, *, scale=None, causal=False, key_len=None, mask=None, dtype=None, u=2**-24, exp_ulps=1.0,
           key_blocks=1, window=None, chunk=None, softcap=None, sinks=None, alibi_slopes=None, bias=None, tanh_ulps=1.0):
    """The high-precision reference (MPFR, 50 digits) and its error bound.

    oracle(q, k, v, ...)  numpy arrays in BSHD order of a storage type: float32,
                          float16, or uint16 bf16 bits with dtype="bf16"; scale
                          defaults to 1/sqrt(D) rounded to f32; key_len: B counts;
                          mask: bool (B, Hq, Lq, Lk), each dim 1 or full, True = may attend
    oracle("ATTN(...)")   a one-line case (tensors drawn from its seed)
    oracle(path)          a case file saved by the gate or the fuzzers
    oracle(case)          an attncheck.Case
    window, chunk, softcap, sinks, alibi_slopes, bias: the contract 1.1 variants, as a
                          subject receives them (docs/python.md, "Variants"; arrays only)
    u, exp_ulps, key_blocks, tanh_ulps: the subject's declared numbers, for the bound.
    Returns Oracle(o, lse, bound, lse_bound). Bad input raises ValueError naming the field.
    """
    _np = _numpy()
    _core = _core_module()

    if isinstance(q, (str, _os.PathLike)) or isinstance(q, _core.Case):
        if k is not None or v is not None:
            raise TypeError("oracle(case) takes no k or v")
        if any(x is not None for x in (window, chunk, softcap, sinks, alibi_slopes, bias)):
            raise TypeError("oracle(case) takes its variants from the case, not as keywords")
        if isinstance(q, _core.Case):
            r = _core.oracle_of(q, u, exp_ulps, key_blocks, tanh_ulps)
        else:
            r = _core.oracle_case(_os.fspath(q), u, exp_ulps, key_blocks, tanh_ulps)
    else:
        q, k, v = (_np.asarray(x) for x in (q, k, v))
        lengths = None if key_len is None else [int(n) for n in _np.asarray(key_len).reshape(-1)]
        r = _core.oracle_arrays(q, k, v, scale, causal, lengths, None if mask is None else _np.asarray(mask, dtype=bool),
                                dtype or "", u, exp_ulps, key_blocks, window, chunk, softcap, sinks, alibi_slopes,
                                None if bias is None else _np.asarray(bias), tanh_ulps)
    return Oracle(r["o"], r["lse"], r["o_bound"], r["lse_bound"])


class Declined(Exception):
    """Raised by a subject's attend (or its cache's, or backward) for a case it does
    not compute: raise attncheck.Declined("head size > 256"). The gate counts the
    decline under its reason (the text up to the first ':'), draws another case in
    its place and never calls it a failure (--strict-declines does); a law whose
    draws are mostly declined is UNJUDGED. The outputs must stay unwritten."""


class GateFailure(AssertionError):
    """The gate failed on a Python kernel. str() is the gate's report (each failure's
    law, shrunk case, saved file and replay command, then the table); .result holds
    the table as data."""

    def __init__(self, result):
        super().__init__(result["text"])
        self.result = result


def gate(fn, *, cases=None, seed=None, only=(), out=None, jobs=None, law_timeout=None, tensors=None, config=""):
    """Gates a declared callable (see declare) in this process, each law in a forked child.

    Returns the table as a list of dicts (law, verdict, judged, cases, max_ratio,
    seconds, message, counterexample); raises GateFailure when a law fails or
    judges too few cases. Counterexamples are saved under `out`, and the replay
    command names python:MODULE:QUALNAME, which `attncheck repro` can load when
    the callable is importable under that name.

    `config` is the gate's --run text ("cases=300 seed=7", any key of
    `attncheck gate --help`); a keyword given beside it wins. What is not given
    takes the run table's Python defaults (attncheck/run_config.hpp: 100 cases,
    seed 1, 2 jobs, 120 s per law; _core.run_defaults() prints them).
    """
    _numpy()
    _core = _core_module()
    from . import _bridge

    spec = f"python:{fn.__module__}:{fn.__qualname__}"
    subject = _bridge.Subject(fn, spec, {"tensors": tensors} if tensors else None)
    settings = [config] if config else []
    for key, value, kind in (("cases", cases, int), ("seed", seed, int), ("jobs", jobs, int),
                             ("law_timeout", law_timeout, float)):
        if value is not None:
            settings.append(f"{key}={kind(value)!r}")
    settings += [f"only={o}" for o in only]
    result = _core.gate_subject(subject, spec, ",".join(settings), "" if out is None else _os.fspath(out))
    if result["failed"] or result["unjudged"]:
        raise GateFailure(result)
    return result["laws"]


def __getattr__(name):
    # The compiled part loads on first use, so a subject module that only
    # declares itself never needs it (the gate's own process does not load it).
    if name == "Case":
        return _core_module().Case
    raise AttributeError(f"module 'attncheck' has no attribute '{name}'")
