#!/usr/bin/env bash
# Usage: version_test.sh ATTNCHECK EXPECTED_LINE
# `attncheck --version` exits 0 and prints exactly the expected line first,
# then the line naming the Python the python: subjects are built for.
set -uo pipefail
all=$("$1" --version)
rc=$?
[ $rc -eq 0 ] || { echo "attncheck --version exited $rc"; exit 1; }
out=$(head -1 <<<"$all")
grep -q "^python: " <<<"$all" || { echo "attncheck --version names no python:"; echo "$all"; exit 1; }
[ "$out" = "$2" ] || { printf 'attncheck --version printed\n  %s\nexpected\n  %s\n' "$out" "$2"; exit 1; }
echo "$all"
