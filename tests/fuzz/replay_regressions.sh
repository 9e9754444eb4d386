#!/usr/bin/env bash
# Replays every case file in tests/regressions/ on the bundled implementation
# (production and tiny tiles) with `attncheck repro`: exit 0 means fixed.
# Usage: replay_regressions.sh ATTNCHECK REGRESSIONS_DIR
set -u
attncheck=$1 dir=$2
shopt -s nullglob
files=("$dir"/*.json)
status=0
for f in "${files[@]}"; do
  for subject in builtin "builtin:q_tile=2,k_tile=3,split_keys=6"; do
    if ! "$attncheck" repro "$f" --subject "$subject"; then
      echo "REGRESSION still fails: $f on $subject"
      status=1
    fi
  done
done
echo "replayed ${#files[@]} regression case files"
exit $status
