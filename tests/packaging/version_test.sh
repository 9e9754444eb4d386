#!/usr/bin/env bash
# Usage: version_test.sh ATTNCHECK EXPECTED_LINE
# `attncheck --version` exits 0 and prints exactly the expected line.
set -uo pipefail
out=$("$1" --version)
rc=$?
[ $rc -eq 0 ] || { echo "attncheck --version exited $rc"; exit 1; }
[ "$out" = "$2" ] || { printf 'attncheck --version printed\n  %s\nexpected\n  %s\n' "$out" "$2"; exit 1; }
echo "$out"
