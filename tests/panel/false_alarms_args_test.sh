#!/usr/bin/env bash
# ci/false-alarms refuses bad input with one line naming the field and its
# limit (exit 2), and its shards partition the runs: the union of shards
# 0/M..(M-1)/M is the unsharded list, each run in exactly one shard.
# Usage: bash tests/panel/false_alarms_args_test.sh   (builds and runs nothing: --dry-run)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fa="$root/ci/false-alarms"
bad=0

refuses() {  # refuses "expected message part" args...
  local want=$1 out rc
  shift
  out=$(bash "$fa" "$@" --dry-run 2>&1) # --dry-run: even a broken check runs no gate
  rc=$?
  if [ $rc -ne 2 ] || [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ] || [[ "$out" != *"$want"* ]]; then
    echo "FAIL: ci/false-alarms $* gave exit $rc and: $out (wanted exit 2, one line with: $want)"
    bad=1
  fi
}
refuses "--seeds N is required"
refuses "--seeds '0': must be an integer with 1 <= N <= 1000" --seeds 0
refuses "--seeds '1001': must be an integer with 1 <= N <= 1000" --seeds 1001
refuses "--seeds 'x': must be an integer" --seeds x
refuses "--shard '2/2': must be i/M with 0 <= i < M <= 1000" --seeds 2 --shard 2/2
refuses "--shard '3/2': must be i/M with 0 <= i < M <= 1000" --seeds 2 --shard 3/2
refuses "--shard 'a/b'" --seeds 2 --shard a/b
refuses "--kernels: 'nope' is not a panel kernel" --seeds 2 --kernels two_pass,nope
refuses "unknown argument '--frobnicate'" --seeds 2 --frobnicate

for m in 1 3 4 25; do
  all=$(bash "$fa" --seeds 3 --dry-run | sort)
  union=$(for ((i = 0; i < m; ++i)); do bash "$fa" --seeds 3 --shard "$i/$m" --dry-run; done | sort)
  if [ -z "$all" ] || [ "$all" != "$union" ] || [ -n "$(printf '%s\n' "$union" | uniq -d)" ]; then
    echo "FAIL: the $m shards of --seeds 3 do not partition the $(printf '%s\n' "$all" | wc -l) runs"
    bad=1
  fi
done
n=$(bash "$fa" --seeds 3 --kernels split,two_pass --dry-run | wc -l)
[ "$n" -eq 6 ] || { echo "FAIL: --seeds 3 --kernels split,two_pass lists $n runs, not 6"; bad=1; }
[ $bad -eq 0 ] && echo "ok: bad input refused, shards partition the runs"
exit $bad
