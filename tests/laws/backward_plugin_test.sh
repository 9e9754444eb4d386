#!/usr/bin/env bash
# A subject with a broken backward must fail the backward laws named, and a
# saved counterexample (with its grad= recipe) must fail again on repro.
# Usage: backward_plugin_test.sh ATTNCHECK PLUGIN CASES LAW...
set -u
attncheck=$1 plugin=$2 cases=$3
shift 3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
log="$out/gate.log"
"$attncheck" gate --subject "$plugin" --only backward --cases "$cases" --seed 3 --out "$out/cases" >"$log" 2>&1
rc=$?
cat "$log"
[ $rc -eq 1 ] || { echo "expected gate exit 1, got $rc"; exit 1; }
grep -q "backward: dQ, dK, dV judged by the backward laws" "$log" || { echo "the header does not list backward as judged"; exit 1; }
for law in "$@"; do
  grep -qE "^$law .* FAIL +[0-9]+\.[0-9]+ " "$log" || { echo "expected law $law to fail"; exit 1; }
  file=$(ls "$out/cases/$law"-*.json 2>/dev/null | head -1)
  [ -n "$file" ] || { echo "no saved case file for $law"; exit 1; }
  grep -q '"grad"' "$file" || { echo "the saved case lacks its dO recipe (grad)"; exit 1; }
  "$attncheck" repro "$file" --subject "$plugin" >"$out/repro.log" 2>&1
  rrc=$?
  [ $rrc -eq 1 ] || { cat "$out/repro.log"; echo "repro of $law should fail with exit 1, got $rrc"; exit 1; }
done
echo "ok: $* caught"
