#!/usr/bin/env python3
"""Measures the conventions and stage precisions of PyTorch's CUDA attention backends.

The gate judges a kernel on what it declares (docs/spec.md). Declaring a CUDA
backend honestly needs facts that no document states: the format P is rounded
to before P.V, what a row that sees no key gets, whether a NaN in a masked slot
reaches O, whether subnormals are flushed, which head sizes, key lengths,
scales and GQA layouts a backend takes. This script measures them directly,
with torch alone (no attncheck), against a float64 reference on the same
rounded inputs, and writes one JSON document (and a readable summary).

    python3 cuda_conventions.py [--out FILE] [--device cuda]

Each probe runs per backend (SDPA's FLASH_ATTENTION, EFFICIENT_ATTENTION,
CUDNN_ATTENTION, MATH) and per dtype (bf16, f16; f32 where the backend takes
it); a probe a backend refuses records the refusal's first line. Without a
CUDA device it runs on the CPU (MATH only), which checks the script itself.
"""

import argparse
import json
import math
import platform
import sys
import time
import traceback

import torch
import torch.nn.functional as F

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # older torch: no per-backend selection
    SDPBackend = None
    sdpa_kernel = None

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def first_line(e):
    text = str(e).strip().splitlines()
    return (type(e).__name__ + ": " + (text[0] if text else ""))[:300]


def reference(q, k, v, scale, allowed=None, lower_right=False, causal=False):
    """Naive attention in float64 on the given (already rounded) inputs; BHSD.

    Returns O and LSE; a row that sees no key gets O = 0 and LSE = -inf (the contract's defaults)."""
    q, k, v = q.double(), k.double(), v.double()
    hq, hkv = q.shape[1], k.shape[1]
    if hq != hkv:
        k = k.repeat_interleave(hq // hkv, dim=1)
        v = v.repeat_interleave(hq // hkv, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    lq, lk = s.shape[-2], s.shape[-1]
    vis = torch.ones(lq, lk, dtype=torch.bool, device=s.device)
    if causal:
        off = (lk - lq) if lower_right else 0
        vis = torch.arange(lk, device=s.device)[None, :] <= (torch.arange(lq, device=s.device)[:, None] + off)
    vis = vis.expand_as(s).clone()
    if allowed is not None:
        vis = vis & allowed.expand_as(s)
    s = s.masked_fill(~vis, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None].where(torch.isfinite(lse[..., None]), torch.zeros_like(lse[..., None])))
    p = p.masked_fill(~vis, 0.0)
    o = torch.matmul(p, v)
    o = o.where(torch.isfinite(lse)[..., None], torch.zeros_like(o))
    return o, lse


class Runner:
    def __init__(self, device, backend_name):
        self.device = device
        self.backend_name = backend_name

    def sdpa(self, q, k, v, **kw):
        if self.backend_name is None or sdpa_kernel is None:
            return F.scaled_dot_product_attention(q, k, v, **kw)
        with sdpa_kernel(getattr(SDPBackend, self.backend_name)):
            return F.scaled_dot_product_attention(q, k, v, **kw)


def rnd(shape, dtype, device, gen, scale=1.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float32, device="cpu") * scale).to(device=device, dtype=dtype)


def probe_p_precision(r, dtype, device):
    """P's rounding before P.V, seen through cancellation: V = +-1 with random signs makes O small while
    sum_j P_j |V_j| = 1, so |O - O_ref| is the accumulation's own error, not the output rounding's.
    Reported as log2 of the worst error over rows, per key length: about -8 for P in bf16, -11 for f16,
    -20 or below for P in f32."""
    out = {}
    gen = torch.Generator().manual_seed(11)
    for lk in (256, 4096, 32768):
        b, h, lq, d = 1, 2, 16, 64
        q = rnd((b, h, lq, d), dtype, device, gen, 0.5)
        k = rnd((b, h, lk, d), dtype, device, gen, 0.5)
        signs = torch.randint(0, 2, (b, h, lk, d), generator=gen).float() * 2 - 1
        v = signs.to(device=device, dtype=dtype)
        scale = 1.0 / math.sqrt(d)
        try:
            o = r.sdpa(q, k, v, scale=scale).double()
            ref, _ = reference(q, k, v, scale)
            err = (o - ref).abs().max().item()
            out[str(lk)] = {"log2_err": (math.log2(err) if err > 0 else None),
                            "max_abs_err": err, "max_abs_o": ref.abs().max().item()}
        except Exception as e:
            out[str(lk)] = {"refused": first_line(e)}
    return out


def probe_mass(r, dtype, device):
    """V = 1: O must be 1 within the output rounding; a row sum taken on other weights than P.V shows here."""
    gen = torch.Generator().manual_seed(12)
    out = {}
    for lk in (4096, 32768):
        q = rnd((1, 1, 8, 64), dtype, device, gen, 2.0)
        k = rnd((1, 1, lk, 64), dtype, device, gen, 2.0)
        v = torch.ones((1, 1, lk, 64), dtype=dtype, device=device)
        try:
            o = r.sdpa(q, k, v, scale=1.0).double()
            out[str(lk)] = {"max_abs_dev_from_1": (o - 1).abs().max().item()}
        except Exception as e:
            out[str(lk)] = {"refused": first_line(e)}
    return out


def probe_empty_row(r, dtype, device):
    """A row that sees no key: through a boolean mask with an all-False row, and through bottom-right causal
    with Lq > Lk (rows i < Lq - Lk see nothing)."""
    gen = torch.Generator().manual_seed(13)
    res = {}
    q = rnd((1, 2, 4, 32), dtype, device, gen)
    k = rnd((1, 2, 6, 32), dtype, device, gen)
    v = rnd((1, 2, 6, 32), dtype, device, gen)
    mask = torch.ones((1, 1, 4, 6), dtype=torch.bool, device=device)
    mask[..., 1, :] = False
    try:
        o = r.sdpa(q, k, v, attn_mask=mask).float()
        row = o[0, 0, 1]
        res["bool_mask_row"] = {"nan": bool(torch.isnan(row).any()), "max_abs": float(row.abs().nan_to_num(0).max())}
    except Exception as e:
        res["bool_mask_row"] = {"refused": first_line(e)}
    try:
        from torch.nn.attention.bias import causal_lower_right
        q2 = rnd((1, 2, 6, 32), dtype, device, gen)
        k2 = rnd((1, 2, 3, 32), dtype, device, gen)
        v2 = rnd((1, 2, 3, 32), dtype, device, gen)
        o = r.sdpa(q2, k2, v2, attn_mask=causal_lower_right(6, 3)).float()
        rows = o[0, :, :3]
        res["lower_right_rows"] = {"nan": bool(torch.isnan(rows).any()),
                                   "max_abs": float(rows.abs().nan_to_num(0).max())}
    except Exception as e:
        res["lower_right_rows"] = {"refused": first_line(e)}
    return res


def probe_lse(dtype, device):
    """The LSE the private ops return for a visible row and for a row that sees no key, per backend."""
    gen = torch.Generator().manual_seed(14)
    res = {}
    # Lq = 12 > Lk = 8 under bottom-right causal: rows 0..3 see no key. Lk = 8 keeps the bias aligned.
    q = rnd((1, 2, 12, 64), dtype, device, gen)
    k = rnd((1, 2, 8, 64), dtype, device, gen)
    v = rnd((1, 2, 8, 64), dtype, device, gen)
    scale = 0.125
    _, ref_lse = reference(q, k, v, scale, causal=True, lower_right=True)
    ops = torch.ops.aten
    # The same visibility as an additive bias (EFFICIENT and CUDNN take one).
    vis = torch.arange(8, device=device)[None, :] <= (torch.arange(12, device=device)[:, None] - 4)
    bias = torch.zeros((1, 2, 12, 8), dtype=dtype, device=device).masked_fill(~vis, float("-inf"))

    def judge(lse):
        lse = lse.float()[..., :ref_lse.shape[-1]]  # some backends pad the query dimension
        vis_rows = torch.isfinite(ref_lse)
        out = {"shape": list(lse.shape)}
        if lse.shape == ref_lse.shape:
            out["visible_max_abs_err"] = float((lse.double() - ref_lse).abs()[vis_rows].max())
            out["empty_row_values"] = sorted({str(float(x)) for x in lse[~vis_rows].flatten().tolist()})
        return out

    tries = {
        "EFFICIENT_ATTENTION": lambda: ops._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, False,
                                                                                   scale=scale)[1],
        "CUDNN_ATTENTION": lambda: ops._scaled_dot_product_cudnn_attention(q, k, v, bias, True, 0.0, False, False,
                                                                           scale=scale)[1],
        # FLASH takes no bias: its causal is top-left, so no row is empty; a visible-row check only.
        "FLASH_ATTENTION": lambda: ops._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False, scale=scale)[1],
        # The flash kernel's own causal with Lq > Lk: bottom-right if rows 0..3 come back empty.
        "FLASH_ATTENTION_causal": lambda: ops._scaled_dot_product_flash_attention(q, k, v, 0.0, True, False,
                                                                                  scale=scale)[1],
    }
    for name, fn in tries.items():
        try:
            lse = fn()
            if name == "FLASH_ATTENTION":
                _, ref_full = reference(q, k, v, scale)
                lse = lse.double()[..., :ref_full.shape[-1]]
                res[name] = {"shape": list(lse.shape), "visible_max_abs_err": float((lse - ref_full).abs().max())}
            else:
                res[name] = judge(lse)
        except Exception as e:
            res[name] = {"refused": first_line(e)}
    return res


def probe_masked_nan(r, dtype, device):
    """NaN in K and V at keys the mask hides (top-left causal; key j > 0 for row 0; and a boolean mask)."""
    gen = torch.Generator().manual_seed(15)
    res = {}
    q = rnd((1, 1, 4, 32), dtype, device, gen)
    k = rnd((1, 1, 4, 32), dtype, device, gen)
    v = rnd((1, 1, 4, 32), dtype, device, gen)
    k[..., 3, :] = float("nan")
    v[..., 3, :] = float("nan")
    try:
        o = r.sdpa(q, k, v, is_causal=True).float()
        res["causal"] = {"nan_rows": [i for i in range(3) if bool(torch.isnan(o[0, 0, i]).any())]}
    except Exception as e:
        res["causal"] = {"refused": first_line(e)}
    mask = torch.ones((1, 1, 4, 4), dtype=torch.bool, device=device)
    mask[..., 3] = False
    try:
        o = r.sdpa(q, k, v, attn_mask=mask).float()
        res["bool_mask"] = {"nan_rows": [i for i in range(4) if bool(torch.isnan(o[0, 0, i]).any())]}
    except Exception as e:
        res["bool_mask"] = {"refused": first_line(e)}
    return res


def probe_subnormal(r, dtype, device):
    """Q = 0 makes O the mean of V: with V subnormal in the dtype, does O keep it or flush it to 0?"""
    res = {}
    tiny = torch.finfo(dtype).tiny  # smallest normal
    for name, val in (("subnormal_half", tiny / 2), ("subnormal_min", tiny * torch.finfo(dtype).eps)):
        q = torch.zeros((1, 1, 2, 32), dtype=dtype, device=device)
        k = torch.zeros((1, 1, 4, 32), dtype=dtype, device=device)
        v = torch.full((1, 1, 4, 32), val, dtype=dtype, device=device)
        try:
            o = r.sdpa(q, k, v).double()
            exact = v[0, 0, 0, 0].double().item()
            res[name] = {"input": exact, "output": o[0, 0, 0, 0].item(), "flushed": bool(o[0, 0, 0, 0].item() == 0)}
        except Exception as e:
            res[name] = {"refused": first_line(e)}
    return res


def probe_limits(r, dtype, device):
    """Which shapes, scales and layouts a backend takes, and whether what it returns is right there."""
    gen = torch.Generator().manual_seed(16)
    res = {}

    def check(tag, q, k, v, **kw):
        try:
            o = r.sdpa(q, k, v, **kw).double()
            scale = kw.get("scale", 1.0 / math.sqrt(q.shape[-1]))
            ref, _ = reference(q, k, v, scale, causal=kw.get("is_causal", False))
            err = (o - ref).abs().max().item()
            res[tag] = {"ok": True, "nan": bool(torch.isnan(o).any()), "max_abs_err": err,
                        "max_abs_o": ref.abs().max().item()}
        except Exception as e:
            res[tag] = {"refused": first_line(e)}

    for d in (64, 128, 192, 256, 257, 512):
        check("head_size_%d" % d, rnd((1, 2, 8, d), dtype, device, gen), rnd((1, 2, 8, d), dtype, device, gen),
              rnd((1, 2, 8, d), dtype, device, gen))
    check("lk_1", rnd((1, 2, 8, 64), dtype, device, gen), rnd((1, 2, 1, 64), dtype, device, gen),
          rnd((1, 2, 1, 64), dtype, device, gen))
    for s in (-0.5, -1.0, 0.0):
        check("scale_%g" % s, rnd((1, 2, 7, 64), dtype, device, gen), rnd((1, 2, 7, 64), dtype, device, gen),
              rnd((1, 2, 7, 64), dtype, device, gen), scale=s)
    try:
        q = rnd((1, 8, 8, 64), dtype, device, gen)
        k = rnd((1, 2, 8, 64), dtype, device, gen)
        v = rnd((1, 2, 8, 64), dtype, device, gen)
        o = r.sdpa(q, k, v, enable_gqa=True).double()
        ref, _ = reference(q, k, v, 0.125)
        res["gqa"] = {"ok": True, "max_abs_err": (o - ref).abs().max().item()}
    except Exception as e:
        res["gqa"] = {"refused": first_line(e)}
    # dv != d
    check("dv_ne_d", rnd((1, 2, 8, 64), dtype, device, gen), rnd((1, 2, 8, 64), dtype, device, gen),
          rnd((1, 2, 8, 32), dtype, device, gen))
    # A non-contiguous (BSHD viewed as BHSD) layout.
    qb = rnd((1, 8, 2, 64), dtype, device, gen).transpose(1, 2)
    kb = rnd((1, 8, 2, 64), dtype, device, gen).transpose(1, 2)
    vb = rnd((1, 8, 2, 64), dtype, device, gen).transpose(1, 2)
    check("bshd_strides", qb, kb, vb)
    check("causal_lq_gt_lk", rnd((1, 2, 9, 64), dtype, device, gen), rnd((1, 2, 4, 64), dtype, device, gen),
          rnd((1, 2, 4, 64), dtype, device, gen), is_causal=True)
    return res


def probe_scale_split(r, device):
    """The scale law's case: Q * 2 with scale / 2 against Q with scale, f32, bits compared."""
    q = torch.tensor([[[[0.75]]]], dtype=torch.float32, device=device)
    k = torch.tensor([[[[0.5], [-1.25]]]], dtype=torch.float32, device=device)
    v = torch.tensor([[[[0.375], [-1.0]]]], dtype=torch.float32, device=device)
    try:
        a = r.sdpa(q, k, v, scale=0.3)
        b = r.sdpa(q * 2, k, v, scale=0.15)
        return {"bits_equal": bool(torch.equal(a, b)), "a": a.flatten().tolist(), "b": b.flatten().tolist()}
    except Exception as e:
        return {"refused": first_line(e)}


def probe_flex(device):
    """FlexAttention: available, and its first compile's time with a softcap score_mod."""
    try:
        from torch.nn.attention.flex_attention import flex_attention
    except Exception as e:
        return {"refused": first_line(e)}
    gen = torch.Generator().manual_seed(17)
    q = rnd((1, 2, 128, 64), torch.bfloat16, device, gen)
    k = rnd((1, 2, 128, 64), torch.bfloat16, device, gen)
    v = rnd((1, 2, 128, 64), torch.bfloat16, device, gen)

    def softcap(score, b, h, i, j):
        return 30.0 * torch.tanh(score / 30.0)

    try:
        fa = torch.compile(flex_attention)
        t0 = time.time()
        o = fa(q, k, v, score_mod=softcap)
        torch.cuda.synchronize() if device == "cuda" else None
        first = time.time() - t0
        t0 = time.time()
        o = fa(q, k, v, score_mod=softcap)
        torch.cuda.synchronize() if device == "cuda" else None
        second = time.time() - t0
        s = torch.matmul(q.double(), k.double().transpose(-1, -2)) * 0.125
        s = 30.0 * torch.tanh(s / 30.0)
        ref = torch.matmul(torch.softmax(s, -1), v.double())
        return {"first_call_s": first, "second_call_s": second, "max_abs_err": (o.double() - ref).abs().max().item()}
    except Exception as e:
        return {"refused": first_line(e)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="cuda_conventions.json")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = args.device
    env = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "python": platform.python_version(),
           "torch": torch.__version__, "cuda": torch.version.cuda, "device": device}
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        env["cudnn"] = torch.backends.cudnn.version()
        try:
            import subprocess
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception as e:
            env["driver"] = first_line(e)
    backends = ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"] if device == "cuda" else ["MATH"]
    doc = {"environment": env, "backends": {}}
    for be in backends:
        r = Runner(device, be)
        per = {}
        for tname in ("bf16", "f16", "f32"):
            dt = DTYPES[tname]
            t0 = time.time()
            entry = {}
            for pname, fn in (("p_precision", probe_p_precision), ("mass", probe_mass), ("empty_row", probe_empty_row),
                              ("masked_nan", probe_masked_nan), ("subnormal", probe_subnormal),
                              ("limits", probe_limits)):
                try:
                    entry[pname] = fn(r, dt, device)
                except Exception as e:
                    entry[pname] = {"error": first_line(e), "trace": traceback.format_exc()[-800:]}
            entry["seconds"] = round(time.time() - t0, 2)
            per[tname] = entry
            print("%s %s: %.1f s" % (be, tname, entry["seconds"]), flush=True)
        per["scale_split_f32"] = probe_scale_split(r, device)
        doc["backends"][be] = per
    for tname in ("bf16", "f16"):
        try:
            doc.setdefault("lse_private_ops", {})[tname] = probe_lse(DTYPES[tname], device)
        except Exception as e:
            doc.setdefault("lse_private_ops", {})[tname] = {"error": first_line(e)}
    doc["flex_attention"] = probe_flex(device)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    print(json.dumps(doc, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
