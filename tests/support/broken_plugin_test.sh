#!/usr/bin/env bash
# A broken plugin (one MUTANTS.md bug) must fail the gate with the right law,
# a small shrunk counterexample, a saved case file that repro fails on.
# Usage: broken_plugin_test.sh ATTNCHECK PLUGIN LAW MAX_HQ MAX_LQ MAX_LK [GATE OPTION...]
# The options go to both gates (`--only LAW` for a mutant whose class the
# full gate already shows elsewhere: its other failing laws would only shrink).
set -u
attncheck=$1 plugin=$2 law=$3 max_hq=$4 max_lq=$5 max_lk=$6
shift 6
extra=("$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
log="$out/gate.log"
"$attncheck" gate --subject "$plugin" --cases 100 --seed 3 --out "$out/cases" --junit "$out/gate.xml" "${extra[@]}" >"$log" 2>&1
rc=$?
cat "$log"
[ $rc -eq 1 ] || { echo "expected gate exit 1, got $rc"; exit 1; }
grep -qE "^$law .* FAIL +[0-9]+\.[0-9]+ " "$log" || { echo "expected law $law to fail"; exit 1; }
# One bug, one screen: at most 20 lines (the header, one failure screen, the
# table's heading, the gate line, the judged-elements block) and 2 per failing
# law (its table row and its "also FAIL" line). Not counted: progress lines (printed
# only when a run is slow) and the probabilistic verdict's own lines (its terms
# in the header and each FAIL(prob) with its case), another finding; the table's
# rows of passing laws and the one line that folds the laws of features the
# subject does not declare (both grow with the catalogue of laws, not with the bug).
# The report starts at the header; the subject's own stderr (a Python warning) comes before it.
failed=$(grep -cE "^[a-z_]+\.[a-z_]+ .* FAIL +[0-9]+\.[0-9]+ " "$log")
lines=$(sed -n '/^attncheck gate: /,$p' "$log" | grep -cvE '^gate: [0-9]+/[0-9]+ cases|^  probabilistic bound|^    FAIL\(prob\): |^      on ATTN|^skipped, a feature the subject does not declare: |^[a-z_0-9]+\.[a-z_0-9]+ +[0-9]+/[0-9]+ .* pass ')
most=$((20 + 2 * failed))
echo "$failed laws failed; the report has $lines lines (at most $most)"
[ "$failed" -le 1 ] || [ "$lines" -le "$most" ] || { echo "$failed failing laws printed $lines lines (at most $most)"; exit 1; }
[ "$failed" -le 1 ] || [ "$(grep -c '^FAIL ' "$log")" -eq 1 ] || { echo "more than one full failure screen"; exit 1; }
grep -q "rapidcheck:" "$log" && { echo "the rapidcheck line belongs to the saved file and --verbose"; exit 1; }
grep -q "failures=\"[1-9]" "$out/gate.xml" || { echo "JUnit XML records no failure"; exit 1; }
file=$(ls "$out/cases/$law"-*.json 2>/dev/null | head -1)
[ -n "$file" ] || { echo "no saved case file for $law"; exit 1; }
grep -q "rapidcheck: RC_PARAMS=" "$file" || { echo "the saved file lacks the rapidcheck reproduce string"; exit 1; }
# The shrunk case is small: parse hq, lq, lk from its one-line form (the saved file's "line").
line=$(grep '"line"' "$file" | head -1)
echo "shrunk: $line"
field() { echo "$line" | grep -o "[(,]$1=[0-9]*" | head -1 | cut -d= -f2; }
hq=$(field hq) lq=$(field lq) lk=$(field lk)
[ "$hq" -le "$max_hq" ] && [ "$lq" -le "$max_lq" ] && [ "$lk" -le "$max_lk" ] ||
  { echo "counterexample larger than expected: hq=$hq lq=$lq lk=$lk (max $max_hq $max_lq $max_lk)"; exit 1; }
"$attncheck" repro "$file" --subject "$plugin"
rrc=$?
[ $rrc -eq 1 ] || { echo "repro should fail with exit 1 while the bug is there, got $rrc"; exit 1; }
# Without --subject, repro replays the subject the file records: the plugin, so it fails again.
grep -qF "\"subject\": \"$plugin\"" "$file" || { echo "the saved file does not record the plugin's path"; grep subject "$file"; exit 1; }
"$attncheck" repro "$file" >"$out/repro-saved.log" 2>&1
rrc=$?
cat "$out/repro-saved.log"
[ $rrc -eq 1 ] || { echo "repro without --subject should replay the recorded plugin and fail (exit 1), got $rrc"; exit 1; }
grep -qF "replaying on $plugin, the subject" "$out/repro-saved.log" || { echo "repro does not say which subject it replays"; exit 1; }
# A recorded subject that cannot be loaded is refused with one clear line (exit 2), never replaced by another.
sed "s|\"subject\": \"[^\"]*\"|\"subject\": \"$out/gone.so\"|" "$file" >"$out/gone.json"
"$attncheck" repro "$out/gone.json" >"$out/gone.log" 2>&1
grc=$?
[ $grc -eq 2 ] && grep -qF "the subject $out/gone.json records" "$out/gone.log" ||
  { echo "repro of a file whose subject cannot load should exit 2 naming it, got $grc:"; cat "$out/gone.log"; exit 1; }
"$attncheck" repro "$file" --subject naive >/dev/null
[ $? -eq 0 ] || { echo "repro of the same file on a correct subject should pass"; exit 1; }
# The suite is deterministic: the same seed gives the same table and the same saved files, bit for bit.
"$attncheck" gate --subject "$plugin" --cases 100 --seed 3 --out "$out/again" "${extra[@]}" >"$out/gate2.log" 2>&1
# Timings (the seconds column, before the prob column) and the progress lines (rates, ETA; printed only when a run is slow) vary.
strip() { grep -Ev '^gate: [0-9]+/[0-9]+ cases' "$1" | sed -E 's/ +[0-9]+\.[0-9]+( +(n\/a|pass|FAIL\(prob\)))?$/\1/; s/in [0-9.]+ s/in T s/; s|'"$out"'/[a-z]+|DIR|g'; }
diff <(strip "$log") <(strip "$out/gate2.log") || { echo "a second run with the same seed printed something else"; exit 1; }
diff -r "$out/cases" "$out/again" || { echo "a second run with the same seed saved different files"; exit 1; }
echo "ok: $law killed, counterexample hq=$hq lq=$lq lk=$lk, saved $file, repro fails"
