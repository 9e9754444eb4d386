#!/usr/bin/env bash
# Replays the case files of tests/regressions/ with `attncheck repro` on the
# bundled implementation (production and tiny tiles, and the portable
# instruction set's code path): fixed ones (*.json) must
# pass (exit 0); open ones (open/*.json) are replayed and reported: one that
# passes everywhere is listed as fixed, to be moved up (README.md there). Open
# ones never fail this test: some depend on the compiler (docs/fuzz.md, D);
# out_of_domain/*.json must keep an infinite bound (repro says so).
# Usage: replay_regressions.sh ATTNCHECK REGRESSIONS_DIR
set -u
attncheck=$1 dir=$2
shopt -s nullglob
subjects=(builtin builtin:tiles=tiny builtin:simd=portable)
status=0 fixed=0 open=0
for f in "$dir"/*.json; do
  fixed=$((fixed + 1))
  for s in "${subjects[@]}"; do
    "$attncheck" repro "$f" --subject "$s" || { echo "REGRESSION: $f fails again on $s"; status=1; }
  done
done
for f in "$dir"/open/*.json; do
  open=$((open + 1))
  still=0
  for s in "${subjects[@]}"; do
    "$attncheck" repro "$f" --subject "$s" >/dev/null 2>&1
    rc=$?
    [ $rc -eq 1 ] && still=1
    [ $rc -gt 1 ] && { echo "ERROR: repro of $f exits $rc on $s"; status=1; }
  done
  if [ $still -eq 0 ]; then
    echo "fixed in this build? $f passes on every bundled subject: once fixed for good, git mv it to $dir/"
  else
    echo "open (still fails, as recorded): $f"
  fi
done
# Out of the judged domain: the bound must say +inf (overflow possible) on
# some elements, which the law leaves unjudged (repro counts them); a finite
# bound everywhere here again would be a regression.
ood=0
for f in "$dir"/out_of_domain/*.json; do
  ood=$((ood + 1))
  for s in "${subjects[@]}"; do
    if ! "$attncheck" repro "$f" --subject "$s" 2>&1 | grep -qE "[1-9][0-9]* outside the bound's domain"; then
      echo "REGRESSION: the bound of $f is finite again on $s (docs/fuzz.md, class B)"; status=1
    fi
  done
done
echo "replayed $fixed fixed, $open open and $ood out-of-domain regression case files"
exit $status
