#!/usr/bin/env bash
# A subject that crashes, hangs, errs or writes outside O fails the gate with
# the right verdict, within the law timeout, with the case saved, and the gate
# goes on with the next law.
# Usage: misbehaving_plugin_test.sh ATTNCHECK PLUGIN EXPECTED_TEXT [EXPECTED_KIND [MAX_LK]]
# MAX_LK: the failure must be shrunk to a case with at most this many keys.
set -u
attncheck=$1 plugin=$2 want=$3 kind=${4:-} max_lk=${5:-}
# Under AddressSanitizer a SIGSEGV would be caught by ASan's own handler and
# turned into an abort; let the plugin's segfault kill the child as it would
# without a sanitizer, so the verdict under test is the same in every build.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
timeout 300 "$attncheck" gate --subject "$plugin" --cases 40 --seed 5 --law-timeout 4 --watchdog-floor 2 --only differential --only softmax \
  --only determinism --out "$out/cases" --json "$out/gate.json" >"$out/log" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
cat "$out/log"
[ $rc -eq 1 ] || { echo "expected gate exit 1, got $rc"; exit 1; }
grep -q -- "$want" "$out/log" || { echo "expected the verdict to say: $want"; exit 1; }
# The JSON names the kind of failure as a field, not only in the message.
[ -z "$kind" ] || grep -q "\"kind\": \"$kind\"" "$out/gate.json" || { echo "expected a failure of kind $kind in the JSON"; cat "$out/gate.json"; exit 1; }
# Every selected law ran: the gate carried on after the first casualty.
selected='^(differential|softmax|determinism)\.'
[ "$(grep -cE "$selected" "$out/log")" -eq "$("$attncheck" laws | grep -cE "$selected")" ] ||
  { echo "a law is missing from the table"; exit 1; }
if [ -n "$max_lk" ]; then
  lk=$(grep -m1 "case:" "$out/log" | grep -o "[(,]lk=[0-9]*" | cut -d= -f2)
  steps=$(grep -m1 -o "[0-9]* shrink steps" "$out/log" | cut -d' ' -f1)
  [ -n "$lk" ] && [ "$lk" -le "$max_lk" ] && [ "${steps:-0}" -gt 0 ] ||
    { echo "expected a shrunk case (lk <= $max_lk, shrink steps > 0), got lk=$lk after ${steps:-0} shrink steps"; exit 1; }
fi
n=$(ls "$out/cases"/*.json 2>/dev/null | wc -l)
[ "$n" -ge 1 ] || { echo "no counterexample saved"; exit 1; }
[ $took -lt 60 ] || { echo "took $took s: the timeout did not hold"; exit 1; }
f=$(ls "$out/cases"/*.json | head -1)
timeout 60 "$attncheck" repro "$f" --subject "$plugin" --timeout 4
rrc=$?
[ $rrc -eq 1 ] || { echo "repro should exit 1 (still failing), got $rrc"; exit 1; }
echo "ok: '$want' reported, $n case(s) saved, $took s"
