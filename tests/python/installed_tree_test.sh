#!/usr/bin/env bash
# The Python side of an installed tree: installs the build into SCRATCH/prefix,
# then, with nothing of the build or source tree on PYTHONPATH,
#  - `import attncheck` resolves to the install tree (its compiled _core too),
#    the oracle runs on numpy arrays and attncheck.gate passes a numpy kernel;
#  - the installed binary gates a python: subject through the installed bridge
#    (lib/attncheck/libattncheck_python.so).
# Usage: installed_tree_test.sh BUILD_DIR SCRATCH CMAKE PYTHON SUBJECTS_PY
set -euo pipefail
build=$1 scratch=$2 cmake=$3 python=$4 subjects=$5
rm -rf "$scratch"
mkdir -p "$scratch"
prefix=$scratch/prefix
"$cmake" --install "$build" --prefix "$prefix" >"$scratch/install.log"
for f in lib/attncheck/libattncheck_python.so lib/attncheck/python/attncheck/__init__.py; do
  [ -e "$prefix/$f" ] || { echo "missing from the install tree: $f"; exit 1; }
done
ls "$prefix"/lib/attncheck/python/attncheck/_core*.so >/dev/null

echo "== import attncheck from $prefix/lib/attncheck/python"
cd "$scratch"  # not the source tree: nothing there may be imported by accident
PYTHONPATH="$prefix/lib/attncheck/python" "$python" - "$prefix" <<'PY'
import os, sys
import numpy as np
import attncheck
from attncheck import _core
prefix = os.path.realpath(sys.argv[1])
for mod in (attncheck, _core):
    where = os.path.realpath(mod.__file__)
    assert where.startswith(prefix + os.sep), f"{mod.__name__} imported from {where}, not from {prefix}"
    print(f"{mod.__name__}: {where}")

rng = np.random.default_rng(1)
q = rng.standard_normal((1, 3, 2, 4)).astype(np.float32)
k = rng.standard_normal((1, 5, 1, 4)).astype(np.float32)
v = rng.standard_normal((1, 5, 1, 3)).astype(np.float32)
r = attncheck.oracle(q, k, v, scale=0.5, causal=True)
assert r.o.shape == (1, 3, 2, 3) and r.lse.shape == (1, 2, 3) and r.bound.shape == r.o.shape
assert np.all(np.isfinite(r.o)) and np.all(r.bound > 0)

def attend(q, k, v, *, scale, causal, key_len, mask, dtype):
    q64, k64, v64 = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    g = q64.shape[2] // k64.shape[2]
    k64, v64 = np.repeat(k64, g, axis=2), np.repeat(v64, g, axis=2)
    s = np.einsum("bihd,bjhd->bhij", q64, k64) * scale
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    o = np.einsum("bhij,bjhe->bihe", w / w.sum(axis=-1, keepdims=True), v64)
    return o.astype(np.float32)

attncheck.declare(u=2**-24, exp_ulps=1, name="installed-tree numpy kernel")(attend)
rows = attncheck.gate(attend, cases=20, seed=1, only=["differential", "gqa"])
print("attncheck.gate:", ", ".join(f"{r['law']} {r['verdict']}" for r in rows))
assert any(r["verdict"] == "pass" for r in rows)
PY

echo "== $prefix/bin/attncheck gate --subject python:...:reference"
# LD_DEBUG=files names each library the loader opens: the bridge must be the installed one.
env -u PYTHONPATH -u ATTNCHECK_PYTHON_BRIDGE LD_DEBUG=files LD_DEBUG_OUTPUT="$scratch/ld" "$prefix/bin/attncheck" gate \
  --subject "python:$subjects:reference" --only differential --cases 20 --out "$scratch/gate-out" >"$scratch/gate.log" 2>&1 ||
  { cat "$scratch/gate.log"; exit 1; }
grep '^gate:' "$scratch/gate.log"
bridges=$(cat "$scratch"/ld.* | sed -n 's/.*file=\([^ ]*libattncheck_python\.so\).*/\1/p' | sort -u)
echo "bridge loaded: $bridges"
[ "$bridges" = "$prefix/lib/attncheck/libattncheck_python.so" ] || { echo "the installed binary did not load the installed bridge"; exit 1; }
echo "python_module.imports_from_an_installed_tree: passed"
