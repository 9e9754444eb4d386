#!/usr/bin/env bash
# The input-form shares of a gate run (docs/distribution.md "Contract 1.2
# input forms"): `attncheck gate --stats` on the form laws prints the paged
# and the ragged sections for a subject declaring both, every line above its
# floor, and prints neither for a subject declaring no form.
# Usage: form_stats_test.sh ATTNCHECK OUTDIR FORM_SUBJECT DENSE_SUBJECT CASES
set -uo pipefail
attncheck=$1 out=$2 subject=$3 dense=$4 cases=$5
log=$("$attncheck" gate --subject "$subject" --only paged --only page_table --only ragged --stats --cases "$cases" \
  --out "$out" 2>&1)
forms=$(printf '%s\n' "$log" | sed -n '/^contract 1.2 paged form/,$p' | grep -E '^(contract 1.2|  )')
printf '%s\n' "$forms"
for form in paged ragged; do
  grep -qE "^contract 1.2 $form form, over the [1-9][0-9]* $form cases" <<<"$forms" ||
    { echo "FAIL: no $form section with cases"; printf '%s\n' "$log" | tail -20; exit 1; }
done
for key in "pages 1 or 3" "n = kP - 1" "stale table tail" "shared pages" "paged n = 0" "paged B>=16" \
  "ragged zero queries" "ragged zero keys"; do
  grep -q "^  $key " <<<"$forms" || { echo "FAIL: no line for $key"; exit 1; }
done
if grep -q 'BELOW' <<<"$forms"; then
  echo "FAIL: an input-form share is below its floor"
  exit 1
fi
log=$("$attncheck" gate --subject "$dense" --only paged --only ragged --stats --cases 5 --out "$out" 2>&1)
if grep -q '^contract 1.2' <<<"$log"; then
  echo "FAIL: a subject declaring no form got an input-form section"
  exit 1
fi
echo "every input-form share holds its floor"
