#!/usr/bin/env bash
# N shards of a campaign, merged, are the unsharded run: the same per-dtype
# histograms, counts, kept violations (with their case lines and indices),
# worst cases and largest ratio, the same printed report (all but the header
# and time lines) and the same exit code. The shards are merged in reverse
# order and one shard runs with two workers, so neither the file order nor
# the workers may matter.
# The per-feature stats (by_feature) merge the same way.
# Usage: campaign_shard_test.sh ATTNCHECK SUBJECT CASES SHARDS WANT_EXIT [FLAG...]
#   WANT_EXIT 1: the subject is broken and the run must hold violations
#   (so the violations compared are not an empty list).
#   FLAG...: more campaign flags for every run (e.g. --variants: then some
#   case must have a variant, so the per-feature rows compared are not all "none").
set -euo pipefail
attncheck=$1 subject=$2 cases=$3 shards=$4 want=$5
shift 5
flags=("$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

rc=0
"$attncheck" campaign --cases "$cases" --seed 7 --subject "$subject" "${flags[@]}" --json "$out/full.json" >"$out/full.txt" 2>/dev/null || rc=$?
[ "$rc" -eq "$want" ] || fail "the unsharded run exited $rc, want $want"
files=()
for ((i = shards - 1; i >= 0; i--)); do
  jobs=1
  [ "$i" -eq 1 ] && jobs=2
  rc=0
  "$attncheck" campaign --cases "$cases" --seed 7 --subject "$subject" "${flags[@]}" --shard "$i/$shards" --jobs "$jobs" \
    --json "$out/shard$i.json" >"$out/shard$i.txt" 2>/dev/null || rc=$?
  [ "$rc" -le 1 ] || fail "shard $i/$shards exited $rc"
  files+=("$out/shard$i.json")
done
rc=0
"$attncheck" merge "${files[@]}" --json "$out/merged.json" >"$out/merged.txt" || rc=$?
[ "$rc" -eq "$want" ] || fail "merge exited $rc, want $want"

python3 - "$out" "$cases" "$shards" "$want" "${flags[*]}" <<'EOF'
import json, sys
out, cases, shards, want, flags = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split()
full = json.load(open(f"{out}/full.json"))
merged = json.load(open(f"{out}/merged.json"))
def fail(why):
    print("FAIL:", why)
    sys.exit(1)
# Each shard ran exactly its cases k % N = i.
for i in range(shards):
    s = json.load(open(f"{out}/shard{i}.json"))
    if s["config"]["shard"] != {"index": i, "count": shards}:
        fail(f"shard {i}: config.shard is {s['config']['shard']}")
    n = len(range(i, cases, shards))
    if s["cases"] != n:
        fail(f"shard {i} ran {s['cases']} cases, want {n}")
    for t, st in s["by_type"].items():
        for v in st["violating"] + st["worst"]:
            if v["index"] % shards != i:
                fail(f"shard {i} holds case {v['index']}")
if full["config"] != merged["config"]:
    fail(f"config {merged['config']} != {full['config']}")
for table, rows in (("by_type", "per-dtype"), ("by_feature", "per-feature")):
    if full[table] != merged[table]:
        for t in sorted(set(full[table]) | set(merged[table])):
            a, b = full[table].get(t, {}), merged[table].get(t, {})
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    print(f"  [{t}] {k}: unsharded {json.dumps(a.get(k))[:300]}\n  [{t}]      merged {json.dumps(b.get(k))[:300]}")
        fail(f"the merged {rows} results differ from the unsharded run")
# Every case counts under its dtype once and under one feature at least ("none" without a variant).
if sum(st["cases"] for st in full["by_feature"].values()) < full["cases"]:
    fail("the per-feature rows hold fewer cases than the run")
if "--variants" in flags and set(full["by_feature"]) <= {"none"} and "declares no variant" not in open(f"{out}/full.txt").read():
    fail("--variants drew no variant and the report does not say why: the per-feature rows compared are all 'none'")
if full["config"].get("variants") != ("--variants" in flags):
    fail(f"config.variants is {full['config'].get('variants')}")
for k in ("cases", "violations", "histogram_edges", "histogram_bins"):
    if full[k] != merged[k]:
        fail(f"{k}: {merged[k]} != {full[k]}")
if [s["index"] for s in merged["shards"]] != list(range(shards)):
    fail(f"merged shards {merged['shards']}")
elements = sum(st["elements"] for st in full["by_type"].values())
kept = sum(len(st["violating"]) for st in full["by_type"].values())
if elements == 0:
    fail("the run judged no element: nothing was compared")
if want == 1 and kept == 0:
    fail("a failing run kept no violation: the comparison of violations is empty")
for t, st in full["by_type"].items():
    if sum(st["histogram"]) != st["elements"]:
        fail(f"[{t}] histogram sums to {sum(st['histogram'])}, {st['elements']} elements")
print(f"{shards} shards of {cases} cases merged = the unsharded run: {elements} elements, {kept} violating cases kept, "
      + ", ".join(f"{t} max ratio {st['max_ratio']} (case {st['max_ratio_index']})" for t, st in full["by_type"].items()))
EOF
# The printed report: the same from the oracle line on, but for time and file lines.
grep -v -e '^time:' -e '^results:' "$out/full.txt" | tail -n +2 >"$out/full.cut"
grep -v -e '^time:' -e '^results:' "$out/merged.txt" | tail -n +2 >"$out/merged.cut"
diff "$out/full.cut" "$out/merged.cut" || fail "the merged report differs from the unsharded one"
variants=
[[ " ${flags[*]} " == *" --variants "* ]] && variants=", variants"
grep -q "^attncheck campaign: .* $cases cases, seed 7$variants, $shards shards merged$" "$out/merged.txt" ||
  fail "the merged header does not say '$cases cases, seed 7$variants, $shards shards merged': $(head -1 "$out/merged.txt")"
# A shard of the same run without --variants (or with it) is another run: merge refuses it, naming the flag.
if [ -n "$variants" ]; then
  rc=0
  "$attncheck" campaign --cases "$cases" --seed 7 --subject "$subject" --shard "0/$shards" \
    --json "$out/other0.json" >/dev/null 2>&1 || rc=$?
  [ "$rc" -le 1 ] || fail "shard 0/$shards without --variants exited $rc"
  others=("$out/other0.json")
  for ((i = 1; i < shards; i++)); do others+=("$out/shard$i.json"); done
  rc=0
  "$attncheck" merge "${others[@]}" >"$out/mixed.txt" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || fail "merging shards with and without --variants exited $rc, want 2: $(cat "$out/mixed.txt")"
  grep -qE "variants (on|off) differs from (on|off)" "$out/mixed.txt" ||
    fail "merge does not name the variants flag: $(cat "$out/mixed.txt")"
fi
echo "PASS"
