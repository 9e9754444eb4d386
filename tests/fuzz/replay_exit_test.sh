#!/usr/bin/env bash
# The replay main's exit status (fuzz/replay_main.cpp), with the contract
# harness (replay_contract_harness.cpp) and with a real harness: passing
# inputs exit 0; a rejected input (-1) fails unless --allow-rejected; a
# reserved return value fails; a finding (abort) fails; no input is a usage error.
# Usage: replay_exit_test.sh CONTRACT_HARNESS REAL_HARNESS REAL_FAILING_INPUT SUBJECT
set -u
contract=$1 real=$2 real_input=$3 subject=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"  # anything a harness writes lands here
mkdir pass mixed reject
printf p >pass/1 && printf p >pass/2
printf p >mixed/1 && printf r >mixed/2
printf r >reject/1
printf x >reserved
printf a >finding
status=0
expect() {  # expect WANT(0|nonzero|2) DESCRIPTION COMMAND...
  local want=$1 what=$2
  shift 2
  "$@" >log 2>&1
  local rc=$?
  local ok=0
  case "$want" in
    0) [ $rc -eq 0 ] && ok=1 ;;
    2) [ $rc -eq 2 ] && ok=1 ;;
    nonzero) [ $rc -ne 0 ] && [ $rc -ne 2 ] && ok=1 ;;
  esac
  if [ $ok -eq 1 ]; then
    echo "ok: $what (exit $rc)"
  else
    echo "WRONG: $what: exit $rc, expected $want"; sed 's/^/    /' log; status=1
  fi
}
expect 0 "every input passes" "$contract" pass
expect nonzero "a rejected input fails the replay" "$contract" mixed
expect 0 "a rejected input with --allow-rejected" "$contract" --allow-rejected mixed
expect nonzero "only rejected inputs fail the replay" "$contract" reject
expect nonzero "a reserved return value fails" "$contract" --allow-rejected pass reserved
expect nonzero "a finding (abort) fails" "$contract" pass finding
expect 2 "no input at all is a usage error" "$contract"
expect 2 "a missing file is a usage error" "$contract" pass no-such-file
# A real harness on an input that fails against a broken subject.
expect nonzero "$(basename "$real") on a failing input" env ATTNCHECK_FUZZ_SUBJECT="$subject" "$real" "$real_input"
exit $status
