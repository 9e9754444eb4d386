#!/usr/bin/env bash
# The gate's probabilistic verdict in every output (docs/bound.md, "The
# probabilistic bound"): the confidence in the header, the prob column, the
# judged shares, the JSON fields and the JUnit properties; the f16 mutant
# fails it (FAIL(prob), exit 1), the correct f16 subject passes it.
# Usage: prob_gate_test.sh ATTNCHECK F16_PLUGIN OUTDIR
set -uo pipefail
attncheck=$1 plugin=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
run() {  # name, subject: the differential law, 40 cases, seed 1
  "$attncheck" gate --subject "$2" --cases 40 --seed 1 --only differential --jobs 1 --out "$out/$1" \
    --json "$out/$1.json" --junit "$out/$1.xml" > "$out/$1.txt" 2>&1
}
run good "$plugin"
good=$?
run mutant "$plugin:skip_rescale=1"
mutant=$?
grep -q 'failure probability <= 2^-40 per element' "$out/good.txt" || fail "no confidence in the header"
grep -qE '^law .* prob$' "$out/good.txt" || fail "no prob column"
grep -qE '^differential\.output_within_bound_of_oracle .* pass +[0-9.]+ +pass$' "$out/good.txt" || fail "correct subject: not pass/pass"
grep -qE 'f16  sound .*%  prob .*%  unjudged .*%  of [0-9]+' "$out/good.txt" || fail "no judged shares"
[ "$good" = 0 ] || fail "correct subject: gate exit $good"
grep -q '"probabilistic": {' "$out/good.json" || fail "no probabilistic field in the JSON"
grep -q '"failure_per_element"' "$out/good.json" || fail "no confidence in the JSON"
grep -q '"sound_finite"' "$out/good.json" || fail "no judged_elements in the JSON"
grep -q 'name="probabilistic_confidence"' "$out/good.xml" || fail "no JUnit confidence"
grep -q '<property name="probabilistic_verdict" value="pass"/>' "$out/good.xml" || fail "no JUnit prob verdict"
grep -qE '^differential\.output_within_bound_of_oracle .*FAIL\(prob\)$' "$out/mutant.txt" || fail "mutant: no FAIL(prob)"
grep -q 'FAIL(prob)  -> FAIL' "$out/mutant.txt" || fail "mutant: the gate line does not count FAIL(prob)"
grep -q '<property name="probabilistic_verdict" value="fail"/>' "$out/mutant.xml" || fail "mutant: JUnit prob verdict not fail"
grep -q 'type="probabilistic"' "$out/mutant.xml" || fail "mutant: no probabilistic JUnit failure"
[ "$mutant" = 1 ] || fail "mutant: gate exit $mutant"
echo "probabilistic verdict in the table, JSON and JUnit; mutant FAIL(prob), correct pass"
