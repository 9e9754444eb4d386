#!/usr/bin/env bash
# Renders one kind of HTML report in headless Chromium and checks it:
#   gate      a gate on a failing plugin (the mutant query_tail_tile_dropped):
#             exit 1, a failure card per failing law whose heat map outlines
#             the element the terminal printed as worst, at that element's
#             cell; JSON and JUnit carry
#             the version, contract and oracle; the report names them too
#   repro     the gate's saved counterexample replayed: the case, the worst
#             elements, the heat map (same worst element as the terminal)
#   campaign  per-dtype histograms, worst cases, cases/s, oracle tiers, per-feature rows (--variants)
#   mutation  the kill table and cases to kill (two mutants, --quick)
#   bench     bars against the measured peak and bandwidth (--quick)
# Every report: self-contained (no script, no URL), Chromium logs no console
# message or error, --dump-dom holds the expected elements, and the
# screenshot (saved under OUT) is a PNG of at least 20 KB.
# Prints the report's size and Chromium's time for it (render.txt in OUT).
# Exits 77 (ctest: skipped) when chromium is missing; ci/deps installs it.
# Usage: html_report_test.sh KIND ATTNCHECK MUTANT_PLUGIN OUT
set -euo pipefail
kind=$1 attncheck=$2 plugin=$3 out=$4
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "SKIP: chromium is not installed (ci/deps installs the Debian package chromium)"
  exit 77
fi
rm -rf "$out"
mkdir -p "$out"
html="$out/$kind.html"
fail() { echo "FAIL [$kind]: $*"; exit 1; }

# The gate on the failing plugin (the bundled kernel at tiny tiles with its
# last query tile dropped: NaN rows), with its files; used by gate and repro.
# Two laws fail, so the report has two cards.
subject="$plugin:mutant=query_tail_tile_dropped,q_tile=2,k_tile=3,split_keys=6"
failing_gate() {
  set +e
  # --verbose: every failure's screen, whose worst lines the heat maps are checked against.
  "$attncheck" gate --subject "$subject" --only differential --only scale --cases 200 --seed 1 --jobs 2 --verbose \
    --out "$out/cases" --json "$out/gate.json" --junit "$out/gate.xml" --html "$1" >"$out/gate.log" 2>&1
  local rc=$?
  set -e
  [ $rc -eq 1 ] || { cat "$out/gate.log"; fail "gate on the mutant exited $rc, expected 1 (a failing law)"; }
}

# The worst elements the terminal printed, one per failure screen, in order
# ("  worst:    O[b=..,i=..,h=..,e=..]: expected ..." with any suffix a law adds before the colon).
terminal_worst() { sed -n 's/^  worst:    \(.*\): expected .*/\1/p' "$1"; }

# The k-th outlined cell (k from 1) must be the terminal's k-th worst element, drawn at its row and column.
check_heat_map() {
  local worst=$1 file=$2 k=$3
  [ -n "$worst" ] || fail "the terminal printed no worst element"
  local rect svg
  rect=$(grep -o '<rect class="worst"[^>]*>' "$file" | sed -n "${k}p")
  [ -n "$rect" ] || fail "no outlined worst element in heat map $k"
  svg=$(grep -o '<svg class="heat-map"[^>]*>' "$file" | sed -n "${k}p")
  attr() { sed -n "s/.* $1=\"\([^\"]*\)\".*/\1/p" <<<"$2"; }
  [ "$(attr data-where "$rect" | sed 's/&quot;/"/g; s/&amp;/\&/g')" = "$worst" ] ||
    fail "heat map $k marks '$(attr data-where "$rect")', the terminal printed '$worst'"
  local b i h e
  read -r b i h e < <(sed -n 's/^O\[b=\([0-9]*\),i=\([0-9]*\),h=\([0-9]*\),e=\([0-9]*\)\].*/\1 \2 \3 \4/p' <<<"$worst")
  if [ -z "${e:-}" ]; then  # LSE[b,h,i]: the last column of its row
    read -r b h i < <(sed -n 's/^LSE\[b=\([0-9]*\),h=\([0-9]*\),i=\([0-9]*\)\].*/\1 \2 \3/p' <<<"$worst")
    e=LSE
  fi
  [ -n "${i:-}" ] || fail "'$worst' is not an element of O or LSE"
  [ "$(attr data-b "$svg")" = "$b" ] && [ "$(attr data-h "$svg")" = "$h" ] ||
    fail "heat map $k shows batch $(attr data-b "$svg"), head $(attr data-h "$svg"); the worst element is in b=$b, h=$h"
  [ "$(attr data-i "$rect")" = "$i" ] && [ "$(attr data-e "$rect")" = "$e" ] ||
    fail "heat map $k marks i=$(attr data-i "$rect"), e=$(attr data-e "$rect"); expected i=$i, e=$e"
  local cell left top row0 col0 col
  cell=$(attr data-cell "$svg") left=$(attr data-left "$svg") top=$(attr data-top "$svg")
  row0=$(attr data-row0 "$svg") col0=$(attr data-col0 "$svg")
  if [ "$e" = LSE ]; then col=$(($(attr data-cols "$svg") - 1)); else col=$((e - col0)); fi
  [ "$(attr x "$rect")" = "$((left + col * cell - 1))" ] && [ "$(attr y "$rect")" = "$((top + (i - row0) * cell - 1))" ] ||
    fail "the outline of heat map $k is at x=$(attr x "$rect"), y=$(attr y "$rect"), not at the cell of i=$i, e=$e"
  echo "heat map $k: worst element $worst outlined at its cell"
}

# Every failure screen's worst element against its card's heat map, in order.
check_heat_maps() {
  local log=$1 file=$2 k=0 worst
  local n_terminal n_report
  n_terminal=$(terminal_worst "$log" | wc -l)
  n_report=$(grep -o '<rect class="worst"' "$file" | wc -l)
  [ "$n_terminal" -ge 1 ] && [ "$n_terminal" = "$n_report" ] ||
    fail "the terminal printed $n_terminal worst elements, the report outlines $n_report"
  while IFS= read -r worst; do
    k=$((k + 1))
    check_heat_map "$worst" "$file" "$k"
  done < <(terminal_worst "$log")
}

height=1800  # the screenshot's height: the top of a long report
case "$kind" in
  gate)
    height=2300  # both failure cards and the histograms (the README's screenshot)
    failing_gate "$html"
    check_heat_maps "$out/gate.log" "$html"
    version=$("$attncheck" --version | awk '{print $2}')
    grep -q "\"version\": \"$version\"" "$out/gate.json" || fail "gate.json lacks attncheck version $version"
    grep -q '"contract": "1.3"' "$out/gate.json" || fail "gate.json lacks the contract version"
    grep -q '"precision": "mpfr50"' "$out/gate.json" || fail "gate.json lacks the oracle precision"
    grep -q "<property name=\"attncheck_version\" value=\"$version\"/>" "$out/gate.xml" || fail "gate.xml lacks the version"
    grep -q '<property name="contract_version" value="1.3"/>' "$out/gate.xml" || fail "gate.xml lacks the contract version"
    grep -q "attncheck $version, contract 1.2, oracle" "$html" || fail "the report does not say what produced it"
    expect=(section.subject table.laws div.card.failure svg.heat-map rect.worst svg.histogram p#made-by)
    first_screen=1
    ;;
  repro)
    failing_gate "$out/gate.html"
    saved=$(ls "$out"/cases/differential.*.json | head -n 1)
    set +e
    "$attncheck" repro "$saved" --subject "$subject" --html "$html" >"$out/repro.log" 2>&1
    rc=$?
    set -e
    [ $rc -eq 1 ] || { cat "$out/repro.log"; fail "repro exited $rc, expected 1"; }
    check_heat_maps "$out/repro.log" "$html"
    expect=(div.card.failure table.worst-elements svg.heat-map rect.worst p#made-by)
    ;;
  campaign)
    "$attncheck" campaign --cases 400 --jobs 2 --variants --html "$html" >"$out/campaign.log" 2>&1 || { cat "$out/campaign.log"; fail "campaign failed"; }
    grep -q 'cases/s' "$html" || fail "no cases/s"
    grep -q 'fast binary64 tier judged' "$html" || fail "no oracle tier"
    # --variants: a row per feature, and the drawn ones carry cases.
    for f in window softcap sinks alibi bias none; do
      grep -Eq "<tr><td>$f</td><td class=\"n\">[1-9]" "$html" || fail "no per-feature row with cases for $f"
    done
    expect=(table.dtypes table.features svg.histogram table.worst-cases p#made-by)
    ;;
  mutation)
    "$attncheck" mutation --quick --plugin "$plugin" --mutant scale_dropped --mutant gqa_modulo --cases 200 --out "$out/runs" \
      --html "$html" >"$out/mutation.log" 2>&1 || { cat "$out/mutation.log"; fail "mutation failed"; }
    grep -q 'scale_dropped' "$html" && grep -q 'gqa_modulo' "$html" || fail "a mutant is missing from the kill table"
    expect=(table.kills svg.bars p#made-by)
    ;;
  bench)
    "$attncheck" bench --quick --reps 1 --html "$html" >"$out/bench.log" 2>&1 || { cat "$out/bench.log"; fail "bench failed"; }
    expect=(svg.bars pre p#made-by)
    ;;
  *) fail "unknown kind (gate, repro, campaign, mutation, bench)" ;;
esac

[ -s "$html" ] || fail "no report at $html"
# Self-contained: no script, no external resource of any kind.
if grep -Eiq '<script|<link|<img|<iframe|@import|url\(|src=|href=' "$html"; then
  grep -Eio '.{0,40}(<script|<link|<img|<iframe|@import|url\(|src=|href=).{0,40}' "$html" | head -n 3
  fail "the report is not self-contained"
fi

profile="$out/chromium-profile"
flags=(--headless --disable-gpu --no-sandbox --no-first-run --no-default-browser-check --disable-extensions
  --user-data-dir="$profile" --hide-scrollbars --window-size=1280,"$height")
start=$(date +%s.%N)
"$chromium" "${flags[@]}" --enable-logging=stderr --v=0 --screenshot="$out/$kind.png" "file://$(realpath "$html")" \
  >"$out/screenshot.out" 2>"$out/console.log" || { cat "$out/console.log"; fail "chromium could not render the report"; }
end=$(date +%s.%N)
"$chromium" "${flags[@]}" --dump-dom "file://$(realpath "$html")" >"$out/dom.html" 2>/dev/null || fail "chromium --dump-dom failed"
# Console messages of the page (a failed load, a CSS or SVG error) are logged as CONSOLE lines.
if grep -E 'CONSOLE|Uncaught|Failed to load|net::ERR' "$out/console.log"; then fail "chromium reported console messages or errors"; fi
for sel in "${expect[@]}"; do
  tag=${sel%%[.#]*} rest=${sel#"$tag"} name=${rest:1}
  case "$rest" in
    .*) pattern="<$tag[^>]* class=\"[^\"]*\\b${name//./[^\"]* }\\b" ;;
    \#*) pattern="<$tag[^>]* id=\"$name\"" ;;
    *) pattern="<$tag[ >]" ;;
  esac
  grep -Eq "$pattern" "$out/dom.html" || fail "the rendered page has no $sel"
done
# The first screen: a whole gate on the mutant (every law) rendered at 1280 x 800
# must show its first failure card (tests/report/first_screen.py finds the
# card's background in the screenshot), and the law table's numbers (judged,
# run, max observed/bound, verdict) must be the JSON's.
if [ "${first_screen:-0}" = 1 ]; then
  set +e
  "$attncheck" gate --subject "$subject" --cases 20 --seed 1 --jobs 2 --out "$out/all-cases" --json "$out/all.json" \
    --html "$out/all.html" >"$out/all.log" 2>&1
  rc=$?
  set -e
  [ $rc -eq 1 ] || { cat "$out/all.log"; fail "the whole gate on the mutant exited $rc, expected 1"; }
  screen=(--headless --disable-gpu --no-sandbox --no-first-run --no-default-browser-check --disable-extensions
    --user-data-dir="$profile" --hide-scrollbars --window-size=1280,800)
  "$chromium" "${screen[@]}" --screenshot="$out/first-screen.png" "file://$(realpath "$out/all.html")" >/dev/null 2>&1 ||
    fail "chromium could not render the whole gate's report"
  python3 "$(dirname "$0")/first_screen.py" "$out/first-screen.png" 800 || fail "the first failure card is not on the first screen"
  python3 - "$out/all.json" "$out/all.html" <<'PY' || fail "the report's law table and the JSON differ"
import html, json, re, sys
doc = json.load(open(sys.argv[1]))
page = open(sys.argv[2]).read()
rows = re.findall(r'<tr class="[^"]*"><td><code>([^<]+)</code></td><td class="n">([^<]+)</td><td class="n">([^<]+)</td>'
                  r'<td class="[^"]*">([^<]+)</td>', page)
table = {html.unescape(law): (jr, ratio, v) for law, jr, ratio, v in rows}
names = {"pass": "pass", "fail": "FAIL", "skipped": "skipped", "unjudged": "UNJUDGED"}
assert len(table) == len(doc["laws"]), (len(table), len(doc["laws"]))
for law in doc["laws"]:
    jr, ratio, v = table[law["name"]]
    assert v == names[law["verdict"]], (law["name"], v, law["verdict"])
    if law["verdict"] != "skipped":
        assert jr == "%d/%d" % (law["judged"], law["cases"]), (law["name"], jr)
        want = law["max_ratio"]  # null where it is not finite (the public JSON's numbers)
        if want is None:
            assert ratio in ("inf", "-inf", "NaN"), (law["name"], ratio, want)
        else:
            assert ratio == "%.3g" % want, (law["name"], ratio, want)
print("ok: %d laws, the table's numbers are the JSON's" % len(table))
PY
fi
[ -s "$out/$kind.png" ] || fail "no screenshot"
size=$(stat -c %s "$out/$kind.png")
[ "$(head -c 8 "$out/$kind.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "the screenshot is not a PNG"
[ "$size" -ge 20000 ] || fail "the screenshot is only $size bytes (a blank page?)"
seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')
printf '%s: report %d bytes, screenshot %d bytes, chromium --screenshot %.2f s\n' "$kind" "$(stat -c %s "$html")" "$size" "$seconds" |
  tee "$out/render.txt"
echo "PASS [$kind]: $html rendered, screenshot $out/$kind.png"
