"""The layer mode: a whole attention module, projections included, against a
float64 oracle that applies the module's own weights (docs/tutorials.md,
"The layer mode").

A kernel gate feeds q, k and v and judges the attention arithmetic; what a
module does with its inputs before that (which input each projection reads,
the widths its Linear layers are built with, how it splits the batch, its
dropout, the mask convention its caller must meet) is out of its sight. The
layer mode calls the module as its tutorial does, with its own weights, and
judges the output.

A layer subject is a `Layer` (the module convention):

    Layer(build, call, weights, inputs, interface, mask)

- `build(case)` returns the nn.Module for a `Case` (its constructor
  arguments come from the case's heads and widths), left in whatever mode the
  tutorial leaves it (an nn.Module is built in train mode);
- `call(module, xs, visible)` calls it the tutorial's way: `xs` maps the
  input names of `inputs` to float32 tensors (B, L, width); `visible` is None
  or a bool tensor (B, Lq, Lk), True = may attend, which `call` turns into
  the module's own mask convention (or a causal flag); it returns
  (B, Lq, d_out);
- `weights(module)` maps "q", "k", "v" (and "o" where there is an output
  projection) to the module's nn.Linear layers;
- `inputs` names the inputs and which one each projection reads:
  `SELF` (one x), `CONTEXT` (x_query, x_context) or `QKV` (q, k, v);
- `interface(case)` returns None when the module can take the case, or the
  reason it cannot (one width for every input, one head, no mask argument):
  those cases are skipped with that reason, never failed;
- `mask`: "any" (a mask of any pattern), "causal" (a causal flag only) or
  None.

The oracle splits the projected Q into `heads` heads of width `head_dim`, K
and V into `kv_heads` heads (query head h reads KV head h // (heads /
kv_heads)), scales by 1/sqrt(head_dim), skips the keys a row does not see (a
row that sees none is 0), concatenates the heads and applies "o". Its bound
(`bound`) covers the rounding of the four projections and of the attention in
the module's precision; docs/tutorials.md derives it.
"""
import dataclasses
import math
import random

import torch

SELF = {"q": "x", "k": "x", "v": "x"}
CONTEXT = {"q": "x_query", "k": "x_context", "v": "x_context"}
QKV = {"q": "q", "k": "k", "v": "v"}
U = 2.0**-24  # f32
EXP_ULPS = 2.0  # torch's f32 exp on the CPU, with margin (docs/tutorials.md)


@dataclasses.dataclass(frozen=True)
class Case:
    b: int
    lq: int
    lk: int
    heads: int
    kv_heads: int
    head_dim: int
    head_dim_v: int
    widths: tuple  # ((input name, width), ...)
    d_out: int
    seed: int
    b_context: int = 0  # the context's batch when broadcast (1), else b

    def width(self, name):
        return dict(self.widths)[name]

    def text(self):
        ws = ",".join(f"{n}={w}" for n, w in self.widths)
        ctx = f",b_context={self.b_context}" if self.b_context else ""
        return (f"LAYER(b={self.b}{ctx},lq={self.lq},lk={self.lk},heads={self.heads},kv_heads={self.kv_heads},"
                f"head_dim={self.head_dim},head_dim_v={self.head_dim_v},{ws},d_out={self.d_out},seed={self.seed})")


@dataclasses.dataclass
class Layer:
    build: object
    call: object
    weights: object
    inputs: dict
    interface: object = None
    mask: object = "any"
    name: str = ""

    def refuses(self, case):
        return self.interface(case) if self.interface else None


def one_width(cite, *, kv_heads="heads", single_head=False):
    """The interface of a module built from one model width: every input and
    the output are heads * head_dim wide, one head width for q, k and v, and
    kv_heads "heads" (as many KV heads as heads), "one" (MQA) or "any".
    `cite` names the seed lines that fix it; the reason returned says which
    limit the case meets."""
    def refuses(case):
        if single_head and case.heads != 1:
            return f"one head ({cite})"
        if kv_heads == "heads" and case.kv_heads != case.heads:
            return f"as many K/V heads as query heads ({cite})"
        if kv_heads == "one" and case.kv_heads != 1:
            return f"exactly one K/V head ({cite})"
        if case.head_dim != case.head_dim_v:
            return f"one head width for q, k and v ({cite})"
        if {w for _, w in case.widths} | {case.d_out} != {case.heads * case.head_dim}:
            return f"one model width for every input and the output ({cite})"
        return None
    return refuses


class Verdict:
    def __init__(self, law, what):
        self.law, self.what = law, what
        self.verdict, self.case, self.message = "skipped", None, ""
        self.judged, self.outside = 0, {}
        self.max_ratio = 0.0  # the largest |error| / bound over the elements judged

    def row(self):
        return dict(name=self.law, verdict=self.verdict, what=self.what, judged=self.judged, max_ratio=self.max_ratio,
                    counterexample=self.case.text() if self.case else None, message=self.message,
                    outside=self.outside)


def _rng(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def make_inputs(layer, case):
    """The inputs, one tensor per distinct input name; a self-attention layer's
    single x has the query length, so Lq = Lk there."""
    g = _rng(case.seed)
    xs = {}
    for proj in ("q", "k", "v"):
        name = layer.inputs[proj]
        if name in xs:
            continue
        length = case.lq if proj == "q" else case.lk
        batch = case.b_context if (proj != "q" and case.b_context) else case.b
        xs[name] = torch.randn(batch, length, case.width(name), generator=g)
    return xs


def _linear64(x, lin):
    y = x.double() @ lin.weight.double().T
    if lin.bias is not None:
        y = y + lin.bias.double()
    return y


def _abs_linear(x_abs, lin):
    """|W| |x| + |b|: what the rounding of W x + b is relative to."""
    y = x_abs @ lin.weight.double().abs().T
    if lin.bias is not None:
        y = y + lin.bias.double().abs()
    return y


def gamma(n, u=U):
    return n * u / (1 - n * u)


def oracle(layer, module, case, xs, visible):
    """(out, bound): the float64 result with the module's weights, and the
    bound on |subject - oracle| elementwise (docs/tutorials.md derives it)."""
    lins = layer.weights(module)
    h, g, dh, dv = case.heads, case.kv_heads, case.head_dim, case.head_dim_v
    proj, delta = {}, {}
    for p in ("q", "k", "v"):
        lin, x = lins[p], xs[layer.inputs[p]]
        want = (h if p == "q" else g) * (dv if p == "v" else dh)
        if tuple(lin.weight.shape) != (want, x.shape[-1]):
            raise ValueError(f"w_{p} has shape {tuple(lin.weight.shape)}; the case needs ({want}, {x.shape[-1]})")
        if x.shape[0] != case.b:  # a context broadcast across the query batch
            x = x.expand(case.b, *x.shape[1:])
        proj[p] = _linear64(x, lin)
        delta[p] = gamma(x.shape[-1] + 1) * _abs_linear(x.double().abs(), lin)  # (1)
    b, lq, lk = case.b, case.lq, case.lk
    rep = h // g
    q = proj["q"].view(b, lq, h, dh).transpose(1, 2)
    k = proj["k"].view(b, lk, g, dh).transpose(1, 2).repeat_interleave(rep, 1)
    v = proj["v"].view(b, lk, g, dv).transpose(1, 2).repeat_interleave(rep, 1)
    dq = delta["q"].view(b, lq, h, dh).transpose(1, 2)
    dk = delta["k"].view(b, lk, g, dh).transpose(1, 2).repeat_interleave(rep, 1)
    ddv = delta["v"].view(b, lk, g, dv).transpose(1, 2).repeat_interleave(rep, 1)
    c = 1.0 / math.sqrt(dh)
    s = c * (q @ k.transpose(-1, -2))
    # (2) the score error: the inputs' errors, then the dot product, the scale
    # and the scale's own rounding in the module's precision.
    qa, ka = q.abs(), k.abs()
    eps = c * (dq @ (ka + dk).transpose(-1, -2) + qa @ dk.transpose(-1, -2)) \
        + gamma(dh + 3) * c * ((qa + dq) @ (ka + dk).transpose(-1, -2))
    seen = torch.ones(b, 1, lq, lk, dtype=torch.bool) if visible is None else visible.view(b, 1, lq, lk)
    s = s.masked_fill(~seen, float("-inf"))
    m = s.amax(-1, keepdim=True)
    any_seen = seen.any(-1, keepdim=True)
    m = torch.where(any_seen, m, torch.zeros_like(m))
    w = torch.exp(s - m)
    p = w / w.sum(-1, keepdim=True).clamp_min(1e-300)
    p = torch.where(any_seen, p, torch.zeros_like(p))
    o = p @ v
    # (3) the weights: a score off by eps_j and the max subtraction's rounding
    # (u |s_j - m| <= 2u max|s|) change weight j by a factor within
    # exp(+-2 E), E = max_j eps_j + 2u max|s|; exp (EXP_ULPS), the sum of Lk
    # terms and the division add gamma(Lk + EXP_ULPS + 2).
    smax = torch.where(seen, s.abs(), torch.zeros_like(s)).amax(-1, keepdim=True)
    e = torch.where(seen, eps, torch.zeros_like(eps)).amax(-1, keepdim=True) + 2 * U * smax
    rho = torch.exp(2 * e) * (1 + gamma(lk + int(EXP_ULPS) + 2)) - 1
    # max |v'_j| over the keys row i sees, per row and column: (B, H, Lq, Dv)
    vmax = (seen.unsqueeze(-1) * (v.abs() + ddv).unsqueeze(2)).amax(-2)
    # (4) |O' - O| <= rho max|v'| + sum_j p_j |dv_j| + gamma(Lk) (1 + rho) max|v'|
    do = (rho + gamma(lk) * (1 + rho)) * vmax + p @ ddv
    do = torch.where(any_seen, do, torch.zeros_like(do))
    o = o.transpose(1, 2).reshape(b, lq, h * dv)
    do = do.transpose(1, 2).reshape(b, lq, h * dv)
    if "o" not in lins:
        return o, do
    lo = lins["o"]
    if tuple(lo.weight.shape) != (case.d_out, h * dv):
        raise ValueError(f"w_o has shape {tuple(lo.weight.shape)}; the case needs ({case.d_out}, {h * dv})")
    out = _linear64(o, lo)
    # (5) the output projection of O' = O + dO: |W_o| |dO| + gamma(n + 1) (|W_o| |O'| + |b_o|)
    bound = do @ lo.weight.double().abs().T + gamma(h * dv + 1) * _abs_linear(o.abs() + do, lo)
    return out, bound


def _bits(t):
    return t.detach().contiguous().view(-1).float().numpy().tobytes()


RATIO = [0.0]  # the largest |error| / bound of the law being judged (reset by _judge)


def _compare(got, want, bound, case):
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    got = got.detach().double()
    err = (got - want).abs()
    ratio = torch.where(bound > 0, err / bound.clamp_min(1e-300), torch.where(err > 0, torch.inf, 0.0))
    if ratio.numel() and bool(torch.isfinite(ratio).all()):
        RATIO[0] = max(RATIO[0], float(ratio.max()))
    bad = ~(err <= bound)  # NaN fails
    if not bool(bad.any()):
        return None
    idx = tuple(int(i) for i in bad.nonzero()[0])
    return (f"out{list(idx)}: expected {float(want[idx]):.9g}, got {float(got[idx]):.9g}, |error| "
            f"{float(err[idx]):.3g}, bound {float(bound[idx]):.3g}")


def _run(layer, case, visible, fresh=None):
    torch.manual_seed(case.seed)
    module = layer.build(case) if fresh is None else fresh
    xs = make_inputs(layer, case)
    with torch.no_grad():
        got = layer.call(module, xs, visible)
        want, bound = oracle(layer, module, case, xs, visible)
    return module, xs, got, want, bound


def _visible(case, kind, g):
    """A visibility (B, Lq, Lk) every row of which sees a key ('mask'), a
    bottom-right causal one ('causal'), or one with row 0 seeing none ('empty')."""
    b, lq, lk = case.b, case.lq, case.lk
    if kind == "causal":
        i = torch.arange(lq).view(lq, 1)
        j = torch.arange(lk).view(1, lk)
        return (j <= i + (lk - lq)).expand(b, lq, lk).clone()
    vis = torch.rand(b, lq, lk, generator=g) < 0.5
    first = torch.randint(0, lk, (b, lq), generator=g)
    vis.scatter_(2, first.unsqueeze(-1), True)
    if kind == "empty":
        vis[:, 0, :] = False
    return vis


def cases(count, seed, *, context_batch=False):
    """Smallest first, so the first case that fails is the smallest drawn.
    Even cases are uniform (every input and the output d_model = heads *
    head_dim, as many KV heads as heads, head_dim_v = head_dim: what the
    single-width modules take); odd ones have distinct d_q, d_k, d_v, d_out,
    head widths and KV heads."""
    r = random.Random(seed)
    out = []
    for i in range(count):
        size = 1 + i * 6 // max(1, count)
        lq, lk = r.randint(1, 1 + size), r.randint(1, 2 + size)
        if i % 2 == 0:
            heads = r.choice([1, 2]) if size > 1 else 1
            kv, dh = heads, r.randint(1, 1 + size)
            dv, w = dh, (heads * dh,) * 3
            d_out = heads * dh
        else:
            kv = r.choice([1, 2]) if size > 1 else 1
            heads = kv * r.choice([1, 2])
            dh, dv = r.randint(1, 1 + size), r.randint(1, 1 + size)
            w = tuple(r.randint(1, 2 + 2 * size) for _ in range(3))
            d_out = r.randint(1, 2 + 2 * size)
        b = 2 if context_batch else r.randint(1, 2)
        out.append(dict(b=b, lq=lq, lk=lk, heads=heads, kv_heads=kv, head_dim=dh, head_dim_v=dv, w=w, d_out=d_out,
                        seed=r.randrange(1 << 30), b_context=1 if context_batch else 0))
    return out


def _case(layer, d):
    """Fits a drawn case to the layer's inputs: q's input takes the first width,
    k's the second, v's the third (inputs shared by projections share one)."""
    widths = {}
    for proj, w in zip(("q", "k", "v"), d["w"]):
        widths.setdefault(layer.inputs[proj], w)
    lk = d["lq"] if layer.inputs == SELF else d["lk"]  # one x: keys are the queries
    return Case(b=d["b"], lq=d["lq"], lk=lk, heads=d["heads"], kv_heads=d["kv_heads"], head_dim=d["head_dim"],
                head_dim_v=d["head_dim_v"], widths=tuple(sorted(widths.items())), d_out=d["d_out"], seed=d["seed"],
                b_context=d["b_context"])


def _judge(verdict, layer, drawn, check):
    RATIO[0] = 0.0
    for d in drawn:
        case = _case(layer, d)
        why = layer.refuses(case)
        if why:
            verdict.outside[why] = verdict.outside.get(why, 0) + 1
            continue
        try:
            problem = check(case)
        except _Outside as e:
            verdict.outside[str(e)] = verdict.outside.get(str(e), 0) + 1
            continue
        except Exception as e:  # the subject raised: a failure, as in the kernel gate
            problem = f"raised {type(e).__name__}: {' '.join(str(e).split())[:200]}"
        verdict.judged += 1
        verdict.max_ratio = RATIO[0]
        if problem:
            verdict.verdict, verdict.case, verdict.message = "fail", case, problem
            return verdict
    verdict.verdict = "pass" if verdict.judged else "skipped"
    if not verdict.judged:
        verdict.message = "every case is outside the module's interface"
    return verdict


class _Outside(Exception):
    pass


LAWS = {
    "layer.output_within_bound_of_oracle": "inputs of their own widths, Lq != Lk where there are two inputs; no mask",
    "layer.masked_keys_ignored": "a mask in the module's convention (any pattern, or causal), every row seeing a key",
    "layer.broadcast_context_matches_each_batch": "a context of batch 1 under queries of batch 2",
    "layer.deterministic_as_built": "two calls of the module as built (train mode unless it says eval): same bits",
    "layer.rows_with_no_key_give_the_bias": "a row that sees no key: attention 0, so out = b_o (contract beyond the seeds' use)",
}


def check(layer, count=60, seed=1, only=None):
    """Runs the layer laws; returns one row per law (docs/tutorials.md)."""
    rows = []
    for law, what in LAWS.items():
        if only and not any(law.startswith(o) or o in law for o in only):
            continue
        v = Verdict(law, what)
        g = _rng(seed)
        if law == "layer.output_within_bound_of_oracle":
            def run(case):
                _, _, got, want, bound = _run(layer, case, None)
                return _compare(got, want, bound, case)
            _judge(v, layer, cases(count, seed), run)
        elif law == "layer.masked_keys_ignored":
            if layer.mask is None:
                v.message = "the module takes no mask"
            else:
                def run(case):
                    kind = "causal" if layer.mask == "causal" else "mask"
                    _, _, got, want, bound = _run(layer, case, _visible(case, kind, g))
                    return _compare(got, want, bound, case)
                _judge(v, layer, cases(count, seed + 1), run)
        elif law == "layer.broadcast_context_matches_each_batch":
            if layer.inputs == SELF:
                v.message = "one input: no context to broadcast"
            else:
                def run(case):
                    try:
                        _, _, got, want, bound = _run(layer, case, None)
                    except Exception as e:  # refusing a broadcast context is allowed
                        raise _Outside(f"refuses a context of batch 1 ({type(e).__name__})") from e
                    return _compare(got, want, bound, case)
                _judge(v, layer, cases(count, seed + 2, context_batch=True), run)
        elif law == "layer.deterministic_as_built":
            def run(case):
                module, xs, got, _, _ = _run(layer, case, None)
                with torch.no_grad():
                    again = layer.call(module, xs, None)
                if _bits(got) != _bits(again):
                    diff = (got - again).abs().max()
                    return f"a second call differs (max |difference| {float(diff):.3g}; module.training={module.training})"
                return None
            _judge(v, layer, cases(count, seed + 3), run)
        elif law == "layer.rows_with_no_key_give_the_bias":
            if layer.mask != "any":
                v.message = "the module's mask cannot hide every key of a row"
            else:
                def run(case):
                    _, _, got, want, bound = _run(layer, case, _visible(case, "empty", g))
                    return _compare(got, want, bound, case)
                _judge(v, layer, cases(count, seed + 4), run)
        rows.append(v.row())
    return rows


def main(argv=None):
    import argparse
    import importlib
    import json
    ap = argparse.ArgumentParser(description="Gates a layer subject (docs/tutorials.md, 'The layer mode').")
    ap.add_argument("--subject", required=True, help="MODULE:NAME, e.g. attncheck.tutorials.seed004_mha:layer_tutorial")
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", action="append")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    mod, name = args.subject.rsplit(":", 1)
    layer = getattr(importlib.import_module(mod), name)
    # `python -m attncheck.layer` runs this file as __main__: judge with the
    # imported module, whose SELF, CONTEXT and QKV the subjects use.
    rows = importlib.import_module("attncheck.layer").check(layer, args.cases, args.seed, args.only)
    for r in rows:
        extra = f" on {r['counterexample']}: {r['message']}" if r["verdict"] == "fail" else \
            (f" ({r['message']})" if r["message"] else "")
        outside = "".join(f"; {n} cases skipped: {why}" for why, n in r["outside"].items())
        ratio = f", max |error|/bound {r['max_ratio']:.3g}" if r["judged"] and r["verdict"] == "pass" else ""
        print(f"{r['verdict'].upper():7} {r['name']} [{r['judged']} judged{ratio}{outside}]{extra}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(subject=args.subject, cases=args.cases, seed=args.seed, laws=rows), f, indent=1)
    return 1 if any(r["verdict"] == "fail" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
