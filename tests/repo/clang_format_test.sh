#!/usr/bin/env bash
# Every tracked C and C++ file is formatted as .clang-format says (clang-format
# --dry-run --Werror). Prints the offending places and exits 1; exits 77 (ctest:
# skipped) without clang-format or outside a git checkout.
# Reformat with: git ls-files -z '*.c' '*.h' '*.cpp' '*.hpp' | xargs -0 clang-format-14 -i
# Usage: bash tests/repo/clang_format_test.sh   (CLANG_FORMAT=... for another binary)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
cf=${CLANG_FORMAT:-/usr/bin/clang-format-14}
command -v "$cf" >/dev/null 2>&1 || { echo "skipped: $cf not found"; exit 77; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "skipped: not a git checkout"; exit 77; }
mapfile -d '' files < <(git ls-files -z '*.c' '*.h' '*.cpp' '*.hpp')
[ ${#files[@]} -gt 0 ] || { echo "no C or C++ files tracked"; exit 1; }
if "$cf" --dry-run --Werror "${files[@]}"; then
  echo "ok: ${#files[@]} files formatted as .clang-format says"
else
  echo "not formatted as .clang-format says (see above); reformat with the command in $0's header"
  exit 1
fi
