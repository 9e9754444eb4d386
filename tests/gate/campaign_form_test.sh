#!/usr/bin/env bash
# `attncheck campaign --form paged|ragged`: the naive subject passes in each
# form and its JSON says which; a subject reading the canaries of a last
# page (broken paged path) is caught; a form the subject does not declare,
# or an unknown one, is refused naming --form (exit 2).
# Usage: campaign_form_test.sh ATTNCHECK BROKEN_PAGED_PLUGIN DENSE_ONLY_PLUGIN
set -u
attncheck=$1 broken=$2 dense=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for form in paged ragged; do
  "$attncheck" campaign --subject naive --form "$form" --cases 200 --json "$out/$form.json" >"$out/$form.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { tail -20 "$out/$form.log"; echo "FAIL: naive in the $form form: exit $rc"; exit 1; }
  grep -q "form $form" "$out/$form.log" || { echo "FAIL: the $form run does not say its form"; exit 1; }
  grep -q "\"form\": \"$form\"" "$out/$form.json" || { echo "FAIL: config.form missing from the $form JSON"; exit 1; }
done
"$attncheck" campaign --subject "$broken" --form paged --cases 200 >"$out/broken.log" 2>&1
rc=$?
[ $rc -eq 1 ] || { tail -20 "$out/broken.log"; echo "FAIL: the broken paged path passed (exit $rc)"; exit 1; }
grep -q "pages=" "$out/broken.log" || { echo "FAIL: the violation's case line lacks its paged form"; exit 1; }
"$attncheck" campaign --subject "$dense" --form ragged --cases 5 >"$out/dense.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--form: ragged: subject does not declare ragged batches" "$out/dense.log" ||
  { cat "$out/dense.log"; echo "FAIL: an undeclared form was not refused naming --form (exit $rc)"; exit 1; }
"$attncheck" campaign --subject naive --form sparse --cases 5 >"$out/bad.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--form: 'sparse' is not one of paged, ragged" "$out/bad.log" ||
  { cat "$out/bad.log"; echo "FAIL: an unknown form was not refused (exit $rc)"; exit 1; }
echo "ok: campaign --form runs, catches and refuses"
