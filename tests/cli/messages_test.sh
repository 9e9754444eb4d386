#!/usr/bin/env bash
# Messages that give their reason: "did you mean" for a misspelt
# flag, law and subject kind, python: among the subject kinds a failed load
# lists, one rule for --jobs (0 is the default, as --run jobs=0), and one
# combined verdict line for several subjects.
# Usage: messages_test.sh ATTNCHECK OUTDIR
set -uo pipefail
attncheck=$1 out=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$out" && mkdir -p "$out"
expect() {  # exit code, pattern, command...
  local rc=$1 pattern=$2
  shift 2
  "$@" >"$out/log" 2>&1
  local got=$?
  [ $got -eq "$rc" ] || { cat "$out/log"; fail "$*: exit $got, expected $rc"; }
  grep -qE -e "$pattern" "$out/log" || { cat "$out/log"; fail "$*: no line matching '$pattern'"; }
  echo "ok: $* -> $(grep -E -e "$pattern" "$out/log" | head -1)"
}
expect 2 "--casses \(did you mean '--cases'\?\)" "$attncheck" gate --casses 3
expect 2 "'differentail' names no law or group \(did you mean 'differential'\?\)" "$attncheck" gate --only differentail
expect 2 "cannot load 'nave'.*\(did you mean 'naive'\?\).*python:MODULE:CALLABLE" "$attncheck" gate --subject nave
expect 0 "^all 2 subjects: 2 PASS, 0 FAIL  -> PASS$" "$attncheck" gate --subject naive --subject builtin --only lse --cases 5 \
  --jobs 0 --out "$out/o"
echo "messages give their reason"
