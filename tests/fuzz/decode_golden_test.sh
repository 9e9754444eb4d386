#!/usr/bin/env bash
# Saved fuzz inputs keep decoding to the same cases: every committed seed and
# regression input of fuzz_differential, fuzz_laws and fuzz_backward, replayed on the
# tiny-tile bundled kernel, gives the law and case line recorded in
# decoded_cases.txt (or is rejected as recorded). The case space and the
# input formats are append-only (docs/fuzz.md, "Input formats"); a change
# that moves a saved input to another case fails here.
# Usage: decode_golden_test.sh FUZZ_BUILD_DIR SOURCE_DIR [--update]
set -u
bin=$1 src=$2 update=${3:-}
golden="$src/tests/fuzz/decoded_cases.txt"
out=$(mktemp)
trap 'rm -f "$out" "$out.log"' EXIT
cd "$src" || exit 2
for h in fuzz_differential fuzz_laws fuzz_backward; do
  # A harness without saved regression inputs yet has no folder for them.
  inputs=("fuzz/corpus/$h")
  [ -d "tests/regressions/inputs/$h" ] && inputs+=("tests/regressions/inputs/$h")
  ATTNCHECK_FUZZ_SUBJECT=builtin:tiles=tiny ATTNCHECK_FUZZ=verbose=1 "$bin/$h" --allow-rejected "${inputs[@]}" >"$out.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { cat "$out.log"; echo "$h: replay exit $rc"; exit 1; }
  # One line per input: harness, file, then the law and case line, or "rejected".
  awk -v h="$h" '
    /^replay: .*bytes\)$/ { file = $2; next }
    /^replay: .*: rejected/ { print h, file, "rejected"; next }
    /^(pass|skip|fail) / { for (i = 2; i <= NF; ++i) if ($i ~ /^ATTN\(/) { print h, file, $2, $i; break } }
  ' "$out.log" >>"$out"
done
if [ "$update" = --update ]; then
  cp "$out" "$golden"
  echo "wrote $golden ($(wc -l <"$golden") inputs)"
  exit 0
fi
if ! diff -u "$golden" "$out"; then
  echo "saved fuzz inputs decode to other cases than decoded_cases.txt records (above: - recorded, + now)."
  echo "Inputs must keep their cases: keep the case space append-only. A new seed: rerun with --update."
  exit 1
fi
echo "ok: $(wc -l <"$out") saved inputs decode as recorded"
