"""The Python half of the subject bridge (docs/python.md).

The C++ half (properties/python/src/py_subject.cpp) hands over zero-copy numpy views of
the host's guarded buffers; this module turns them into the calling
convention, calls the subject and writes its answer back into the output
views. Nothing here computes attention: every number in O comes from the
subject, in the storage type it returned.
"""
import importlib
import importlib.util
import os
import sys
import warnings

import numpy as np

# The ABI's bits (properties/abi/include/attncheck/subject.h), by name.
DTYPES = {"f32": 0, "f16": 1, "bf16": 2, "e4m3": 3, "e5m2": 4}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def _contract_features():
    # The contract's feature table (reference/include/attncheck/features.hpp), from the compiled side
    # that loaded this module: the bridge plugin's embedded module, or attncheck._core.
    try:
        import attncheck_features as table
    except ImportError:
        from . import _core as table
    return table.contract_features()


_TABLE = _contract_features()


def _bits(word, kinds, declarable=True):
    return {f["name"]: f["bit"] for f in _TABLE
            if f["abi_word"] == word and f["kind"] in kinds and f["python_declarable"] == declarable}


# Version 1 and 2 features (attncheck_instance.features, ATTNCHECK_FEATURE_*) a declaration names; the cache
# is declared by the `cache` class instead.
FEATURES = _bits(1, ("mask", "output"))
FEATURE_CACHE = _bits(1, ("output",), declarable=False)["cache"]
# Contract 1.1 variants: bits of attncheck_instance.features_v3 (ATTNCHECK_FEATURE3_*). A subject that
# declares any of them is handed a version 3 instance; one that declares none stays version 2.
FEATURES3 = _bits(3, ("variant",))
# The keyword each variant reaches the callable as, only when the case uses it (docs/python.md).
VARIANT_KEYWORDS = {f["name"]: f["python_keywords"][0] for f in _TABLE if f["kind"] == "variant"}
# Contract 1.2 input forms (docs/python.md "Paged K/V and ragged batches"): ATTNCHECK_FEATURE3_PAGED and _RAGGED.
# A case in a declared form reaches the callable with these keywords; one in the dense form without them.
FORMS3 = _bits(3, ("input_form",))
FORM_KEYWORDS = {f["name"]: tuple(f["python_keywords"]) for f in _TABLE if f["kind"] == "input_form"}
# fp8 storage (contract 1.3): ATTNCHECK_FEATURE4_FP8, the feature "fp8", with "e4m3" or "e5m2" among the dtypes.
FEATURES4 = _bits(4, ("storage",))
# ATTNCHECK_FEATURE3_BACKWARD: set by a declaration's `backward` callable (docs/python.md "Backward").
FEATURE3_BACKWARD = _bits(3, ("backward",), declarable=False)["backward"]
# ATTNCHECK_FEATURE3_BACKWARD_VARIANTS: the feature "backward_variants", with a backward callable: it is handed
# the declared variants' keywords too and, with sinks, returns d(sink) as a fourth result (docs/python.md "Backward").
BACKWARD3 = _bits(3, ("backward",))
# Version 3 claims (attncheck_instance.invariances_v3, ATTNCHECK_CLAIM3_*), checked bit for bit.
CLAIMS3 = {"page_placement": 0x01, "paged_equals_dense": 0x02, "ragged_equals_dense": 0x04,
           "backward_deterministic": 0x08}
# Version 4 claims (attncheck_instance.invariances_v4, ATTNCHECK_CLAIM4_*; docs/abi.md "Version 4").
CLAIMS4 = {"scale_exact": 0x01}
MAX_TANH_ULPS = 4096.0  # ATTNCHECK_MAX_TANH_ULPS
CLAIMS = {"deterministic": 0x01, "threads": 0x02, "batch": 0x04, "cache": 0x08, "layout": 0x10, "lq": 0x20}
HINT_SLOTS = 8
DECLARATION_KEYS = {"name", "dtypes", "features", "claims", "u", "exp_ulps", "tanh_ulps", "key_blocks", "hints", "tensors",
                    "cache", "backward", "profile", "conventions", "limits"}
# The stage-wise profile (attncheck_profile, docs/abi.md "Stage-wise precision profile"): the C field
# names without prefixes; named values for the enumerations, numbers for the units ("exact": ATTNCHECK_EXACT).
PROFILE_UNITS = ("qk_product_u", "qk_accum_u", "exp_ulps", "rescale_u", "pv_accum_u", "lse_u")
PROFILE_EXACT = ("qk_product_u", "exp_ulps")
PROFILE_NAMES = {
    "scale_mode": {"any": 0, "after_dot": 1, "into_q": 2, "into_k": 3, "sqrt_split": 4, "log2e_folded": 5},
    "p_format": {"compute": 0, "f32": 1, "bf16": 2, "f16": 3, "e4m3": 4, "e5m2": 5},
    "p_factor": {"none": 0, "pow2": 1, "row": 2},
    "row_sum": {"before_cast": 0, "after_cast": 1},
}
PROFILE_INTS = ("p_factor_log2", "p_saturates")
# The conventions (attncheck_conventions, docs/abi.md "Conventions"), by name; flush is a list of stages.
CONVENTION_NAMES = {
    "empty_row_o": {"zero": 0, "nan": 1, "unspecified": 2},
    "empty_row_lse": {"minus_inf": 0, "plus_inf": 1, "zero": 2, "unspecified": 3},
    "masked_slots": {"skipped": 0, "weighted_by_zero": 1},
}
FLUSH_BITS = {"inputs": 0x1, "intermediates": 0x2, "outputs": 0x4}
# The static limits (attncheck_limits, docs/abi.md "Static limits") this attncheck judges, by C field name.
LIMIT_INTS = ("max_head_dim", "head_dim_multiple", "min_lk", "max_group", "alibi_max_distance")
LIMIT_FLAGS = ("dv_equals_d", "causal_lq_at_most_lk")
SCALE_SIGN_BITS = {"positive": 0x1, "zero": 0x2, "negative": 0x4}
BIAS_DTYPE_BITS = {"f32": 0x1, "f16": 0x2, "bf16": 0x4}
ALIBI_RULES = {"any": 0, "geometric": 1}
HINT_KEYS = {"q_tile", "k_tile", "split_keys", "lengths", "head_dims"}
# numpy has no bfloat16: bf16 travels as its bits in uint16 (docs/python.md).
NUMPY_STORAGE = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16)}


class DeclarationError(ValueError):
    """A subject's declaration is missing, unknown or out of range."""


def _resolve(module, attr):
    # A path ending in .py is loaded as a file; anything else is imported.
    if module.endswith(".py"):
        path = os.path.abspath(module)
        if not os.path.isfile(path):
            raise DeclarationError(f"no Python file '{module}'")
        name = "attncheck_subject_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    else:
        mod = importlib.import_module(module)
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise DeclarationError(f"module '{module}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    return obj


def _names(decl, key, table, default):
    values = decl.get(key, default)
    if isinstance(values, str):
        values = [values]
    bits = 0
    for v in values:
        if v not in table:
            raise DeclarationError(f"{key}: unknown entry '{v}' (known: {', '.join(sorted(table))})")
        bits |= table[v]
    return bits


def _number(decl, key):
    if key not in decl:
        raise DeclarationError(f"declares no '{key}' (the bound needs it: docs/bound.md)")
    v = decl[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DeclarationError(f"{key} must be a number, got {type(v).__name__}")
    return float(v)


def _check_keys(value, what, known):
    """A declaration's dict part: a dict whose keys are all known, naming the unknown ones."""
    if not isinstance(value, dict):
        raise DeclarationError(f"{what} must be a dict, got {type(value).__name__}")
    unknown = set(value) - set(known)
    if unknown:
        raise DeclarationError(f"{what}: unknown keys {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})")


def _profile(profile):
    """The profile dict as the C struct's numbers (None: no profile). The host checks the ranges."""
    if profile is None:
        return None
    _check_keys(profile, "profile", set(PROFILE_UNITS) | set(PROFILE_NAMES) | set(PROFILE_INTS))
    out = {}
    for key, v in profile.items():
        if key in PROFILE_NAMES:
            if v not in PROFILE_NAMES[key]:
                raise DeclarationError(f"profile.{key}: unknown value {v!r} (known: {', '.join(PROFILE_NAMES[key])})")
            out[key] = PROFILE_NAMES[key][v]
        elif key in PROFILE_INTS:
            if isinstance(v, bool) or not isinstance(v, int):
                raise DeclarationError(f"profile.{key} must be an integer, got {v!r}")
            out[key] = v
        elif v == "exact" and key in PROFILE_EXACT:
            out[key] = -1.0
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            raise DeclarationError(f"profile.{key} must be a number" + (" or 'exact'" if key in PROFILE_EXACT else "") +
                                   f", got {v!r}")
        else:
            out[key] = float(v)
    return out


def _conventions(conventions):
    """The conventions dict as the C struct's numbers (None: the contract's). The host checks what it judges."""
    if conventions is None:
        return None
    _check_keys(conventions, "conventions", set(CONVENTION_NAMES) | {"flush"})
    out = {}
    for key, v in conventions.items():
        if key == "flush":
            out[key] = _names({"flush": v}, "flush", FLUSH_BITS, [])
        elif v not in CONVENTION_NAMES[key]:
            raise DeclarationError(f"conventions.{key}: unknown value {v!r} (known: {', '.join(CONVENTION_NAMES[key])})")
        else:
            out[key] = CONVENTION_NAMES[key][v]
    return out


def _limits(limits):
    """The limits dict as the C struct's numbers (None: no limits). The host checks the ranges."""
    if limits is None:
        return None
    _check_keys(limits, "limits", set(LIMIT_INTS) | set(LIMIT_FLAGS) | {"head_dims", "scale_signs", "bias_dtypes", "alibi_slopes", "alibi_max_bias"})
    out = {}
    for key, v in limits.items():
        if key in LIMIT_FLAGS:
            if not isinstance(v, bool):
                raise DeclarationError(f"limits.{key} must be True or False, got {v!r}")
            out[key] = int(v)
        elif key == "scale_signs":
            out[key] = _names({"scale_signs": v}, "scale_signs", SCALE_SIGN_BITS, [])
        elif key == "bias_dtypes":
            out[key] = _names({"bias_dtypes": v}, "bias_dtypes", BIAS_DTYPE_BITS, [])
        elif key == "alibi_slopes":
            if v not in ALIBI_RULES:
                raise DeclarationError(f"limits.alibi_slopes: unknown value {v!r} (known: {', '.join(ALIBI_RULES)})")
            out[key] = ALIBI_RULES[v]
        elif key == "alibi_max_bias":
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise DeclarationError(f"limits.alibi_max_bias must be a number, got {v!r}")
            out[key] = float(v)
        elif key == "head_dims":
            if not isinstance(v, (list, tuple)) or len(v) > HINT_SLOTS:
                raise DeclarationError(f"limits.head_dims must be a list of at most {HINT_SLOTS} head sizes, got {v!r}")
            out[key] = [_hint(d, "head_dims") for d in v]
        else:
            out[key] = _hint(v, key)
    return out


def _hint(value, field):
    if isinstance(value, bool) or not isinstance(value, int):
        raise DeclarationError(f"hints.{field} must be an integer, got {value!r}")
    if not -(2**63) <= value < 2**63:
        raise DeclarationError(f"hints.{field} = {value} does not fit in int64")
    return value


class Subject:
    """One instance of a Python subject: its callable, its declaration, the
    numbers the host checks exactly as it checks a C plugin's."""

    def __init__(self, fn, spec, options=None):
        decl = getattr(fn, "__attncheck__", None)
        if decl is None:
            raise DeclarationError(
                f"{spec} carries no declaration: decorate it with @attncheck.declare(...) "
                "or give it an __attncheck__ dict (docs/python.md)")
        decl = dict(decl)
        unknown = set(decl) - DECLARATION_KEYS
        if unknown:
            raise DeclarationError(f"unknown declaration keys: {', '.join(sorted(unknown))}")
        options = dict(options or {})
        self.tensors = options.pop("tensors", decl.get("tensors", "numpy"))
        if self.tensors not in ("numpy", "torch"):
            raise DeclarationError(f"tensors must be 'numpy' or 'torch', got '{self.tensors}'")
        if options:
            raise DeclarationError(f"unknown option '{sorted(options)[0]}' (python subjects take tensors=numpy|torch)")
        self.fn = fn
        self.name = str(decl.get("name", spec))
        self.dtype_bits = 0
        for d in decl.get("dtypes", ["f32"]):
            if d not in DTYPES:
                raise DeclarationError(f"dtypes: unknown entry '{d}' (known: f32, f16, bf16, e4m3, e5m2)")
            self.dtype_bits |= 1 << DTYPES[d]
        features = decl.get("features", [])
        features = [features] if isinstance(features, str) else list(features)
        if "backward" in features:
            raise DeclarationError("features: 'backward' is declared by giving the backward callable "
                                   "(declare(backward=fn), docs/python.md \"Backward\")")
        v3 = {**FEATURES3, **FORMS3, **BACKWARD3}
        newer = {**v3, **FEATURES4}
        self.feature_bits = _names({"features": [f for f in features if f not in newer]}, "features", {**FEATURES, **newer}, [])
        self.feature3_bits = _names({"features": [f for f in features if f in v3]}, "features", v3, [])
        self.feature4_bits = _names({"features": [f for f in features if f in FEATURES4]}, "features", FEATURES4, [])
        fp8_types = self.dtype_bits & ((1 << DTYPES["e4m3"]) | (1 << DTYPES["e5m2"]))
        if bool(fp8_types) != bool(self.feature4_bits & FEATURES4["fp8"]):
            raise DeclarationError("features: 'fp8' and an fp8 type among the dtypes ('e4m3', 'e5m2') come together "
                                   "(docs/python.md \"fp8 inputs\")")
        self.variants = [name for name in FEATURES3 if self.feature3_bits & FEATURES3[name]]
        self.forms = [name for name in FORMS3 if self.feature3_bits & FORMS3[name]]
        claims = decl.get("claims", [])
        claims = [claims] if isinstance(claims, str) else list(claims)
        newer = {**CLAIMS3, **CLAIMS4}
        self.claim_bits = _names({"claims": [c for c in claims if c not in newer]}, "claims", {**CLAIMS, **newer}, [])
        self.claim3_bits = _names({"claims": [c for c in claims if c in CLAIMS3]}, "claims", CLAIMS3, [])
        self.claim4_bits = _names({"claims": [c for c in claims if c in CLAIMS4]}, "claims", CLAIMS4, [])
        self.backward_fn = decl.get("backward")
        if self.backward_fn is not None:
            if not callable(self.backward_fn):
                raise DeclarationError(f"backward: {self.backward_fn!r} is not callable")
            self.feature3_bits |= FEATURE3_BACKWARD
        if self.feature3_bits & BACKWARD3["backward_variants"]:
            if self.backward_fn is None:
                raise DeclarationError("features: 'backward_variants' needs the backward callable (declare(backward=fn))")
            if not self.variants:
                raise DeclarationError("features: 'backward_variants' needs a variant declared ("
                                       + ", ".join(list(FEATURES3)[:-1]) + " or " + list(FEATURES3)[-1] + ")")
        self.cache_class = decl.get("cache")
        if self.cache_class is not None:
            for method in ("append", "attend"):
                if not callable(getattr(self.cache_class, method, None)):
                    raise DeclarationError(f"cache: {self.cache_class!r} has no {method} method")
            self.feature_bits |= FEATURE_CACHE
        self.u = _number(decl, "u")
        self.exp_ulps = _number(decl, "exp_ulps")
        self.profile = _profile(decl.get("profile"))
        self.conventions = _conventions(decl.get("conventions"))
        self.limits = _limits(decl.get("limits"))
        # tanh_ulps belongs to the softcap: required with it, refused without it (the host reads it
        # only with FEATURE3_SOFTCAP, so a stray one would be a declaration nobody checks).
        if "softcap" in self.variants:
            if "tanh_ulps" not in decl:
                raise DeclarationError("declares the softcap but no 'tanh_ulps' (the accuracy of its tanh, in ulps: "
                                       "the bound needs it, docs/bound.md)")
            self.tanh_ulps = _number(decl, "tanh_ulps")
        elif "tanh_ulps" in decl:
            raise DeclarationError("declares tanh_ulps without the softcap feature it is about")
        else:
            self.tanh_ulps = 0.0
        kb = decl.get("key_blocks", 1)
        if not callable(kb) and (isinstance(kb, bool) or not isinstance(kb, int)):
            raise DeclarationError("key_blocks must be an integer or a function of lk")
        self._key_blocks = kb
        hints = dict(decl.get("hints", {}))
        unknown = set(hints) - HINT_KEYS
        if unknown:
            raise DeclarationError(f"unknown hints: {', '.join(sorted(unknown))}")
        self.hints = {k: _hint(hints.get(k, 0), k) for k in ("q_tile", "k_tile", "split_keys")}
        for k in ("lengths", "head_dims"):
            values = [_hint(v, k) for v in hints.get(k, [])]
            if len(values) > HINT_SLOTS:
                raise DeclarationError(f"hints.{k}: at most {HINT_SLOTS} entries")
            self.hints[k] = values
        self.wants_threads = bool(self.feature_bits & FEATURES["threads"])
        self.has_lse = bool(self.feature_bits & FEATURES["lse"])
        if self.tensors == "torch":
            import torch  # noqa: F401  (imported in the parent, before any fork)

    # ---- entry points (called from C++ with the GIL held) ----

    def key_blocks(self, lk):
        kb = self._key_blocks
        return int(kb(lk)) if callable(kb) else int(kb)

    def attend(self, dtype, q, k, v, scale, causal, key_len, mask, threads, o, lse, variants=None, form=None, quant=None):
        name = DTYPE_NAMES[dtype]
        kwargs = self._kwargs(name, scale, causal, key_len, mask, threads, variants)
        if form:
            kwargs.update(self._form_kwargs(form, name))
        names = (name, name, name)
        if quant:
            # fp8 inputs (docs/python.md "fp8 inputs"): each input's type in dtypes=, the descales it has.
            names = tuple(DTYPE_NAMES[quant[t + "_dtype"]] for t in "qkv")
            kwargs["dtypes"] = dict(zip("qkvo", names + (name,)))
            for key in ("q_descale", "k_descale", "v_descale"):
                if key in quant:
                    kwargs[key] = quant[key] if self.tensors == "numpy" else self._torch_of(quant[key])
        q, k, v = (None if x is None else self._arg(x, t) for x, t in zip((q, k, v), names))
        self._store(self.fn(q, k, v, **kwargs), name, o, lse)

    def backward(self, dtype, q, k, v, o, lse, d_o, scale, causal, key_len, mask, threads, dq, dk, dv, variants=None,
                 d_sinks=None):
        name = DTYPE_NAMES[dtype]
        kwargs = self._kwargs(name, scale, causal, key_len, mask, threads, variants)
        q, k, v, o, d_o = (self._arg(x, name) for x in (q, k, v, o, d_o))
        lse = self._torch_of(lse) if self.tensors == "torch" else lse
        result = self.backward_fn(q, k, v, o, lse, d_o, **kwargs)
        # With sinks (backward_variants), d(sink) comes fourth: Hq float32 values.
        want = 3 if d_sinks is None else 4
        if not isinstance(result, (tuple, list)) or len(result) != want:
            raise TypeError("the subject's backward must return " +
                            ("(dQ, dK, dV)" if want == 3 else "(dQ, dK, dV, d_sinks) when the case has sinks"))
        for got, into, what in zip(result, (dq, dk, dv), ("dQ", "dK", "dV")):
            self._copy_into(got, into, name, what)
        if d_sinks is not None:
            got = self._numpy_of(result[3], "d_sinks")
            if got.dtype != np.float32 or got.shape != d_sinks.shape:
                raise TypeError(f"the subject returned d_sinks as {got.dtype} {tuple(got.shape)}; expected float32 "
                                f"{d_sinks.shape} (one per query head)")
            np.copyto(d_sinks, got, casting="no")

    def cache_create(self, dtype, b, hkv, d, dv, capacity, page_size, page_order):
        config = CacheConfig(DTYPE_NAMES[dtype], b, hkv, d, dv, capacity, page_size, page_order, self.tensors)
        return self.cache_class(config)

    def cache_append(self, cache, dtype, k, v, count):
        name = DTYPE_NAMES[dtype]
        cache.append(self._arg(k, name), self._arg(v, name), count if self.tensors == "numpy" else self._torch_of(count))

    def cache_attend(self, cache, dtype, q, scale, causal, threads, o, lse, variants=None):
        name = DTYPE_NAMES[dtype]
        kwargs = {"scale": scale, "causal": bool(causal), "dtype": name}
        if self.wants_threads:
            kwargs["threads"] = threads
        if variants:
            # The same keywords as attend: positions are absolute (p = cached
            # keys - lq + i), a bias holds this step's rows over the case's keys.
            kwargs.update(self._variant_kwargs(variants))
        self._store(cache.attend(self._arg(q, name), **kwargs), name, o, lse)

    # ---- conversions ----

    def _kwargs(self, name, scale, causal, key_len, mask, threads, variants):
        """The keywords every call takes (docs/python.md "The calling convention")."""
        kwargs = {"scale": scale, "causal": bool(causal), "key_len": key_len, "mask": mask, "dtype": name}
        if self.wants_threads:
            kwargs["threads"] = threads
        if variants:
            kwargs.update(self._variant_kwargs(variants))
        if mask is not None and self.tensors == "torch":
            kwargs["mask"] = self._torch_of(mask)
        if key_len is not None and self.tensors == "torch":
            kwargs["key_len"] = self._torch_of(key_len)
        return kwargs

    def _form_kwargs(self, form, name):
        """The contract 1.2 input form's keywords (a dict from the C++ half, only the parts the case uses).
        The host gives a subject only the forms it declared; a stray one here is a bridge bug."""
        out = {}
        for part, keys in FORM_KEYWORDS.items():
            if keys[0] not in form:
                continue
            if part not in self.forms:
                raise RuntimeError(f"python bridge: the case is in the {part} form, which {self.name} did not declare")
            for key in keys:
                value = form[key]
                if self.tensors == "torch" and value is not None and key != "page_size":
                    value = self._arg(value, name) if key in ("k_pages", "v_pages") else self._torch_of(value)
                out[key] = value
        return out

    def _variant_kwargs(self, variants):
        """The case's variants (a dict from the C++ half, only those the case uses) as keywords.
        The host gives a subject only the variants it declared; a stray one here is a bridge bug."""
        out = {}
        for key, value in variants.items():
            if key not in self.variants:
                raise RuntimeError(f"python bridge: the case uses the {key} variant, which {self.name} did not declare")
            if self.tensors == "torch" and key in ("sinks", "alibi", "bias"):
                value = self._arg(value, DTYPE_NAMES[variants_dtype(value)]) if key == "bias" else self._torch_of(value)
            out[VARIANT_KEYWORDS[key]] = value
        return out

    def _torch_of(self, a):
        import torch

        with warnings.catch_warnings():
            # The host's input views are read-only; a torch view of them is
            # not, but every call gets fresh copies, so a write harms nothing.
            warnings.simplefilter("ignore")
            return torch.from_numpy(a)

    def _arg(self, a, name):
        if self.tensors == "numpy":
            return a
        import torch

        if name == "bf16":
            return self._torch_of(a.view(np.int16)).view(torch.bfloat16)
        return self._torch_of(a)

    def _numpy_of(self, x, what):
        if type(x).__module__.startswith("torch"):
            import torch

            x = x.detach()
            if x.device.type != "cpu":
                x = x.cpu()
            if x.dtype == torch.bfloat16:
                return x.view(torch.int16).numpy().view(np.uint16)
            return x.numpy()
        if isinstance(x, np.ndarray):
            return x
        raise TypeError(f"the subject returned {what} as {type(x).__name__}; expected a numpy array or a torch tensor")

    def _store(self, result, name, o, lse):
        if self.has_lse:
            if not isinstance(result, (tuple, list)) or len(result) != 2:
                raise TypeError("the subject declares lse, so it must return (O, LSE)")
            out, lse_out = result
        else:
            if isinstance(result, (tuple, list)):
                raise TypeError("the subject returned a tuple but declares no lse; return O alone")
            out, lse_out = result, None
        self._copy_into(out, o, name, "O")
        if lse is not None:
            lse_out = self._numpy_of(lse_out, "LSE")
            if lse_out.dtype != np.float32:
                raise TypeError(f"the subject returned LSE as {lse_out.dtype}; expected float32")
            if lse_out.shape != lse.shape:
                expected = "(Hq, total_q)" if lse.ndim == 2 else "(B, Hq, Lq)"
                raise ValueError(f"the subject returned LSE of shape {tuple(lse_out.shape)}; expected {expected} = {lse.shape}")
            np.copyto(lse, lse_out, casting="no")

    # The shape each output has, for the messages: O dense or packed, the gradients.
    _SHAPES = {("O", 4): "(B, Lq, Hq, Dv)", ("O", 3): "(total_q, Hq, Dv)", ("dQ", 4): "(B, Lq, Hq, D)",
               ("dK", 4): "(B, Lk, Hkv, D)", ("dV", 4): "(B, Lk, Hkv, Dv)"}

    def _copy_into(self, got, into, name, what):
        """Copies one returned tensor bit for bit into the host's view: exactly the storage type and shape."""
        got = self._numpy_of(got, what)
        want = NUMPY_STORAGE[name]
        if got.dtype != want:
            raise TypeError(f"the subject returned {what} as {got.dtype}; the case's storage type is {name} ({want}): "
                            "round into it inside the subject")
        if got.shape != into.shape:
            raise ValueError(f"the subject returned {what} of shape {tuple(got.shape)}; expected "
                             f"{self._SHAPES.get((what, into.ndim), '')} = {into.shape}")
        np.copyto(into, got, casting="no")


def variants_dtype(a):
    """The ABI dtype code of a numpy array holding f32, f16 or bf16 bits (uint16)."""
    return {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.uint16): 2}[a.dtype]


class CacheConfig:
    """What a cache class is constructed with (attncheck_cache_config)."""

    def __init__(self, dtype, b, hkv, d, dv, capacity, page_size, page_order, tensors):
        self.dtype, self.b, self.hkv, self.d, self.dv = dtype, b, hkv, d, dv
        self.capacity, self.page_size, self.page_order, self.tensors = capacity, page_size, page_order, tensors

    def __repr__(self):
        return (f"CacheConfig(dtype={self.dtype}, b={self.b}, hkv={self.hkv}, d={self.d}, dv={self.dv}, "
                f"capacity={self.capacity}, page_size={self.page_size})")


def load(module, attr, options=None):
    """Imports MODULE (a dotted name or a .py path) and makes a Subject of its attribute ATTR."""
    return Subject(_resolve(module, attr), f"python:{module}:{attr}", options)


def describe_exception(exc):
    """One line for a verdict: the exception's type, message and the subject's innermost frame."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    for f in reversed(frames):
        if not f.filename.endswith("_bridge.py"):
            where = f" (at {os.path.basename(f.filename)}:{f.lineno} in {f.name})"
            break
    return f"python raised {type(exc).__name__}: {exc}{where}"
