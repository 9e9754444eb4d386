#!/usr/bin/env bash
# The crash-to-regression pipeline without libFuzzer (any build): a crafted
# input replayed through a harness against a broken plugin must abort, write a
# case file naming the law, and `attncheck repro` on that file must fail on the
# plugin (exit 1) and pass on the bundled implementation (exit 0).
# The real fuzzing run of the same pipeline is ci/fuzz-smoke (clang build).
# Usage: pipeline_replay_test.sh HARNESS INPUT PLUGIN ATTNCHECK LAW
set -u
harness=$1 input=$2 plugin=$3 attncheck=$4 law=$5
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
case_file="$out/finding.json"
# From the temporary folder: a libFuzzer build writes its crash artifact into the working directory.
(cd "$out" && ATTNCHECK_FUZZ_SUBJECT="$plugin" ATTNCHECK_FUZZ="write_case=$case_file" "$harness" "$input" >"$out/log" 2>&1)
rc=$?
cat "$out/log"
[ $rc -ne 0 ] || { echo "expected the harness to abort on the broken plugin, got exit 0"; exit 1; }
grep -q "^FAIL $law" "$out/log" || { echo "expected a finding of $law"; exit 1; }
[ -s "$case_file" ] || { echo "no case file written"; exit 1; }
grep -q "\"law\": \"$law\"" "$case_file" || { echo "case file does not name $law"; cat "$case_file"; exit 1; }
"$attncheck" repro "$case_file" --subject "$plugin"
rrc=$?
[ $rrc -eq 1 ] || { echo "repro on the broken plugin should exit 1, got $rrc"; exit 1; }
# The case file records the subject's spec: replayed without --subject, it runs on the plugin again.
"$attncheck" repro "$case_file" >/dev/null
rrc=$?
[ $rrc -eq 1 ] || { echo "repro without --subject (the subject the file records) should exit 1, got $rrc"; exit 1; }
"$attncheck" repro "$case_file" --subject builtin >/dev/null
[ $? -eq 0 ] || { echo "repro on the bundled implementation should pass"; exit 1; }
echo "ok: $law found by $(basename "$harness"), case file written, repro fails on the plugin and passes on builtin"
