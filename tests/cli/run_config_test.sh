#!/usr/bin/env bash
# The run configuration as the CLI meets it: `--run` goes through the run
# codec (a flag beside it wins), the header's `run:` line and the JSON's "run"
# print the minimal string that reproduces the run, gating again with that
# string gives the same verdicts, and a bad key or value is one line naming
# it and its limit, exit 2.
# Usage: run_config_test.sh ATTNCHECK
set -u
attncheck=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$attncheck" gate --subject naive --run 'cases=7 seed=3,only=softmax' --seed 5 --json "$out/a.json" --out "$out/a" >"$out/a.log" 2>&1 ||
  { cat "$out/a.log"; fail "the gate failed"; }
grep -qx '  run: seed=5 cases=7 only=softmax' "$out/a.log" || { cat "$out/a.log"; fail "header lacks the run line"; }
run=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"])' "$out/a.json")
[ "$run" = "seed=5 cases=7 only=softmax" ] || fail "JSON run is '$run'"
"$attncheck" gate --subject naive --run "$run" --json "$out/b.json" --out "$out/b" >"$out/b.log" 2>&1 || fail "the replayed run failed"
python3 - "$out/a.json" "$out/b.json" <<'PY' || fail "the run string did not reproduce the run"
import json, sys
def strip(o):
    if isinstance(o, dict): return {k: strip(v) for k, v in o.items() if k != "seconds"}
    if isinstance(o, list): return [strip(x) for x in o]
    return o
a, b = (strip(json.load(open(p))) for p in sys.argv[1:])
sys.exit(0 if a == b else 1)
PY
# Jobs, files and progress change no verdict: never in the run string (that
# defaults are left out, down to the empty string, is run_config_test's; a
# run at the default 1000 cases cost 45 s of CI's ASan step here).
"$attncheck" gate --subject naive --cases 7 --only softmax --jobs 1 --progress-seconds 5 --json "$out/c.json" --out "$out/c" \
  >"$out/c.log" 2>&1 || fail "the run with jobs, files and progress failed"
grep -qx '  run: cases=7 only=softmax' "$out/c.log" || { cat "$out/c.log"; fail "the run line is not just cases=7 only=softmax"; }
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"])' "$out/c.json")" = "cases=7 only=softmax" ] ||
  fail "JSON run is not cases=7 only=softmax"
# Bad input: one line, exit 2.
check_bad() {
  "$attncheck" gate --subject naive --run "$1" >"$out/bad.log" 2>&1
  rc=$?
  [ $rc -eq 2 ] || { cat "$out/bad.log"; fail "--run '$1' exited $rc, not 2"; }
  [ "$(wc -l <"$out/bad.log")" -eq 1 ] || { cat "$out/bad.log"; fail "--run '$1': not one line"; }
  grep -qF -- "$2" "$out/bad.log" || { cat "$out/bad.log"; fail "--run '$1' does not say: $2"; }
}
check_bad 'cases=0' 'attncheck: --run: cases=0: cases is an integer in [1, 10000000]'
check_bad 'law_timeout=1e9' 'law_timeout=1e9: law_timeout is a number in [0.1, 86400]'
check_bad 'colour=red' "--run: unknown key 'colour' (one of: seed, cases,"
echo "ok: --run, the run line and the JSON run string"
