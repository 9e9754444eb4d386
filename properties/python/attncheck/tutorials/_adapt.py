"""Drives a tutorial's nn.Module with the gate's tensors (docs/tutorials.md)."""
import torch
from torch import nn

from attncheck.subjects.torch_math import allowed_keys, repeat_kv

__all__ = ["Feed", "allowed_keys", "fed_modules", "repeat_kv", "variants", "SEED000", "SEED002"]


class Feed(nn.Module):
    """A projection replaced by the tensor the gate gives: what the module
    computes from here on is the kernel."""

    def __init__(self):
        super().__init__()
        self.value = None

    def forward(self, _x):
        return self.value


def fed_modules(build, feeds, output=None, feed=Feed):
    """The module a subject runs for each shape key: build(*key), made once and
    put in eval mode, with the projections named in `feeds` replaced by feed()
    (the gate's tensors come in through them) and the projection `output`, if
    any, by nn.Identity(). Returns module(key, *values), which hands each
    Feed of `feeds` its value, when given, and returns the module."""
    made = {}

    def module(key, *values):
        m = made.get(key)
        if m is None:
            m = made[key] = build(*key).eval()
            for name in feeds:
                setattr(m, name, feed())
            if output is not None:
                setattr(m, output, nn.Identity())
        for name, value in zip(feeds, values):
            getattr(m, name).value = value
        return m

    return module


# The declarations shared by the modules of one seed, as variants() takes them.
# Seed 000's MHA and MQA (cross_attention, mqa) take the causal flag and key
# padding of their test script's additive mask; nan_rows hides behind
# masked_keys_weighted, and so does, in bf16, the fix mask_dtype (the script's
# mask is float32).
SEED000 = dict(features=("causal", "padding"), pairs=(("nan_rows", "masked_keys_weighted"),),
               low_fixes=(("mask_dtype", "masked_keys_weighted"),))
# Seed 002's modules (self_attention, mha_model_width, gqa_float_heads) take a
# causal flag alone as written, key padding and a boolean mask once corrected;
# nan_rows hides behind masked_keys_weighted.
SEED002 = dict(features=("causal", "padding", "mask"), pairs=(("nan_rows", "masked_keys_weighted"),),
               tutorial_features=("causal",))

# Low-precision runs: (dtype, u of its compute, as the module computes in it).
LOW = (("bf16", 2**-8),)


def variants(module, make_attend, bugs, features, cache=None, tutorial_features=None, pairs=(), low_fixes=()):
    """Declares `tutorial`, `corrected` and one `only_<bug>` subject per bug in
    `module`'s namespace. make_attend(fixed) returns the callable for a set of
    fixed bugs; make_attend's callable keeps its module between calls.
    tutorial_features: what the module as written takes, when less than the
    corrected one (a module without a padding or mask argument).
    pairs: (bug, the bug it hides behind): `pair_<bug>` has those two in and
    every other fixed, so that the first shows by its own law.
    `tutorial_bf16` and `corrected_bf16` run the module in bf16 throughout;
    low_fixes: (fix, the bug it hides behind) that only low precision needs,
    in corrected_bf16, with `pair_<fix>_bf16` showing it."""
    f32 = dict(tensors="torch", dtypes=["f32"], features=list(features), claims=["deterministic"], u=2**-24, exp_ulps=1)
    name = module.__name__.rsplit(".", 1)[-1]
    every = frozenset(bugs)

    def declare(label, fixed, **over):
        fn = make_attend(frozenset(fixed))
        fn.__attncheck__ = dict(f32, name=f"tutorial {name} ({label})", **over)
        if cache is not None:
            fn.__attncheck__["cache"] = cache(frozenset(fixed))
        return fn

    out = {"tutorial": declare("as written", ()), "corrected": declare("corrected", every)}
    for dt, u in LOW:
        out[f"tutorial_{dt}"] = declare(f"as written, {dt} throughout", (), dtypes=[dt], u=u)
        out[f"corrected_{dt}"] = declare(f"corrected, {dt} throughout", every | {f for f, _ in low_fixes}, dtypes=[dt],
                                         u=u)
        for fix, behind in low_fixes:
            out[f"pair_{fix}_{dt}"] = declare(f"{fix} with {behind}, {dt} throughout",
                                             (every - {behind}) | ({f for f, _ in low_fixes} - {fix}), dtypes=[dt], u=u)
    if tutorial_features is not None:
        for label in ("tutorial",) + tuple(f"tutorial_{dt}" for dt, _ in LOW):
            out[label].__attncheck__["features"] = list(tutorial_features)
    for bug in bugs:
        out["only_" + bug] = declare(f"only {bug}", every - {bug})
    for bug, behind in pairs:
        out["pair_" + bug] = declare(f"{bug} with {behind}", every - {bug, behind})
    return out


def seed000_attend(cls, repeat_heads):
    """make_attend for seed 000's MHA and MQA: cls(num_head, dimension_k,
    dimension_v, d_k, d_v, d_o, fixed) built for the case's widths, fed q, k
    and v (K/V heads repeated to the query heads first when repeat_heads, else
    as many as the case has) and called as the test script calls it,
    m(q, k, v, mask), with the script's additive mask (_seed_mask) and the
    caller's scale."""
    from ._seed_mask import additive_mask

    def make_attend(fixed):
        modules = fed_modules(lambda hq, d, dv: cls(hq, hq * d, hq * dv, d, dv, hq * dv, fixed),
                              ("fc_q", "fc_k", "fc_v"), "fc_o")

        def heads(x, hq):
            return repeat_kv(x, hq) if repeat_heads else x

        @no_grad
        def attend(q, k, v, *, scale, causal, key_len, mask, dtype):
            b, lq, hq, d = q.shape
            lk, dv = k.shape[1], v.shape[3]
            m = modules((hq, d, dv), q.reshape(b, lq, -1), heads(k, hq).reshape(b, lk, -1),
                        heads(v, hq).reshape(b, lk, -1))
            add = additive_mask(b, lq, lk, causal=causal, key_len=key_len, top_left="top_left_mask" not in fixed)
            _, out = m(m.fc_q.value, m.fc_k.value, m.fc_v.value, add, scale=scale)
            return out.view(b, lq, hq, dv)

        return attend

    return make_attend


def seed000_layers(cls, name, refuses):
    """The layer subjects of seed 000's MHA and MQA (docs/tutorials.md, "The
    layer mode"): cls(num_head, dimension_k, dimension_v, d_k, d_v, d_o) with
    its own weights, called as the test script calls it, m(q, k, v, mask)
    (000:335-341), q, k, v of their own widths and the script's additive
    (B, n_q, n_k) float mask, 0 = seen, -inf = hidden (000:323). The scale is
    the module's own 1/sqrt(d_k), the right one. Returns layer_tutorial,
    layer_only_fc_q_width and layer_corrected."""
    from ..layer import QKV, Layer

    def layer(fixed, label):
        def build(case):
            return cls(case.heads, case.width("k"), case.width("v"), case.head_dim, case.head_dim_v, case.d_out, fixed,
                       dimension_q=case.width("q"))

        def call(m, xs, visible):
            b, lq, lk = xs["q"].shape[0], xs["q"].shape[1], xs["k"].shape[1]
            add = torch.zeros(b, lq, lk)
            if visible is not None:
                add = add.masked_fill(~visible, float("-inf"))
            return m(xs["q"], xs["k"], xs["v"], add)[1]

        def weights(m):
            return {"q": m.fc_q, "k": m.fc_k, "v": m.fc_v, "o": m.fc_o}

        return Layer(build, call, weights, QKV, refuses, "any", name=f"{name} {label}")

    return {"layer_tutorial": layer(frozenset(), "as written"),
            "layer_only_fc_q_width": layer(frozenset({"nan_rows"}), "only fc_q_width"),
            "layer_corrected": layer(frozenset({"fc_q_width", "nan_rows"}), "corrected")}


def contract_visibility(b, hq, lq, lk, *, causal, key_len, mask):
    """(full, others): the contract's visibility (B, Hq, Lq, Lk), and its
    padding and mask part alone (None when the case has neither), for modules
    that build their own causal triangle."""
    full = allowed_keys(b, hq, lq, lk, causal=causal, key_len=key_len, mask=mask)
    others = None
    if key_len is not None or mask is not None:
        others = allowed_keys(b, hq, lq, lk, causal=False, key_len=key_len, mask=mask)
    return full, others


def merge_heads(x, b, l, h):
    """(B*H or (B, H), L, D) outputs back to BSHD."""
    return x.reshape(b, h, l, -1).transpose(1, 2)


def no_grad(fn):
    def run(*args, **kw):
        with torch.no_grad():
            return fn(*args, **kw)

    run.__name__ = fn.__name__
    run.__wrapped__ = fn  # the differentiable forward (attncheck.subjects.torch_backward)
    return run


def skip_masked_keys(weights, v, visible):
    """weights @ v over the keys each row sees only. A masked key is skipped,
    not multiplied by its zero weight: its K and V slots may hold NaN or inf
    (an unwritten cache page, padding), and 0 * NaN is NaN.
    weights (..., Lq, Lk), v (..., Lk, Dv), visible broadcastable to weights."""
    terms = weights.unsqueeze(-1) * v.unsqueeze(-3)
    return torch.where(visible.unsqueeze(-1), terms, torch.zeros((), dtype=terms.dtype)).sum(-2)
