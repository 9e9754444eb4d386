#!/usr/bin/env bash
# A version 4 kernel that declines part of the contract (tests/panel/panel_declining.c):
#   mode=0  passes; every law runs as many cases as it does on a kernel that
#           declines nothing (panel two_pass), and the declines are counted by
#           reason in the table, the JSON, the JUnit XML and the HTML report;
#   mode=1  the bug behind the declines (the running max starting at 0) is caught;
#   mode=2  declines everything: every law it reaches is UNJUDGED with its reasons;
#   mode=3  a decline that wrote O is a failed call (subject_error);
#   mode=4  declares its declines as static limits: the header, JSON and JUnit
#           print them, the laws that draw plain cases decline none, and the
#           gate declines far fewer cases than mode 0's (only what a law's
#           relation makes outside the limits, counted as "limit NAME");
#   mode=5  mode 1's bug behind those limits is caught;
#   --strict-declines: a decline fails the law, and so does its replay; a case
#           outside the declared limits never does;
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
# The mass law prepares every case into the kernel's reach (D <= 4, Lk >= 3072, scale 1/sqrt(D)): nothing to decline.
never_declined = {"softmax.mass_kept_on_long_peaked_rows"}
for n in ran:
    assert mine[n]["cases"] == twin[n]["cases"], (n, mine[n]["cases"], twin[n]["cases"])
    declines = sum(mine[n].get("declines", {}).values())
    assert (declines == 0) if n in never_declined else (declines > 0), (n, declines, "declines recorded")
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

gate 4 "$plugin:mode=4" --json "$out/4.json" --junit "$out/4.xml"
rc=$?
[ $rc -eq 0 ] || { cat "$out/4.txt"; fail "mode 4: gate exit $rc, expected 0"; }
grep -q "limits: D, Dv <= 64, Lk >= 2, scale positive or zero" "$out/4.txt" || { cat "$out/4.txt"; fail "mode 4: the header prints no limits"; }
grep -q '<property name="limits" value="D, Dv &lt;= 64' "$out/4.xml" || fail "mode 4: JUnit prints no limits"
python3 - "$out/0.json" "$out/4.json" <<'PY' || fail "mode 4: the JSON"
import json, sys
zero, four = (json.load(open(p)) for p in sys.argv[1:3])
assert four["declared"]["limits"] == "D, Dv <= 64, Lk >= 2, scale positive or zero", four["declared"]
total = lambda doc: sum(sum(l.get("declines", {}).values()) for l in doc["laws"])
laws = {l["name"]: l for l in four["laws"]}
for n in ("differential.output_within_bound_of_oracle", "softmax.weights_form_a_distribution", "causal.future_keys_never_change_past_outputs"):
    assert laws[n]["verdict"] == "pass" and not laws[n].get("declines"), (n, laws[n].get("declines"))
for l in four["laws"]:
    assert all(k.startswith("limit ") for k in l.get("declines", {})), (l["name"], l["declines"])
assert 4 * total(four) < total(zero), (total(four), total(zero))
print("ok: %d declines with the limits declared, %d without" % (total(four), total(zero)))
PY

gate 5 "$plugin:mode=5" --only differential
rc=$?
[ $rc -eq 1 ] || { cat "$out/5.txt"; fail "mode 5: gate exit $rc, expected 1"; }
grep -qE "^differential.output_within_bound_of_oracle .* FAIL " "$out/5.txt" || { cat "$out/5.txt"; fail "mode 5: the bug was not caught"; }

gate strict4 "$plugin:mode=4" --only independence.padding_equals_truncation --strict-declines
rc=$?
[ $rc -eq 0 ] || { cat "$out/strict4.txt"; fail "--strict-declines with limits: gate exit $rc, expected 0"; }
grep -qE "declined: limit min_lk \([0-9]+\)" "$out/strict4.txt" || { cat "$out/strict4.txt"; fail "--strict-declines with limits: no limit decline counted"; }

file=$(ls "$out"/strict-cases/*.json | head -1)
"$attncheck" repro "$file" --subject "$plugin" >"$out/repro.txt" 2>&1
rc=$?
cat "$out/repro.txt"
[ $rc -eq 3 ] || fail "repro of a declined case: exit $rc, expected 3"
grep -q "^SKIP .*the subject declined this case" "$out/repro.txt" || fail "repro of a declined case: no SKIP line"
echo "ok: declines and limits counted, replaced, reported; the bug behind them caught"
