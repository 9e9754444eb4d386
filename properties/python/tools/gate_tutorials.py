"""Gates every variant of every tutorial module and prints docs/tutorials.md's tables.

Usage (from the repository root, after the default build):
    /usr/bin/python3 properties/python/tools/gate_tutorials.py [--cases N] [--seed S] [--out DIR] [MODULE...]
    /usr/bin/python3 properties/python/tools/gate_tutorials.py --layer [--layer-cases N] [MODULE...]
Each variant runs `build/attncheck gate --subject python:attncheck.tutorials.MODULE:VARIANT`
with --json; the table shows, per variant, the verdict, the laws that fail,
and for the first of them the shrunk one-line case, why, and the replay command.
--layer runs the layer mode (attncheck.layer) on every `layer_*` subject of
each module instead and prints its table. --findings prints each module's
findings table (tutorials/_findings.py: kind, seed line, the law that catches
it alone) from the saved runs of both.
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
sys.path.insert(0, os.path.join(ROOT, "properties", "python"))
from attncheck.tutorials._findings import FINDINGS, cite  # noqa: E402
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
MODULES = ["self_attention", "mha_model_width", "gqa_float_heads", "mqa", "cached_mha", "cross_attention", "seed004_mha"]


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


LAYER_REPLAY = "PYTHONPATH=build/python /usr/bin/python3 -m attncheck.layer --subject attncheck.tutorials.{}:{} --cases {} --seed {}"


def layer_runs(name, module, out_root, cases, seed, reuse):
    """Runs the layer mode on every layer_* subject of `module`; prints its table."""
    from attncheck import layer as layer_mode
    print(f"\nLayer mode ({cases} cases per law, seed {seed}):\n")
    print("| layer variant | seed line | verdict | failing laws | first failure: case | why | cases skipped (interface) |")
    print("|---|---|---|---|---|---|---|")
    names = [n for n in vars(module) if n.startswith("layer_") and isinstance(getattr(module, n), layer_mode.Layer)]
    order = sorted(names, key=lambda n: (n != "layer_tutorial", n == "layer_corrected", n))
    for n in order:
        path = os.path.join(out_root, name, n + ".json")
        if reuse and os.path.exists(path):
            with open(path) as f:
                rows = json.load(f)["laws"]
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            rows = layer_mode.check(getattr(module, n), cases, seed)
            with open(path, "w") as f:
                json.dump(dict(subject=f"attncheck.tutorials.{name}:{n}", cases=cases, seed=seed, laws=rows), f, indent=1)
        failing = [r for r in rows if r["verdict"] == "fail"]
        passed = sum(r["verdict"] == "pass" for r in rows)
        skipped = [r for r in rows if r["verdict"] == "skipped"]
        verdict = (f"FAIL ({len(failing)} failed, {passed} passed, {len(skipped)} skipped)" if failing
                   else f"PASS ({passed} passed, {len(skipped)} skipped)")
        outside = {}
        for r in rows:
            for why, k in r["outside"].items():
                outside[why] = outside.get(why, 0) + k
        out_text = "; ".join(f"{k}: {why}" for why, k in sorted(outside.items(), key=lambda x: -x[1])) or "-"
        if not failing:
            print(f"| `{n}` | {cite(name, n)} | {verdict} | - | - | - | {cell(out_text, 400)} |")
            continue
        laws = ", ".join(f"`{r['name']}`" for r in failing)
        print(f"| `{n}` | {cite(name, n)} | {verdict} | {laws} | `{failing[0]['counterexample']}` | {cell(failing[0]['message'])} | "
              f"{cell(out_text, 400)} |", flush=True)


def findings(name, out_root, cases, seed):
    """The findings table: each item's kind and seed line, the law that catches
    it alone, its case and replay; then the module's verdict on its seed
    defects only."""
    print("\n| finding | kind | seed line | caught by (alone) | case | why | replay |")
    print("|---|---|---|---|---|---|---|")
    caught, defects, unreached = [], [], []
    for item, kind, where, how in FINDINGS[name]:
        law = case = why = replay = "-"
        if how[0] == "kernel":
            variant = how[1] if how[1].startswith(("pair_", "only_")) else "only_" + how[1]
            named = how[2] if len(how) > 2 else NAMING_LAW.get(how[1])
            out = os.path.join(out_root, name, variant)
            doc = None
            if os.path.exists(os.path.join(out, "gate.json")):
                with open(os.path.join(out, "gate.json")) as f:
                    doc = json.load(f)
            if doc is None:
                law = "not gated"
            else:
                failing = [x for x in doc["laws"] if x["verdict"] == "fail"]
                if not failing:
                    law = f"nothing alone (`{variant}` passes)"
                else:
                    pick = next((x for x in failing if x["name"] == named), failing[0])
                    law = f"`{pick['name']}` on `{variant}` (and {len(failing) - 1} more)"
                    case = f"`{pick.get('counterexample', '-')}`"
                    why = cell(pick.get("message", ""), 200)
                    saved = sorted(glob.glob(os.path.join(out, "cases", pick["name"] + "-*.json")))
                    spec = f"python:attncheck.tutorials.{name}:{variant}"
                    replay = f"`build/attncheck repro {os.path.relpath(saved[0], ROOT)} --subject '{spec}'`" if saved else "-"
        elif how[0] == "layer":
            variant = "layer_" + how[1]
            path = os.path.join(out_root, name, variant + ".json")
            if not os.path.exists(path):
                law = "layer mode not run"
            else:
                with open(path) as f:
                    doc = json.load(f)
                row = next(r for r in doc["laws"] if r["name"] == how[2])
                if row["verdict"] != "fail":
                    law = f"`{how[2]}` {row['verdict']}s on `{variant}`"
                else:
                    law = f"`{how[2]}` on `{variant}`"
                    case, why = f"`{row['counterexample']}`", cell(row["message"], 200)
                    replay = "`" + LAYER_REPLAY.format(name, variant, doc["cases"], doc["seed"]) + f" --only {how[2]}`"
        else:
            law = "out of reach: " + how[1]
        hit = case != "-"
        if kind == "seed":
            defects.append(item)
            if hit:
                caught.append(item)
            elif how[0] == "none":
                unreached.append(item)
        print(f"| {item} | {kind} | {where} | {law} | {case} | {why} | {replay} |", flush=True)
    verdict = "FAIL" if caught else "PASS on what the laws reach" if unreached else "PASS"
    missed = len(defects) - len(caught) - len(unreached)
    print(f"\nVerdict on seed defects only: **{verdict}**: of {len(defects)} seed-defect rows, {len(caught)} caught "
          f"alone by a named law, {len(unreached)} out of reach (reason in the row)"
          + (f", {missed} gated and not caught" if missed else "") + ".")


def kernel_table(name, module, args, attncheck, reuse):
    """Gates every kernel variant of `module` (or reads its gate.json); prints its table."""
    print(f"\n### {name}\n")
    print((module.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ") + "\n")
    print("| variant | seed line | verdict | failing laws | first failure: shrunk case | why | replay |")
    print("|---|---|---|---|---|---|---|")
    pairs = sorted(n for n in vars(module) if n.startswith("pair_"))
    default = ["tutorial"] + ["only_" + b for b in module.BUGS] + pairs + ["corrected", "tutorial_bf16", "corrected_bf16"]
    for variant in getattr(module, "VARIANTS", default):
        if variant in args.skip:
            continue
        spec = f"python:attncheck.tutorials.{name}:{variant}"
        out = os.path.join(args.out, name, variant)
        doc, _, _ = gate(attncheck, spec, out, args.cases, args.seed, reuse)
        failing = [law for law in doc["laws"] if law["verdict"] == "fail"]
        unjudged = [law for law in doc["laws"] if law["verdict"] == "unjudged"]
        passed = sum(law["verdict"] == "pass" for law in doc["laws"])
        skipped = sum(law["verdict"] == "skipped" for law in doc["laws"])
        counts = f"{len(failing)} failed, {passed} passed, {len(unjudged)} unjudged, {skipped} skipped"
        verdict = ("FAIL" if failing else "NOT JUDGED" if unjudged else "PASS") + f" ({counts}), {doc['seconds']:.0f} s"
        if not failing:
            why = cell("; ".join(f"`{law['name']}`: {law.get('unjudged_why', '')}" for law in unjudged), 300) or "-"
            print(f"| `{variant}` | {cite(name, variant)} | {verdict} | - | - | {why} | - |", flush=True)
            continue
        first = failing[0]
        saved = sorted(glob.glob(os.path.join(out, "cases", first["name"] + "-*.json")))
        replay = (f"`build/attncheck repro {os.path.relpath(saved[0], ROOT)} --subject '{spec}'`" if saved else "-")
        laws = ", ".join(f"`{law['name']}`" for law in failing)
        print(f"| `{variant}` | {cite(name, variant)} | {verdict} | {laws} | `{first.get('counterexample', '-')}` | "
              f"{cell(first.get('message', ''))} | {replay} |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "tutorials-out"))
    ap.add_argument("--reuse", action="store_true", help="read a variant's gate.json when it exists instead of gating again")
    ap.add_argument("--skip", action="append", default=[], help="variants not to gate (e.g. only_nan_rows)")
    ap.add_argument("--layer", action="store_true", help="run the layer mode instead of the kernel gate")
    ap.add_argument("--layer-cases", type=int, default=60)
    ap.add_argument("--findings", action="store_true", help="print the findings tables from the saved runs")
    ap.add_argument("--doc", action="store_true",
                    help="print docs/tutorials.md's tables, module by module, from the saved runs (as --reuse)")
    ap.add_argument("modules", nargs="*", default=MODULES)
    args = ap.parse_args()
    attncheck = os.path.join(ROOT, "build", "attncheck")
    for name in args.modules:
        module = importlib.import_module("attncheck.tutorials." + name)
        if args.layer:
            print(f"\n#### {name}: layer mode")
            layer_runs(name, module, args.out, args.layer_cases, args.seed, args.reuse)
        elif args.findings:
            print(f"\n#### {name}: findings")
            findings(name, args.out, args.cases, args.seed)
        elif args.doc:
            kernel_table(name, module, args, attncheck, True)
            print(f"\n#### {name}: findings")
            findings(name, args.out, args.cases, args.seed)
            print(f"\n#### {name}: layer mode")
            layer_runs(name, module, args.out, args.layer_cases, args.seed, True)
        else:
            kernel_table(name, module, args, attncheck, args.reuse)


if __name__ == "__main__":
    main()
