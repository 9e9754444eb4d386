#!/usr/bin/env bash
# The gate's probabilistic verdict in every output (docs/bound.md, "The
# probabilistic bound"): the confidence in the header, the prob column, the
# judged shares, the JSON fields and the JUnit properties; the f16 mutant
# fails it (FAIL(prob)): reported, gating only with --prob-fails-gate (the
# verdict is not a proof); the correct f16 subject passes it.
# Usage: prob_gate_test.sh ATTNCHECK F16_PLUGIN OUTDIR
set -uo pipefail
attncheck=$1 plugin=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
run() {  # name, subject, gate options...: the differential law, 40 cases, seed 1
  local name=$1 subject=$2
  shift 2
  "$attncheck" gate --subject "$subject" --cases 40 --seed 1 --only differential --jobs 1 --out "$out/$name" \
    --json "$out/$name.json" --junit "$out/$name.xml" "$@" > "$out/$name.txt" 2>&1
}
run good "$plugin"
good=$?
run mutant "$plugin:skip_rescale=1"
mutant=$?
run gating "$plugin:skip_rescale=1" --prob-fails-gate
gating=$?
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
# The mutant fails the sound verdict too on these cases (its shrunk case has a
# finite sound bound), so its exit is 1 either way; the FAIL(prob) is told,
# and it is a JUnit failure only under --prob-fails-gate.
grep -q 'FAIL(prob) (probabilistic: reported, not gating)  -> FAIL' "$out/mutant.txt" || fail "mutant: the gate line does not report FAIL(prob)"
grep -q '<property name="probabilistic_verdict" value="fail"/>' "$out/mutant.xml" || fail "mutant: JUnit prob verdict not fail"
grep -q 'FAIL(prob), reported, not gating' "$out/mutant.xml" || fail "mutant: JUnit does not tell the FAIL(prob)"
grep -q 'type="probabilistic"' "$out/mutant.xml" && fail "mutant: a non-gating FAIL(prob) is a JUnit failure"
[ "$mutant" = 1 ] || fail "mutant: gate exit $mutant"
grep -q '1 FAIL(prob)  -> FAIL' "$out/gating.txt" || fail "--prob-fails-gate: the gate line does not count FAIL(prob)"
grep -q 'a FAIL(prob) fails the gate (--prob-fails-gate)' "$out/gating.txt" || fail "--prob-fails-gate: not in the header"
[ "$gating" = 1 ] || fail "--prob-fails-gate: gate exit $gating"
echo "probabilistic verdict in the table, JSON and JUnit; mutant FAIL(prob), correct pass"
