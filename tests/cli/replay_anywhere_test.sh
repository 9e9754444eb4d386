#!/usr/bin/env bash
# The first screen's paths: a failure gated with relative paths to
# a plugin and to a Python file replays from another folder with the printed
# command, and from the saved file alone (no --subject): exit 1, still
# failing. An unwritable --html, --junit, --json or --out is one line and
# exit 2 before any law runs.
# Usage: replay_anywhere_test.sh ATTNCHECK BROKEN_PLUGIN MINIMAL_SUBJECT_PY OUTDIR
set -uo pipefail
attncheck=$1 plugin=$2 minimal=$3 out=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$out" && mkdir -p "$out/here" "$out/elsewhere"
cp "$plugin" "$out/here/libbroken.so"
# The README's minimal subject with its scale dropped: a bug on every case with a scale other than 1.
sed 's/) \* scale$/)/' "$minimal" >"$out/here/no_scale.py"
grep -q '\* scale' "$out/here/no_scale.py" && fail "could not plant the bug in $minimal"
for subject in libbroken.so python:no_scale.py:attend; do
  (cd "$out/here" && "$attncheck" gate --subject "$subject" --cases 50 --jobs 1 --only differential --only gqa \
    --out saved >gate.log 2>&1)
  rc=$?
  [ $rc -eq 1 ] || { cat "$out/here/gate.log"; fail "$subject: gate exit $rc, expected 1"; }
  replay=$(sed -n 's/^  replay:   //p' "$out/here/gate.log" | head -1)
  [ -n "$replay" ] || fail "$subject: no replay line"
  case "$replay" in /*) ;; *) fail "$subject: the replay command is not absolute: $replay" ;; esac
  (cd "$out/elsewhere" && eval "$replay" >replay.log 2>&1)
  rc=$?
  [ $rc -eq 1 ] || { cat "$out/elsewhere/replay.log"; fail "$subject: the printed replay exits $rc from another folder, expected 1"; }
  file=$(printf '%s\n' "$replay" | awk '{print $3}')
  (cd "$out/elsewhere" && "$attncheck" repro "$file" >repro.log 2>&1)
  rc=$?
  [ $rc -eq 1 ] || { cat "$out/elsewhere/repro.log"; fail "$subject: repro without --subject exits $rc from another folder, expected 1"; }
  echo "$subject: replayed from another folder, exit 1"
done
# Output paths are checked before any law runs: exit 2, one line naming the flag.
for flag in --html --junit --json --out; do
  start=$(date +%s%N)
  "$attncheck" gate --subject naive --cases 1000 "$flag" /dev/null/report >"$out/flag.log" 2>&1
  rc=$? ms=$((($(date +%s%N) - start) / 1000000))
  [ $rc -eq 2 ] || { cat "$out/flag.log"; fail "$flag /dev/null/report: exit $rc, expected 2"; }
  grep -q "^attncheck: $flag: cannot write '/dev/null/report'.*before any law runs" "$out/flag.log" ||
    { cat "$out/flag.log"; fail "$flag: no line naming the flag and the path"; }
  grep -qE '^law |^gate: ' "$out/flag.log" && fail "$flag: laws ran before the path was refused"
  echo "$flag /dev/null/report: exit 2 in $ms ms"
done
echo "replays work from any folder; unwritable outputs are refused first"
