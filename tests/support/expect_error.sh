# Sourced by the tests of bad input (with $tmp, a scratch folder, and $fails,
# the count of failures, set): expect_error WANT -- COMMAND... runs COMMAND
# (within $expect_error_seconds, default 60) and counts a failure, printing
# its standard error, unless it exits 2 with exactly one line on standard
# error, a line that contains WANT.
expect_error() {
  local want=$1; shift; shift
  timeout "${expect_error_seconds:-60}" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL: $* -> exit $rc, $lines stderr lines (want exit 2, one line containing '$want'):"
    sed 's/^/    /' "$tmp/err" | head -5
    fails=$((fails + 1))
  fi
}
