#!/usr/bin/env bash
# A subject with a broken paged or ragged path must fail the laws named (of
# the group GROUP: paged, page_table or ragged), and a saved counterexample
# (with its pages= or ragged form) must fail again on repro.
# Usage: paged_plugin_test.sh ATTNCHECK PLUGIN CASES GROUP LAW...
set -u
attncheck=$1 plugin=$2 cases=$3 group=$4
shift 4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
log="$out/gate.log"
"$attncheck" gate --subject "$plugin" --only "$group" --cases "$cases" --seed 3 --out "$out/cases" >"$log" 2>&1
rc=$?
cat "$log"
[ $rc -eq 1 ] || { echo "expected gate exit 1, got $rc"; exit 1; }
for law in "$@"; do
  grep -qE "^$law .* FAIL " "$log" || { echo "expected law $law to fail"; exit 1; }
  file=$(ls "$out/cases/$law"-*.json 2>/dev/null | head -1)
  [ -n "$file" ] || { echo "no saved case file for $law"; exit 1; }
  grep -q "\"$([ "$group" = ragged ] && echo ragged || echo pages)\"" "$file" || { echo "the saved case lacks its $group form"; exit 1; }
  "$attncheck" repro "$file" --subject "$plugin" >"$out/repro.log" 2>&1
  rrc=$?
  [ $rrc -eq 1 ] || { cat "$out/repro.log"; echo "repro of $law should fail with exit 1, got $rrc"; exit 1; }
done
echo "ok: $* caught"
