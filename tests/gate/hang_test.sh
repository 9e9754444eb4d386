#!/usr/bin/env bash
# Honest hangs (README.md, "Hangs and timeouts"), on the sleeping plugin
# (tests/plugins/sleeping.c):
#   hang     one call sleeps 1000 s: each law is a `hang` within the per-call
#            watchdog (floor 2 s here), long before its law timeout, naming
#            the call and the case; exit 1.
#   timeout  every call sleeps 20 ms, each law has 2 s: a `timeout` (exit 4,
#            JSON verdict and kind timeout, a JUnit error), never a hang, with
#            the time of each phase; a failure elsewhere wins (exit 1).
#   shrink   every output is wrong and every call sleeps 200 ms, the law has
#            3 s: it fails on its first case and runs out of time shrinking,
#            a failure (exit 1) with the smallest failing case, marked not minimal.
# Both: each law's seconds are its own, and --stats counts the cases of the
# laws that died.
# Usage: hang_test.sh hang|timeout|shrink ATTNCHECK PLUGIN
set -u
mode=$1 attncheck=$2 plugin=$3
# The laws run, named (not their groups) so that the counts below stay when
# a law joins either group: both in the hang and timeout modes, law1 in shrink.
law1=differential.output_within_bound_of_oracle law2=softmax.weights_form_a_distribution
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
# Each law's own seconds, the gate's, and the cases the JSON counts, from the JSON.
json_field() { python3 -c "import json,sys; d=json.load(open('$out/gate.json')); print($1)"; }

if [ "$mode" = hang ]; then
  start=$(date +%s)
  timeout 250 "$attncheck" gate --subject "$plugin:sleep_call=20" --only "$law1" --only "$law2" --cases 100 --seed 3 \
    --watchdog-floor 2 --law-timeout 120 --jobs 2 --stats --verbose --out "$out/cases" --json "$out/gate.json" >"$out/log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  cat "$out/log"
  [ $rc -eq 1 ] || fail "expected exit 1 (a hang fails the law), got $rc"
  # Well within the law timeout (120 s): the watchdog stopped the call, not the law's limit.
  [ $took -lt 60 ] || fail "took $took s: the watchdog did not stop the sleeping call"
  grep -q '^  watchdog: a call into the subject is hung after max(2 s, 50 x its expected time); each law has 120 s' "$out/log" \
    || fail "the watchdog's limits are not printed"
  [ "$(grep -c "the subject's call attend (work B\*Hq\*Lq\*Lk\*(D+Dv) = [0-9]*) ran [0-9.]* s, past its watchdog limit of 2 s" "$out/log")" -eq 2 ] \
    || fail "expected both laws to name the overdue call and its limit"
  [ "$(grep -c 'stopped (a hang) while checking ATTN(' "$out/log")" -eq 2 ] || fail "expected both laws to name the case"
  [ "$(json_field "sum(l['kind'] == 'hang' for l in d['laws'])")" -eq 2 ] || fail "expected two laws of kind hang in the JSON"
  [ "$(json_field "all(l['seconds'] < 30 for l in d['laws'])")" = True ] || fail "a law's seconds are not its own"
elif [ "$mode" = shrink ]; then
  timeout 250 "$attncheck" gate --subject "$plugin:wrong=1,sleep_each_ms=200" --only "$law1" --cases 100 --seed 3 \
    --law-timeout 3 --stats --out "$out/cases" --json "$out/gate.json" >"$out/log" 2>&1
  rc=$?
  cat "$out/log"
  [ $rc -eq 1 ] || fail "expected exit 1 (the law failed before its time ran out), got $rc"
  grep -qE '\[shrinking stopped at the law timeout \(--law-timeout 3 s; [0-9.]+ s generating and checking \(1 cases\), [0-9.]+ s shrinking \([0-9]+ steps\)\): the smallest failing case found, not minimal\]' "$out/log" \
    || fail "expected the failure to say its shrinking was cut short"
  [ "$(json_field "[l['verdict'] + '/' + l['kind'] for l in d['laws']]")" = "['fail/law']" ] || fail "expected JSON verdict fail, kind law"
  ls "$out/cases"/*.json >/dev/null 2>&1 || fail "the failing case was not saved"
  grep -qE '\(a hang\)|TIMEOUT' "$out/log" && fail "a failure cut short in shrinking was called a hang or a timeout"
else
  timeout 250 "$attncheck" gate --subject "$plugin:sleep_each_ms=20" --only "$law1" --only "$law2" --cases 1000 --seed 3 \
    --watchdog-floor 1 --law-timeout 2 --jobs 1 --stats --out "$out/cases" --json "$out/gate.json" --junit "$out/gate.xml" \
    >"$out/log" 2>&1
  rc=$?
  cat "$out/log"
  [ $rc -eq 4 ] || fail "expected exit 4 (a law timed out, none failed), got $rc"
  grep -q '(a hang)' "$out/log" && fail "a slow but steady subject was called hung"
  [ "$(grep -c '^TIMEOUT ' "$out/log")" -eq 2 ] || fail "expected two TIMEOUT screens"
  [ "$(grep -cE "the law ran out of its time \(--law-timeout 2 s\) with no call into the subject past its watchdog limit .* (while checking|between cases, after) ATTN\(.*; [0-9.]+ s generating and checking \([0-9]+ cases\), [0-9.]+ s shrinking \(0 steps\)" "$out/log")" -eq 2 ] \
    || fail "expected each timeout to name the case and the time of each phase"
  grep -q 'gate: 0 passed, 0 failed, 2 timed out, 0 unjudged, 0 skipped in .* -> TIMEOUT' "$out/log" || fail "summary line"
  [ "$(json_field "[l['verdict'] + '/' + l['kind'] for l in d['laws']]")" = "['timeout/timeout', 'timeout/timeout']" ] \
    || fail "expected JSON verdict and kind timeout"
  [ "$(json_field "(d['failed'], d['timed_out'])")" = "(0, 2)" ] || fail "JSON failed/timed_out"
  grep -q 'failures="0" errors="2"' "$out/gate.xml" || fail "JUnit: expected 2 errors, 0 failures"
  [ "$(grep -c '<error message="the law ran out of its time.*type="timeout">' "$out/gate.xml")" -eq 2 ] || fail "JUnit: no timeout errors"
  ls "$out/cases"/*.json >/dev/null 2>&1 && fail "a timeout saved a counterexample"
  # One law at a time: each law's seconds are its own (about its 2 s), the gate's their sum.
  [ "$(json_field "all(1.9 < l['seconds'] < 3.5 for l in d['laws']) and d['seconds'] > 3.8")" = True ] \
    || fail "a law's seconds are not its own: $(json_field "[l['seconds'] for l in d['laws']], d['seconds']")"
  # A failure wins over a timeout: one subject hangs (a failure), the other times out.
  "$attncheck" gate --subject "$plugin:sleep_call=3" --subject "$plugin:sleep_each_ms=20" --only softmax --cases 1000 \
    --watchdog-floor 1 --law-timeout 2 --out "$out/both" >"$out/both.log" 2>&1
  rc=$?
  [ $rc -eq 1 ] || { cat "$out/both.log"; fail "expected exit 1 when a law failed and another timed out, got $rc"; }
fi
# --stats counts every law's cases, the dead ones' included.
n=$(sed -n 's/^distribution of the \([0-9]*\) cases run.*/\1/p' "$out/log")
cases=$(json_field "sum(l['cases'] for l in d['laws'])")
[ -n "$n" ] && [ "$n" -gt 0 ] && [ "$n" -eq "$cases" ] || fail "--stats counted $n cases, the laws ran $cases"
# Each law ran several cases before it died (the 20th call sleeps; 2 s of 20 ms calls): all are counted.
[ "$mode" = shrink ] || [ "$(json_field "min(l['cases'] for l in d['laws'])")" -ge 3 ] || fail "a dead law's cases were not counted: $(json_field "[l['cases'] for l in d['laws']]")"
echo "ok: $mode"
