#!/usr/bin/env bash
# A Python subject the gate must refuse before running any law: the gate exits
# 2 (an input error) and its message names what is wrong.
# Usage: refused_subject_test.sh ATTNCHECK SUBJECT EXPECTED_TEXT
set -u
attncheck=$1 subject=$2 want=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$attncheck" gate --subject "$subject" --cases 5 --out "$out/cases" >"$out/log" 2>&1
rc=$?
cat "$out/log"
[ $rc -ne 0 ] || { echo "expected the gate to refuse the subject, got exit 0"; exit 1; }
grep -qF -- "$want" "$out/log" || { echo "expected the message to say: $want"; exit 1; }
! grep -q "^gate:" "$out/log" || { echo "a refused subject must not reach the table"; exit 1; }
echo "ok: refused with '$want' (exit $rc)"
