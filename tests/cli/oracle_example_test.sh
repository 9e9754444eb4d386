#!/usr/bin/env bash
# attncheck oracle on the shipped two_keys_ln3 case prints the values worked
# out by hand in docs/oracle.md and tests/cases/README.md.
set -u
attncheck=$1 cases=$2
out=$("$attncheck" oracle "$cases/two_keys_ln3.json" --p) || { echo "oracle failed"; exit 1; }
echo "$out" | head -40
check() {  # check NAME VALUE_REGEX
  echo "$out" | tr -d ' \n' | grep -qE "$2" || { echo "FAIL: $1 does not match $2"; exit 1; }
}
check "O = 3.0000000148755657" '"o":\[\[\[\[3\.000000014875565[67]'
check "LSE = 1.3862943759954562" '"lse":\[\[\[1\.386294375995456[23]'
check "P = (0.2499999962811086, 0.7500000037188914)" '"p":\[\[\[\[0\.249999996281108[56],0\.750000003718891[34]'
check "stated accuracy" '"accuracy":"[^"]+'
check "what produced it" "\"attncheck\":\{\"contract\":\"1\.3\",\"version\":\"$("$attncheck" --version | head -1 | awk '{print $2}')\"\}"
# Citable: the tier, the numbers it guarantees per element, the subject's bound under its own name.
check "cite names the tier" '"cite":\{[^}]*"tier":"multiprecision"'
check "O accuracy per element" '"o_accuracy":\[\[\[\[[0-9]'
check "LSE accuracy per element" '"lse_accuracy":\[\[\[[0-9]'
check "the subject's bound, named so" '"subject_o_bound":\[\[\[\['
echo "$out" | tr -d ' \n' | grep -qE '"o_bound"' && { echo "FAIL: o_bound is still printed under the oracle's name"; exit 1; }
auto=$("$attncheck" oracle "$cases/two_keys_ln3.json" --precision auto) || { echo "oracle --precision auto failed"; exit 1; }
echo "$auto" | tr -d ' \n' | grep -qE '"tier":"fast_binary64"' || { echo "FAIL: auto did not take the fast tier"; exit 1; }
echo "$auto" | grep -q 'E_own' || { echo "FAIL: the fast tier's result states another tier's accuracy"; exit 1; }
echo "$auto" | grep -q 'static_mpfr_float_50' && { echo "FAIL: the fast tier's result claims MPFR's accuracy"; exit 1; }
echo "ok"
