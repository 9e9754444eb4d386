#!/usr/bin/env bash
# A subject with a broken fp8 read must fail the laws named, and a saved
# counterexample (with its fp8 fields and descales) must fail again on repro.
# Usage: fp8_plugin_test.sh ATTNCHECK PLUGIN CASES LAW...
set -u
attncheck=$1 plugin=$2 cases=$3
shift 3
exec bash "$(dirname "$0")/../support/caught_and_replayed.sh" "$attncheck" "$plugin" "$cases" 5 laws '"(q|k|v)type"' \
  "fp8 inputs \(contract 1\.3\)" "$@"
