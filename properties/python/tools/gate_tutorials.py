"""Gates every variant of every tutorial module and prints docs/tutorials.md's tables.

Usage (from the repository root, after the default build):
    /usr/bin/python3 properties/python/tools/gate_tutorials.py [--cases N] [--seed S] [--out DIR] [MODULE...]
Each variant runs `build/attncheck gate --subject python:attncheck.tutorials.MODULE:VARIANT`
with --json; the table shows, per variant, the verdict, the laws that fail,
and for the first of them the shrunk one-line case, why, and the replay command.
"""
import argparse
import glob
import importlib
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# The law that names each bug most directly; the first failing law otherwise.
NAMING_LAW = {
    "own_scale": "scale.power_of_two_scalings_are_exact",
    "scale": "differential.output_within_bound_of_oracle",
    "square_causal": "differential.output_within_bound_of_oracle",
    "top_left_mask": "differential.output_within_bound_of_oracle",
    "nan_rows": "masked.fully_masked_rows_are_zero",
    "finfo_min": "masked.fully_masked_rows_are_zero",
    "masked_keys_weighted": "independence.masked_slots_are_ignored",
    "unshifted_causal": "cache.chunked_decode_equals_prefill",
}
MODULES = ["self_attention", "mha_model_width", "gqa_float_heads", "mqa", "cached_mha", "cross_attention"]


def gate(attncheck, spec, out, cases, seed, reuse=False):
    os.makedirs(out, exist_ok=True)
    if reuse and os.path.exists(os.path.join(out, "gate.json")):
        with open(os.path.join(out, "gate.json")) as f:
            return json.load(f), None, None
    start = time.time()
    run = subprocess.run([attncheck, "gate", "--subject", spec, "--cases", str(cases), "--seed", str(seed), "--jobs", "2",
                          "--json", os.path.join(out, "gate.json"), "--out", os.path.join(out, "cases")],
                         capture_output=True, text=True)
    took = time.time() - start
    if not os.path.exists(os.path.join(out, "gate.json")):
        raise SystemExit(f"{spec}: the gate wrote no JSON (exit {run.returncode}):\n{run.stdout}\n{run.stderr}")
    with open(os.path.join(out, "gate.json")) as f:
        return json.load(f), took, run.returncode


def cell(text, limit=160):
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bug_rows(name, module, out_root):
    """One row per bug: the law that catches it alone (only_<bug>), its shrunk case, why, replay."""
    print(f"\n| bug | caught by | shrunk case | why | replay |")
    print("|---|---|---|---|---|")
    for bug in module.BUGS:
        out = os.path.join(out_root, name, "only_" + bug)
        path = os.path.join(out, "gate.json")
        if not os.path.exists(path):
            print(f"| `{bug}` | not gated | - | - | - |")
            continue
        with open(path) as f:
            doc = json.load(f)
        failing = [law for law in doc["laws"] if law["verdict"] in ("fail", "unjudged")]
        if not failing:
            print(f"| `{bug}` | nothing alone (`only_{bug}` passes) | - | - | - |")
            continue
        law = next((x for x in failing if x["name"] == NAMING_LAW.get(bug)), failing[0])
        saved = sorted(glob.glob(os.path.join(out, "cases", law["name"] + "-*.json")))
        spec = f"python:attncheck.tutorials.{name}:only_{bug}"
        replay = f"`build/attncheck repro {os.path.relpath(saved[0], ROOT)} --subject '{spec}'`" if saved else "-"
        print(f"| `{bug}` | `{law['name']}` (and {len(failing) - 1} more) | `{law.get('counterexample', '-')}` | "
              f"{cell(law.get('message', ''), 220)} | {replay} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "tutorials-out"))
    ap.add_argument("--reuse", action="store_true", help="read a variant's gate.json when it exists instead of gating again")
    ap.add_argument("--skip", action="append", default=[], help="variants not to gate (e.g. only_nan_rows)")
    ap.add_argument("modules", nargs="*", default=MODULES)
    args = ap.parse_args()
    attncheck = os.path.join(ROOT, "build", "attncheck")
    sys.path.insert(0, os.path.join(ROOT, "properties", "python"))
    for name in args.modules:
        module = importlib.import_module("attncheck.tutorials." + name)
        print(f"\n### {name}\n")
        print((module.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ") + "\n")
        print("| variant | verdict | failing laws | first failure: shrunk case | why | replay |")
        print("|---|---|---|---|---|---|")
        for variant in ["tutorial"] + ["only_" + b for b in module.BUGS] + ["corrected"]:
            if variant in args.skip:
                continue
            spec = f"python:attncheck.tutorials.{name}:{variant}"
            out = os.path.join(args.out, name, variant)
            doc, _, _ = gate(attncheck, spec, out, args.cases, args.seed, args.reuse)
            failing = [law for law in doc["laws"] if law["verdict"] in ("fail", "unjudged")]
            passed = sum(law["verdict"] == "pass" for law in doc["laws"])
            skipped = sum(law["verdict"] == "skipped" for law in doc["laws"])
            verdict = (f"FAIL ({len(failing)} failed, {passed} passed, {skipped} skipped)" if failing
                       else f"PASS ({passed} passed, {skipped} skipped)") + f", {doc['seconds']:.0f} s"
            if not failing:
                print(f"| `{variant}` | {verdict} | - | - | - | - |", flush=True)
                continue
            first = failing[0]
            saved = sorted(glob.glob(os.path.join(out, "cases", first["name"] + "-*.json")))
            replay = (f"`build/attncheck repro {os.path.relpath(saved[0], ROOT)} --subject '{spec}'`" if saved else "-")
            laws = ", ".join(f"`{law['name']}`" for law in failing)
            print(f"| `{variant}` | {verdict} | {laws} | `{first.get('counterexample', '-')}` | "
                  f"{cell(first.get('message', first.get('unjudged_why', '')))} | {replay} |")
            sys.stdout.flush()
        bug_rows(name, module, args.out)


if __name__ == "__main__":
    main()
