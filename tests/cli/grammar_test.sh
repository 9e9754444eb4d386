#!/usr/bin/env bash
# Every subject form README.md documents in its grammar paragraph ("Subjects,
# in one grammar ...") and `attncheck gate --help` lists loads: the gate takes
# it (exit 0 or 1: it ran), never refuses it (exit 2). Placeholders become real
# subjects: build/ the build folder, MODULE:CALLABLE the test subjects' reference.
# Usage: grammar_test.sh ATTNCHECK README BUILD_DIR PYTHON_SUBJECTS
set -u
attncheck=$1 readme=$2 build=$3 subjects=$4
forms=$(sed -n '/^Subjects, in one grammar/,/^field and the limit/p' "$readme" | tr '\n' ' ' | grep -oE '`[^`]+`' | tr -d '`')
forms+=$'\n'$("$attncheck" gate --help | tr '\n' ' ' | sed -n 's/.*--subject TEXT[^:]*:\(.*\)repeatable.*/\1/p' | grep -oE '(builtin|naive)(:[a-z_]+=[a-z0-9]+(,[a-z_]+=[a-z0-9]+)*)?')
python_built=$("$attncheck" --version | grep -q '^python: /' && echo 1)
fails=0 tried=0
while read -r form; do
  case "$form" in
    builtin*|naive*) spec=$form ;;
    build/*.so*)
      spec="$build/${form#build/}"
      # Sanitizer builds leave out the mutation plugin (ci/sanitize): nothing to load there.
      [ -f "${spec%%:*}" ] || { echo "skip: $form (not built in $build)"; continue; }
      ;;
    python:MODULE:CALLABLE*)
      [ -n "$python_built" ] || continue
      spec="python:$subjects:reference"
      [[ "$form" == *"[:key=value"* ]] && spec="$spec:tensors=numpy"
      ;;
    '?') [ -n "$python_built" ] || continue; spec="python:$subjects:reference?tensors=numpy" ;;  # the older spelling
    *) continue ;;
  esac
  tried=$((tried + 1))
  timeout 120 "$attncheck" gate --subject "$spec" --cases 1 --only masked --jobs 1 --out "${TMPDIR:-/tmp}/grammar.$$" \
    >/dev/null 2>"${TMPDIR:-/tmp}/grammar.$$.err"
  rc=$?
  if [ $rc -gt 1 ]; then
    echo "FAIL: the documented form '$form' ($spec) is refused (exit $rc): $(head -1 "${TMPDIR:-/tmp}/grammar.$$.err")"
    fails=$((fails + 1))
  else
    echo "ok: $form"
  fi
done <<<"$forms"
rm -rf "${TMPDIR:-/tmp}/grammar.$$" "${TMPDIR:-/tmp}/grammar.$$.err"
echo "$tried documented forms tried, $fails refused"
[ "$tried" -ge 6 ] || { echo "found only $tried forms: the README paragraph or the help text moved"; exit 1; }
[ $fails -eq 0 ]
