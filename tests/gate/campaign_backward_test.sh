#!/usr/bin/env bash
# `attncheck campaign --backward`: the naive subject's gradients pass with
# every fully judged case accepted by the bound, per dtype and per gradient,
# and the JSON carries the fudge-factor counts; two shards merge into the
# unsharded run; a broken backward (dQ without the scale) is caught and its
# saved case replays as a failure of the backward law; with --variants the
# naive subject passes with d(sink) judged as dSink, a d(sink) of the wrong
# sign is caught and replays as a failure of the variant law, and a subject
# whose backward takes no variants is refused naming --variants; --backward
# with --form, and a subject without backward, are refused naming --backward
# (exit 2).
# Usage: campaign_backward_test.sh ATTNCHECK BROKEN_BACKWARD_PLUGIN FORWARD_ONLY_PLUGIN BROKEN_SINK_PLUGIN
#        NO_VARIANT_BACKWARD_PLUGIN
set -u
attncheck=$1 broken=$2 forward_only=$3 broken_sink=$4 no_variants=$5
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# A broken backward is caught: its campaign (300 cases, the options given)
# exits 1 with SHOWN in its log and saves a violating case that names LAW,
# and repro of that case fails (exit 1).
caught() {  # tag, subject, law, shown, campaign options...
  local tag=$1 subject=$2 law=$3 shown=$4 rc file
  shift 4
  "$attncheck" campaign --backward "$@" --subject "$subject" --cases 300 --out "$out/$tag-cases" >"$out/$tag.log" 2>&1
  rc=$?
  [ $rc -eq 1 ] || { tail -20 "$out/$tag.log"; fail "$tag: the broken backward passed (exit $rc)"; }
  grep -q "$shown" "$out/$tag.log" || fail "$tag: the violation does not show '$shown'"
  file=$(ls "$out/$tag-cases"/campaign-*.json 2>/dev/null | head -1)
  [ -n "$file" ] || fail "$tag: no violating case saved"
  grep -q "$law" "$file" || fail "$tag: the saved case does not name $law"
  "$attncheck" repro "$file" >"$out/$tag-repro.log" 2>&1
  rc=$?
  [ $rc -eq 1 ] || { cat "$out/$tag-repro.log"; fail "$tag: repro of the saved case should fail with exit 1, got $rc"; }
}
# The naive subject's backward campaign (300 cases, the options given) passes,
# its log in $out/TAG.log and its JSON in $out/TAG.json.
passes() {  # tag, what, campaign options...
  local tag=$1 what=$2 rc
  shift 2
  "$attncheck" campaign --backward "$@" --subject naive --cases 300 --json "$out/$tag.json" >"$out/$tag.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { tail -30 "$out/$tag.log"; fail "$what: exit $rc"; }
}
# A run is refused: exit 2 with SAID in its log (5 cases, the options given).
refused() {  # tag, said, what, campaign options...
  local tag=$1 said=$2 what=$3 rc
  shift 3
  "$attncheck" campaign --backward "$@" --cases 5 >"$out/$tag.log" 2>&1
  rc=$?
  [ $rc -eq 2 ] && grep -q -- "$said" "$out/$tag.log" || { cat "$out/$tag.log"; fail "$what (exit $rc)"; }
}

passes all "naive backward" --jobs 2
grep -q ", backward" "$out/all.log" || fail "the run does not say it is a backward run"
grep -q "elements (dQ, dK, dV) judged" "$out/all.log" || fail "the per-dtype lines do not name the gradients"
python3 - "$out/all.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["backward"] is True, "config.backward"
assert d["violations"] == 0, d["violations"]
for g in ("dQ", "dK", "dV"):
    s = d["by_gradient"][g]
    assert s["elements"] > 0 and s["violations"] == 0, (g, s["elements"], s["violations"])
total = sum(s["elements"] for s in d["by_type"].values())
assert total == sum(d["by_gradient"][g]["elements"] for g in ("dQ", "dK", "dV")), "gradients do not add up to the dtypes"
for t, s in d["by_type"].items():
    f = s["fudge"]
    assert 0 < f["cases"] <= s["cases"], (t, f)
    assert f["bound_accepts"] == f["cases"], (t, f)  # a correct subject: every fully judged case accepted
    assert 0 <= f["pytorch_accepts"] <= f["cases"] and 0 <= f["flash_accepts"] <= f["cases"], (t, f)
PY

for i in 0 1; do
  "$attncheck" campaign --backward --subject naive --cases 300 --shard $i/2 --json "$out/s$i.json" >"$out/s$i.log" 2>&1 ||
    { tail -20 "$out/s$i.log"; fail "shard $i/2"; }
done
"$attncheck" merge "$out/s0.json" "$out/s1.json" --json "$out/merged.json" >"$out/merge.log" 2>&1 ||
  { cat "$out/merge.log"; fail "merging the two backward shards"; }
python3 - "$out/all.json" "$out/merged.json" <<'PY' || exit 1
import json, sys
a, m = (json.load(open(p)) for p in sys.argv[1:])
for key in ("by_type", "by_gradient"):
    for k, s in a[key].items():
        t = m[key][k]
        for f in ("cases", "elements", "unjudged_elements", "violations", "histogram", "max_ratio"):
            assert s[f] == t[f], (key, k, f, s[f], t[f])
        assert s.get("fudge") == t.get("fudge"), (key, k, s.get("fudge"), t.get("fudge"))
PY
"$attncheck" merge "$out/s0.json" "$out/all.json" >"$out/mix.log" 2>&1
[ $? -eq 2 ] || { cat "$out/mix.log"; fail "merge took a shard with the whole run"; }

# The violation's case line carries its grad= recipe.
caught dq "$broken" backward.gradients_within_bound_of_oracle "grad="

passes v "naive backward with variants" --variants
grep -q "elements (dQ, dK, dV, dSink) judged" "$out/v.log" || fail "the variant run's lines do not name dSink"
grep -q "no fudge-factor comparison with --variants" "$out/v.log" || fail "the variant run does not say why it has no fudge table"
python3 - "$out/v.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["backward"] is True and d["config"]["variants"] is True, d["config"]
assert d["violations"] == 0, d["violations"]
for g in ("dQ", "dK", "dV", "dSink"):
    s = d["by_gradient"][g]
    assert s["elements"] > 0 and s["violations"] == 0, (g, s["elements"], s["violations"])
assert d["by_feature"].get("none", {"cases": 0})["cases"] == 0, "a backward variant case without a variant"
PY
# The d(sink) of the wrong sign: the violation names a dSink element.
caught sink "$broken_sink" backward.variant_gradients_within_bound_of_oracle "dSink\[h=" --variants
refused nv "--variants: with --backward" "a backward without variants was not refused naming --variants" \
  --variants --subject "$no_variants"
refused f "--backward: not with --form" "--backward --form was not refused naming --backward" --subject naive --form paged
refused n "does not declare backward" "a subject without backward was not refused" --subject "$forward_only"
echo "ok: campaign --backward judges, merges, catches and refuses"
