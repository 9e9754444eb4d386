#!/usr/bin/env bash
# A broken subject must fail the laws named, each with a saved counterexample
# that holds FIELD (the part of the case the bug is about) and fails again on
# `attncheck repro`. The law tests' plugin scripts (tests/laws/*_plugin_test.sh) call it.
# Usage: caught_and_replayed.sh ATTNCHECK PLUGIN CASES SEED ONLY FIELD HEADER LAW...
#   ONLY: the --only arguments, comma-separated; "laws": each LAW
#   FIELD: an extended regex the saved case file must match
#   HEADER: an extended regex the gate's output must match, or "-"
set -u
attncheck=$1 plugin=$2 cases=$3 seed=$4 only=$5 field=$6 header=$7
shift 7
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
log="$out/gate.log"
args=()
if [ "$only" = laws ]; then
  for law in "$@"; do args+=(--only "$law"); done
else
  IFS=, read -ra groups <<<"$only"
  for g in "${groups[@]}"; do args+=(--only "$g"); done
fi
"$attncheck" gate --subject "$plugin" "${args[@]}" --cases "$cases" --seed "$seed" --out "$out/cases" >"$log" 2>&1
rc=$?
cat "$log"
[ $rc -eq 1 ] || { echo "expected gate exit 1, got $rc"; exit 1; }
[ "$header" = - ] || grep -qE "$header" "$log" || { echo "the gate's output does not match: $header"; exit 1; }
for law in "$@"; do
  grep -qE "^$law .* FAIL +[0-9]+\.[0-9]+ " "$log" || { echo "expected law $law to fail"; exit 1; }
  file=$(ls "$out/cases/$law"-*.json 2>/dev/null | head -1)
  [ -n "$file" ] || { echo "no saved case file for $law"; exit 1; }
  grep -qE "$field" "$file" || { echo "the saved case lacks $field"; exit 1; }
  "$attncheck" repro "$file" --subject "$plugin" >"$out/repro.log" 2>&1
  rrc=$?
  [ $rrc -eq 1 ] || { cat "$out/repro.log"; echo "repro of $law should fail with exit 1, got $rrc"; exit 1; }
done
echo "ok: $* caught"
