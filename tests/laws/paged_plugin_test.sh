#!/usr/bin/env bash
# A subject with a broken paged or ragged path must fail the laws named (of
# the group GROUP: paged, page_table or ragged), and a saved counterexample
# (with its pages= or ragged form) must fail again on repro.
# Usage: paged_plugin_test.sh ATTNCHECK PLUGIN CASES GROUP LAW...
set -u
attncheck=$1 plugin=$2 cases=$3 group=$4
shift 4
field='"pages"'
[ "$group" = ragged ] && field='"ragged"'
exec bash "$(dirname "$0")/../support/caught_and_replayed.sh" "$attncheck" "$plugin" "$cases" 3 "$group" "$field" - "$@"
