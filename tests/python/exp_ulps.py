#!/usr/bin/env python3
"""The worst error of numpy's and torch's exp and tanh, in ulps, for docs/python.md ("Which exp_ulps").

Usage: /usr/bin/python3 tests/python/exp_ulps.py   (the interpreter attncheck --version names; about 10 s)
"""
import numpy as np, torch, sys
rng = np.random.default_rng(20261202)
def ulps(y, ref, dtype):
    ref_t = ref.astype(dtype)  # nearest in the type
    finfo = np.finfo(dtype)
    # ulp of the exact value: spacing at the rounded reference (min subnormal spacing below the normal range)
    sp = np.spacing(np.abs(ref_t)).astype(np.float64)
    sp = np.maximum(sp, float(finfo.smallest_subnormal))
    return np.abs(y.astype(np.float64) - ref) / sp
for dtype, lo, hi in ((np.float32, -103.0, 88.7), (np.float32, -20.0, 0.0), (np.float16, -17.0, 11.0)):
    x = rng.uniform(lo, hi, 2_000_000).astype(dtype)
    ref = np.exp(x.astype(np.float64))
    fin = ref < float(np.finfo(dtype).max)
    x, ref = x[fin], ref[fin]
    n = ulps(np.exp(x), ref, dtype)
    try:
        tt = f"{ulps(torch.exp(torch.from_numpy(x)).numpy(), ref, dtype).max():.3f} ulps"
    except RuntimeError as e:
        tt = f"n/a ({e})"
    print(f"{np.dtype(dtype).name} x in [{lo}, {hi}], {x.size} args: numpy {np.__version__} max {n.max():.3f} ulps, torch {torch.__version__} max {tt}")
# tanh (tanh_ulps, with the softcap): float32 against float64 np.tanh rounded to float32.
for lo, hi in ((-20.0, 20.0), (-1.0, 1.0)):
    x = rng.uniform(lo, hi, 2_000_000).astype(np.float32)
    ref = np.tanh(x.astype(np.float64))
    n = ulps(np.tanh(x), ref, np.float32)
    tt = ulps(torch.tanh(torch.from_numpy(x)).numpy(), ref, np.float32)
    print(f"tanh float32 x in [{lo}, {hi}], {x.size} args: numpy max {n.max():.3f} ulps, torch max {tt.max():.3f} ulps")
print("python", sys.version.split()[0], sys.executable)
