#!/usr/bin/env bash
# attncheck merge: gate runs summed per law and subject (runs, failures,
# judged/run, exit 1 on a failure), and every input merge must refuse
# (missing or repeated shards, shards of different runs, mixed kinds, broken
# files) gives exactly one line on stderr naming the file or field, exit 2;
# so do bad --shard values of campaign.
# Usage: merge_input_test.sh ATTNCHECK BROKEN_GQA_PLUGIN
set -uo pipefail
attncheck=$1 broken=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# py CODE ARGS...: runs CODE with json imported and the arguments in a.
py() { python3 -c "import json, sys; a = sys.argv[1:]; $1" "${@:2}"; }
# edit IN OUT CODE: writes OUT, the JSON of IN after CODE changed it (as d).
edit() { python3 -c "import json, sys; d = json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(d, open(sys.argv[2], 'w'))" "$@"; }

expect_error_seconds=120
source "$(dirname "$0")/../support/expect_error.sh"

camp() { "$attncheck" campaign --subject builtin:tiles=tiny "$@" >/dev/null 2>&1 || echo "campaign $* exited $?"; }
for i in 0 1 2; do camp --cases 9 --seed 5 --shard "$i/3" --json "$tmp/s$i.json"; done
camp --cases 9 --seed 6 --shard 1/3 --json "$tmp/seed6.json"
camp --cases 10 --seed 5 --shard 1/3 --json "$tmp/cases10.json"
camp --cases 9 --seed 5 --shard 1/4 --json "$tmp/count4.json"
camp --cases 9 --seed 5 --dtype f16 --shard 1/3 --json "$tmp/f16.json"
"$attncheck" campaign --subject naive --cases 9 --seed 5 --shard 1/3 --json "$tmp/naive.json" >/dev/null 2>&1
"$attncheck" gate --subject naive --only gqa --cases 10 --seed 1 --jobs 2 --json "$tmp/g1.json" --out "$tmp/o" >/dev/null 2>&1 ||
  fail "the naive gate at seed 1 did not pass"
"$attncheck" gate --subject naive --only gqa --cases 10 --seed 2 --jobs 2 --json "$tmp/g2.json" --out "$tmp/o" >/dev/null 2>&1 ||
  fail "the naive gate at seed 2 did not pass"
"$attncheck" gate --subject "$broken" --only gqa --cases 50 --seed 1 --jobs 2 --json "$tmp/b1.json" --out "$tmp/o" >/dev/null 2>&1 &&
  fail "the broken plugin passed the gqa laws"

# Shards: all three merge (exit 0, a correct subject); the merged file merges alone again.
"$attncheck" merge "$tmp/s1.json" "$tmp/s0.json" "$tmp/s2.json" --json "$tmp/m.json" >"$tmp/out" 2>&1 ||
  { fail "merging the three shards exited $?"; cat "$tmp/out"; }
grep -q "9 cases, seed 5, 3 shards merged" "$tmp/out" || fail "the merged header: $(head -1 "$tmp/out")"
"$attncheck" merge "$tmp/m.json" >/dev/null 2>&1 || fail "the merged file does not merge alone"

# Shards that are not every shard of one run, once each.
expect_error "1 of 3 shards missing: 1 " -- "$attncheck" merge "$tmp/s0.json" "$tmp/s2.json"
expect_error "2 of 3 shards missing: 0, 2" -- "$attncheck" merge "$tmp/s1.json"
expect_error "each shard once" -- "$attncheck" merge "$tmp/s0.json" "$tmp/s1.json" "$tmp/s2.json" "$tmp/s1.json"
expect_error "seed 6 differs from 5" -- "$attncheck" merge "$tmp/s0.json" "$tmp/seed6.json" "$tmp/s2.json"
expect_error "cases 10 differs from 9" -- "$attncheck" merge "$tmp/s0.json" "$tmp/cases10.json" "$tmp/s2.json"
expect_error "shard count 4 differs from 3" -- "$attncheck" merge "$tmp/s0.json" "$tmp/count4.json"
expect_error "dtype f16 differs from mixed" -- "$attncheck" merge "$tmp/s0.json" "$tmp/f16.json" "$tmp/s2.json"
expect_error "subject naive" -- "$attncheck" merge "$tmp/s0.json" "$tmp/naive.json" "$tmp/s2.json"
expect_error "merge one kind at a time" -- "$attncheck" merge "$tmp/s0.json" "$tmp/g1.json"
expect_error "merge one kind at a time" -- "$attncheck" merge "$tmp/g1.json" "$tmp/s0.json"
# Broken files.
expect_error "FILE" -- "$attncheck" merge
expect_error "cannot read" -- "$attncheck" merge "$tmp/nothing.json"
echo '{"cases": 3' >"$tmp/cut.json"
expect_error "not JSON" -- "$attncheck" merge "$tmp/cut.json"
echo '{"laws": 3}' >"$tmp/other.json"
expect_error "neither a campaign result" -- "$attncheck" merge "$tmp/other.json"
edit "$tmp/s1.json" "$tmp/nohist.json" 'for t in d["by_type"].values(): del t["histogram"]'
expect_error "field by_type" -- "$attncheck" merge "$tmp/s0.json" "$tmp/nohist.json" "$tmp/s2.json"
edit "$tmp/s1.json" "$tmp/edges.json" 'd["histogram_edges"][0] = 0.002'
expect_error "field histogram_edges" -- "$attncheck" merge "$tmp/s0.json" "$tmp/edges.json" "$tmp/s2.json"
edit "$tmp/s1.json" "$tmp/index5.json" 'd["config"]["shard"]["index"] = 5'
expect_error "field config.shard" -- "$attncheck" merge "$tmp/s0.json" "$tmp/index5.json" "$tmp/s2.json"
edit "$tmp/s1.json" "$tmp/extra.json" 'next(iter(d["by_type"].values()))["cases"] += 1'
expect_error "holds 4 cases, shard 1/3 of 9 has 3" -- "$attncheck" merge "$tmp/s0.json" "$tmp/extra.json" "$tmp/s2.json"
edit "$tmp/g1.json" "$tmp/nojudged.json" 'del d["laws"][0]["judged"]'
expect_error "field laws[0]" -- "$attncheck" merge "$tmp/g2.json" "$tmp/nojudged.json"
expect_error "each run once" -- "$attncheck" merge "$tmp/g1.json" "$tmp/g2.json" "$tmp/g1.json"
expect_error "--seeds: subject naive-f32: 1 of seeds 1-3 missing: 3" -- "$attncheck" merge --seeds 3 "$tmp/g1.json" "$tmp/g2.json"
expect_error "--seeds: subject naive-f32: seed 2 is outside 1-1" -- "$attncheck" merge --seeds 1 "$tmp/g1.json" "$tmp/g2.json"
expect_error "--seeds: applies to gate results only" -- "$attncheck" merge --seeds 3 "$tmp/s0.json" "$tmp/s1.json" "$tmp/s2.json"
"$attncheck" merge --seeds 2 "$tmp/g1.json" "$tmp/g2.json" >/dev/null 2>&1 || fail "merge --seeds 2 of seeds 1 and 2 exited $?"
# --shard and --json of campaign.
for bad in 3/3 0/0 -1/3 1/1025 a/3 1/ /3 1/3/3 "1 /3" 99999999999999999999/3; do
  expect_error "--shard" -- "$attncheck" campaign --cases 10 --shard "$bad"
done
expect_error "--shard: N = 5 must be at most --cases (3)" -- "$attncheck" campaign --cases 3 --shard 1/5
expect_error "--json" -- "$attncheck" campaign --cases 3 --json "$tmp/no/such/dir/x.json"

# Gate runs: summed per law; extra fields are ignored; a failure is listed and exits 1.
edit "$tmp/g2.json" "$tmp/g2x.json" 'd["laws"][0]["future_field"] = {"x": 1}; d["another"] = 2'
"$attncheck" merge "$tmp/g1.json" "$tmp/g2x.json" --json "$tmp/gm.json" >"$tmp/out" 2>&1 ||
  { fail "merging two passing gate runs exited $?"; cat "$tmp/out"; }
grep -q "^subject naive-f32: 2 runs, seeds 1-2$" "$tmp/out" || { fail "no 'subject naive-f32: 2 runs, seeds 1-2' line"; cat "$tmp/out"; }
for law in $(py 'print(*[l["name"] for l in json.load(open(a[0]))["laws"]])' "$tmp/g1.json"); do
  sum='print(sum(l[a[1]] for f in (a[2], a[3]) for l in json.load(open(f))["laws"] if l["name"] == a[0]))'
  judged=$(py "$sum" "$law" judged "$tmp/g1.json" "$tmp/g2.json")
  cases=$(py "$sum" "$law" cases "$tmp/g1.json" "$tmp/g2.json")
  grep -qE "^$law +2 +0 +$judged/$cases " "$tmp/out" || fail "law $law: want 2 runs, 0 failed, $judged/$cases judged in: $(grep "^$law " "$tmp/out")"
  [ "$(py 'print(*[l["judged"] for l in json.load(open(a[1]))["subjects"][0]["laws"] if l["name"] == a[0]])' "$law" "$tmp/gm.json")" = "$judged" ] ||
    fail "law $law: the merged JSON's judged is not $judged"
done
rc=0
"$attncheck" merge "$tmp/g1.json" "$tmp/b1.json" "$tmp/g2.json" >"$tmp/out" 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "merging a failing gate run exited $rc, want 1"
grep -qE "^gqa.matches_mha_on_repeated_kv +1 +1 .* FAIL " "$tmp/out" || { fail "the failing law's row"; cat "$tmp/out"; }
grep -q "^    seed 1: fail (law): .*counterexample ATTN(" "$tmp/out" || fail "the failure's seed, message and counterexample"
grep -q -- "-> FAIL$" "$tmp/out" || fail "no '-> FAIL' line"

[ $fails -eq 0 ] && echo "PASS" || { echo "$fails failed"; exit 1; }
