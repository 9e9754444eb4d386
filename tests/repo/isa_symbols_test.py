#!/usr/bin/env python3
"""Only the bundled kernel uses AVX2/AVX-512, and it never lends that code to others.

Usage: isa_symbols_test.py BUILD_DIR

The project is compiled for the baseline ISA; five files switch AVX2 (two of
them AVX-512) on for code of their own (docs/build.md "Instruction set"). A function that several
object files may define (a weak symbol: a standard-library or Eigen template,
an inline helper) is kept once by the linker, from any of them: if one copy
held AVX2 instructions, a CPU without AVX2 could run into it from anywhere.
So, over every object file of impl/, reference/ and properties/:
  - kernel_avx2.cpp.o: its weak symbols hold no VEX instruction, and its own
    functions do (the switch took effect: vfmadd present);
  - kernel_avx512.cpp.o: the same, and its own functions use zmm registers
    (the AVX-512 switch took effect);
  - naive_baseline.cpp.o: VEX only in its own non-weak functions or in
    symbols that name its renamed Eigen namespace;
  - probes.cpp.o: VEX only in its own non-weak functions;
  - backward.cpp.o (the backward pass, its loops built per instruction set
    by target attributes): VEX only in its own non-weak functions, and zmm
    registers in one of them (the AVX-512 build took effect);
  - every other object: no VEX instruction at all.
"""
import json
import pathlib
import re
import subprocess
import sys

build = pathlib.Path(sys.argv[1])
# The objects this build makes now (not ones left from deleted sources).
commands = json.loads((build / "compile_commands.json").read_text())
outputs = [c.get("output") or (re.search(r" -o (\S+)", c.get("command", "")) or [None, None])[1] for c in commands]
objects = sorted(
    {build / o for o in outputs if o and o.split("/")[0] in ("impl", "reference", "properties") and (build / o).exists()}
)
if not objects:
    print(f"isa_symbols: no object files of impl/, reference/ or properties/ in {build}/compile_commands.json")
    sys.exit(1)


def functions_with_vex(obj):
    """{symbol: (is_weak, vex_count, has_vfmadd, has_zmm)} for functions holding VEX/EVEX instructions."""
    nm = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    weak = {l.split()[-1] for l in nm.splitlines() if len(l.split()) == 3 and l.split()[1] in "WVuw"}
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)], capture_output=True, text=True, check=True).stdout
    out, cur = {}, None
    for line in dis.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            cur = m.group(1)
            continue
        parts = line.split("\t")
        if cur and len(parts) >= 2:
            ins = parts[-1].strip()
            if ins.startswith("v") or "%ymm" in ins or "%zmm" in ins:
                w, n, f, z = out.get(cur, (cur in weak, 0, False, False))
                out[cur] = (w, n + 1, f or ins.startswith("vfmadd"), z or "%zmm" in ins)
    return out


def demangle(name):
    return subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()


failures = []
saw_kernel = saw_avx512 = False
for obj in objects:
    vex = functions_with_vex(obj)
    name = obj.name
    if name.startswith("kernel_avx2.cpp"):
        saw_kernel = True
        if not any(f for _, _, f, _ in vex.values()):
            failures.append(f"{obj}: no vfmadd anywhere: the AVX2 switch did not take effect")
        allowed = lambda sym, weak: not weak
    elif name.startswith("kernel_avx512.cpp"):
        saw_avx512 = True
        if not any(f for _, _, f, _ in vex.values()):
            failures.append(f"{obj}: no vfmadd anywhere: the AVX-512 switch did not take effect")
        if not any(z for _, _, _, z in vex.values()):
            failures.append(f"{obj}: no zmm register anywhere: the AVX-512 switch did not take effect")
        allowed = lambda sym, weak: not weak
    elif name.startswith("naive_baseline.cpp"):
        # A symbol that names the renamed namespace (itself or a template
        # argument from it) exists in this object only.
        allowed = lambda sym, weak: not weak or "attnimpl_bench_avx2_Eigen" in sym
    elif name.startswith("probes.cpp"):
        allowed = lambda sym, weak: not weak
    elif name.startswith("backward.cpp") and obj.parent.name == "backward":
        if not any(z and not w for w, _, _, z in vex.values()):
            failures.append(f"{obj}: no zmm register in its own functions: the AVX-512 build of the backward did not take effect")
        allowed = lambda sym, weak: not weak
    else:
        allowed = lambda sym, weak: False
    for sym, (weak, count, _, _) in vex.items():
        if not allowed(sym, weak):
            failures.append(f"{obj}: {'weak ' if weak else ''}{demangle(sym)[:160]} holds {count} VEX instructions")

if not saw_kernel:
    failures.append("kernel_avx2.cpp.o not found: is this a build of the project?")
if saw_kernel and not saw_avx512:
    failures.append("kernel_avx512.cpp.o not found: the AVX-512 build of the kernel is missing")
for f in failures:
    print(f)
print(f"isa_symbols: {len(objects)} object files, {len(failures)} problems")
sys.exit(1 if failures else 0)
