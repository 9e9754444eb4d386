#!/usr/bin/env bash
# A long campaign in CI mode (standard error a file, not a terminal) shows its
# progress: at least two plain lines "campaign: DONE/TOTAL cases (P%), R
# cases/s, ETA S s" with DONE rising, then the summary on standard output
# naming every case. Lines come every half second; 20,000 cases of the
# default distribution took 33 s and 57 s (two ctest runs, two workers, a
# loaded 2-core machine).
# Usage: campaign_progress_test.sh ATTNCHECK CASES
set -euo pipefail
attncheck=$1 cases=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$attncheck" campaign --cases "$cases" --jobs 2 --progress-seconds 0.5 >"$out/stdout" 2>"$out/stderr"
pattern="^campaign: [0-9]+/$cases cases \\([0-9.]+%\\), [0-9]+ cases/s, ETA [0-9]+ s$"
lines=$(grep -cE "$pattern" "$out/stderr" || true)
echo "campaign of $cases cases: $lines progress lines"
grep -E "$pattern" "$out/stderr" | sed -n '1p;$p'
[ "$lines" -ge 2 ] || { cat "$out/stderr"; echo "FAIL: fewer than 2 progress lines"; exit 1; }
# Counts never fall and stay within the total.
grep -E "$pattern" "$out/stderr" | sed -E 's/^campaign: ([0-9]+)\/.*/\1/' |
  awk -v total="$cases" '$1 < prev || $1 > total { bad = 1 } { prev = $1 } END { exit bad }' ||
  { echo "FAIL: progress counts fall or pass the total"; exit 1; }
grep -q "^attncheck campaign: .* $cases cases" "$out/stdout" || { cat "$out/stdout"; echo "FAIL: the summary does not name $cases cases"; exit 1; }
echo "PASS"
