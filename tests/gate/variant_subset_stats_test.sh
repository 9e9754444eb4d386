#!/usr/bin/env bash
# `attncheck gate --stats` on a subject that declares two of the six score
# variants (window and softcap) prints the share and floor of each of them
# and of the pair, none of an undeclared variant, and no share below its floor.
# Usage: variant_subset_stats_test.sh ATTNCHECK OUTDIR
set -uo pipefail
attncheck=$1 out=$2
log=$("$attncheck" gate --subject python:attncheck.subjects.numpy_variants:attend_window_softcap --stats \
  --only differential.output_within_bound_of_oracle --cases 120 --jobs 2 --out "$out" 2>&1)
status=$?
shares=$(printf '%s\n' "$log" | grep -E '^ +variants? ')
printf '%s\n' "$shares"
fail() { echo "FAIL: $1 (gate exit $status)"; printf '%s\n' "$log" | tail -30; exit 1; }
[ $status -eq 0 ] || fail "the gate did not pass"
for v in window softcap window\\+softcap; do
  grep -qE "^ +variants? $v +[0-9.]+% +floor +[0-9.]+%" <<<"$shares" || fail "no share and floor for $v"
done
for v in chunk sinks alibi bias; do
  grep -qE "^ +variants? [a-z+]*$v" <<<"$shares" && fail "a share for $v, which the subject does not declare"
done
grep -q BELOW <<<"$(sed -n '/^distribution of/,$p' <<<"$log")" && fail "a share below its floor"
echo "the declared subset's shares and floors are printed and held"
