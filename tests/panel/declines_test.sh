#!/usr/bin/env bash
# A version 4 kernel that declines part of the contract (tests/panel/panel_declining.c):
#   mode=0  passes; every law runs as many cases as it does on a kernel that
#           declines nothing (panel two_pass), and the declines are counted by
#           reason in the table, the JSON, the JUnit XML and the HTML report;
#   mode=1  the bug behind the declines (the running max starting at 0) is caught;
#   mode=2  declines everything: every law it reaches is UNJUDGED with its reasons;
#   mode=3  a decline that wrote O is a failed call (subject_error);
#   --strict-declines: a decline fails the law, and so does its replay;
#   repro of a case the kernel declines: SKIP, exit 3 (never "fixed").
# Usage: declines_test.sh ATTNCHECK DECLINING_PLUGIN TWO_PASS_PLUGIN
set -u
attncheck=$1 plugin=$2 twin=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() {
  echo "declines_test: $*"
  exit 1
}
gate() {  # gate NAME SUBJECT ARGS...: the gate's exit code; its output in $out/NAME.txt
  local name=$1 subj=$2
  shift 2
  "$attncheck" gate --subject "$subj" --cases 40 --seed 1 --out "$out/$name-cases" "$@" >"$out/$name.txt" 2>&1
}

gate 0 "$plugin" --json "$out/0.json" --junit "$out/0.xml" --html "$out/0.html"
rc=$?
cat "$out/0.txt"
[ $rc -eq 0 ] || fail "mode 0: gate exit $rc, expected 0"
grep -qE "^    [0-9]+ declined: .*head size > 64 \([0-9]+\).* \(replaced by other draws\)" "$out/0.txt" ||
  fail "mode 0: no line of declines by reason under a law"
grep -qE "^gate: .*, [0-9]+ cases declined by the subject \(replaced\) in " "$out/0.txt" || fail "mode 0: the gate line counts no declines"
gate twin "$twin" --json "$out/twin.json"
python3 - "$out/0.json" "$out/twin.json" <<'PY' || fail "mode 0: the JSON"
import json, sys
mine = {l["name"]: l for l in json.load(open(sys.argv[1]))["laws"]}
twin = {l["name"]: l for l in json.load(open(sys.argv[2]))["laws"]}
ran = [n for n, l in mine.items() if l["verdict"] != "skipped"]
assert len(ran) >= 10, ran
for n in ran:
    assert mine[n]["cases"] == twin[n]["cases"], (n, mine[n]["cases"], twin[n]["cases"])
    assert sum(mine[n].get("declines", {}).values()) > 0, (n, "no declines recorded")
assert "head size > 64" in mine["differential.output_within_bound_of_oracle"]["declines"]
print("ok: %d laws ran their full budget with declines counted by reason" % len(ran))
PY
grep -q "<system-out>[0-9]* declined: " "$out/0.xml" || fail "mode 0: JUnit lists no declines"
grep -q "declined: .*replaced by other draws" "$out/0.html" || fail "mode 0: the HTML report lists no declines"

gate 1 "$plugin:mode=1"
rc=$?
[ $rc -eq 1 ] || { cat "$out/1.txt"; fail "mode 1: gate exit $rc, expected 1"; }
grep -qE "^differential.output_within_bound_of_oracle .* FAIL " "$out/1.txt" || { cat "$out/1.txt"; fail "mode 1: the bug was not caught"; }

gate 2 "$plugin:mode=2"
rc=$?
[ $rc -eq 1 ] || { cat "$out/2.txt"; fail "mode 2: gate exit $rc, expected 1"; }
grep -qE "^gate: 0 passed, 0 failed, [1-9][0-9]* unjudged" "$out/2.txt" || { cat "$out/2.txt"; fail "mode 2: not every law UNJUDGED"; }
grep -q "the subject declined too many draws .*declined: everything" "$out/2.txt" || fail "mode 2: no reason given"

gate 3 "$plugin:mode=3" --only differential
rc=$?
[ $rc -eq 1 ] || { cat "$out/3.txt"; fail "mode 3: gate exit $rc, expected 1"; }
grep -q "but wrote its outputs" "$out/3.txt" || { cat "$out/3.txt"; fail "mode 3: a declined call that wrote passed"; }

gate strict "$plugin" --only differential --strict-declines
rc=$?
[ $rc -eq 1 ] || { cat "$out/strict.txt"; fail "--strict-declines: gate exit $rc, expected 1"; }
grep -q "(--strict-declines): " "$out/strict.txt" || { cat "$out/strict.txt"; fail "--strict-declines: no decline named"; }
grep -q "flaky" "$out/strict.txt" && fail "--strict-declines: the replay of the shrunk case did not decline again"

file=$(ls "$out"/strict-cases/*.json | head -1)
"$attncheck" repro "$file" --subject "$plugin" >"$out/repro.txt" 2>&1
rc=$?
cat "$out/repro.txt"
[ $rc -eq 3 ] || fail "repro of a declined case: exit $rc, expected 3"
grep -q "^SKIP .*the subject declined this case" "$out/repro.txt" || fail "repro of a declined case: no SKIP line"
echo "ok: declines counted, replaced, reported; the bug behind them caught"
