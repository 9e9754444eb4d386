#!/usr/bin/env bash
# The laws that demand an effect judge it only where the oracle proves it
# (require_changes). A correct kernel whose q.k overflows and whose
# exp(0) is 1 - 2^-24 (tests/plugins/effect_audit_kernel.c) passes the cases that
# falsely failed it before, each judged where the law says it is, and a short
# gate of every law.
# Usage: effect_audit_test.sh ATTNCHECK PLUGIN CASES
set -u
attncheck=$1 plugin=$2 cases=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
# replay LAW LINE JUDGED: the case must pass; JUDGED=yes: it must judge elements
# (so that the check could have failed), no: it must judge none of the effect.
replay() {
  local law=$1 line=$2 judged=$3 log rc
  "$attncheck" case "$line" -o "$out/case.json" >/dev/null || { echo "bad case line $line"; failed=1; return; }
  log=$("$attncheck" repro "$out/case.json" --subject "$plugin" --law "$law" 2>&1)
  rc=$?
  echo "$log"
  [ $rc -eq 0 ] || { echo "FALSE ALARM: $law on $line (repro exit $rc)"; failed=1; return; }
  if [ "$judged" = yes ] && echo "$log" | grep -q "judged: *0 elements"; then
    echo "NOT JUDGED: $law on $line judged nothing, so it could not have failed"
    failed=1
  fi
}
# q.k = 1e25 * 1e25 overflows f32: the rows are empty before and after the
# perturbation, and the oracle's bound is +inf (no change can be proven).
replay gqa.matches_mha_on_repeated_kv 'ATTN(b=1,hq=2,hkv=1,lq=1,lk=1,d=1,dv=1,scale=1e-30,f32,values=far_below)' no
replay gqa.matches_mha_on_repeated_kv 'ATTN(b=1,hq=4,hkv=2,lq=1,lk=1,d=1,dv=1,scale=1e-30,f32,values=far_below)' no
replay scale.power_of_two_scalings_are_exact 'ATTN(b=1,hq=2,hkv=1,lq=1,lk=1,d=1,dv=1,scale=1e-30,f32,values=far_below)' no
# One visible key: O is V within the bound; the reciprocal of l = 1 - 2^-24
# moves about half of the elements one ulp off V.
replay hull.output_within_visible_values 'ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=4,dv=32,f32,seed=3)' yes
replay hull.output_within_visible_values 'ATTN(b=1,hq=2,hkv=1,lq=3,lk=3,d=4,dv=16,causal,f32,seed=5)' yes
# Ordinary cases, where the effects are proven and judged.
replay gqa.matches_mha_on_repeated_kv 'ATTN(b=2,hq=6,hkv=2,lq=3,lk=5,d=4,dv=4,f32,seed=11)' yes
replay scale.power_of_two_scalings_are_exact 'ATTN(b=1,hq=2,hkv=1,lq=2,lk=4,d=8,dv=8,f32,seed=12)' yes
"$attncheck" gate --subject "$plugin" --cases "$cases" --seed 28 --out "$out/gate" >"$out/gate.log" 2>&1
rc=$?
cat "$out/gate.log"
[ $rc -eq 0 ] || { echo "FALSE ALARM: the gate failed a correct kernel (exit $rc)"; failed=1; }
exit $failed
