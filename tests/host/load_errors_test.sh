#!/usr/bin/env bash
# Loading a plugin: a mangled C++ entry point is named in the error with the
# extern "C" fix; a bare .so name in the current folder loads.
# Usage: load_errors_test.sh ATTNCHECK MANGLED_PLUGIN EXAMPLE_PLUGIN
set -u
attncheck=$(realpath "$1") mangled=$2 example=$(realpath "$3")
"$attncheck" gate --subject "$mangled" --cases 1 >/dev/null 2>"${TMPDIR:-/tmp}/load_errors.$$"
rc=$?
err=$(cat "${TMPDIR:-/tmp}/load_errors.$$"); rm -f "${TMPDIR:-/tmp}/load_errors.$$"
echo "$err"
[ $rc -eq 2 ] || { echo "a plugin with a mangled entry point should be refused with exit 2, got $rc"; exit 1; }
echo "$err" | grep -q '_Z[0-9]*attncheck_subject_v2' || { echo "the error does not name the mangled symbol"; exit 1; }
echo "$err" | grep -qF 'extern "C"' || { echo "the error does not say extern \"C\""; exit 1; }
# A bare file name in the current folder (dlopen alone would search the library path only).
(cd "$(dirname "$example")" && "$attncheck" gate --subject "$(basename "$example")" --cases 2 --only differential \
  --out "${TMPDIR:-/tmp}/load_errors_out.$$" >/dev/null)
rc=$?
rm -rf "${TMPDIR:-/tmp}/load_errors_out.$$"
[ $rc -eq 0 ] || { echo "a bare plugin name in the current folder should load and pass, got exit $rc"; exit 1; }
echo "ok: mangled entry point named with the fix; a bare .so name in the current folder loads"
