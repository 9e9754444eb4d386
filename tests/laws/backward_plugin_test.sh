#!/usr/bin/env bash
# A subject with a broken backward must fail the backward laws named, and a
# saved counterexample (with its grad= recipe) must fail again on repro.
# Usage: backward_plugin_test.sh ATTNCHECK PLUGIN CASES LAW...
set -u
attncheck=$1 plugin=$2 cases=$3
shift 3
exec bash "$(dirname "$0")/../support/caught_and_replayed.sh" "$attncheck" "$plugin" "$cases" 3 backward '"grad"' \
  "backward: dQ, dK, dV judged by the backward laws" "$@"
