#!/usr/bin/env bash
# The realized distribution of a gate run holds every documented floor
# (docs/distribution.md): `attncheck gate --stats` must print no BELOW line.
# The contract 1.2 input-form sections are left to form_stats_test.sh, which
# runs the form laws alone at more cases: they draw a tenth of --cases, too
# few at this test's 200 for their rarest shares (the long paged decodes).
# Usage: gate_stats_test.sh ATTNCHECK OUTDIR SUBJECT [gate args...]
set -uo pipefail
attncheck=$1 out=$2 subject=$3
shift 3
log=$("$attncheck" gate --subject "$subject" --stats --out "$out" "$@" 2>&1)
status=$?
printf '%s\n' "$log" | sed -n '/^distribution of/,$p'
if ! grep -q '^distribution of' <<<"$log"; then
  echo "FAIL: no distribution printed (gate exit $status)"
  printf '%s\n' "$log" | tail -20
  exit 1
fi
dense=$(printf '%s\n' "$log" | awk '/^contract 1\.2 /{form=1; next} /^[^ ]/{form=0} !form')
if grep -q 'BELOW' <<<"$dense"; then
  echo "FAIL: a share of the distribution is below its documented floor"
  exit 1
fi
echo "every share holds its floor"
