#!/usr/bin/env bash
# Every way bad input reaches build/attncheck gives exactly one line on stderr
# naming the field, exit code 2, and no crash (a sanitizer build makes a
# crash or a leak fail here too).
# Usage: hostile_input_test.sh ATTNCHECK CASES_DIR
set -u
attncheck=$1 cases=$2
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source "$(dirname "$0")/../support/expect_error.sh"

# Every malformed case file, through every command that reads case files.
for f in "$cases"/malformed/*.json; do
  want=$(head -1 "${f%.json}.expect")
  expect_error "$want" -- "$attncheck" oracle "$f"
  expect_error "$want" -- "$attncheck" repro "$f"
done
expect_error "No such file" -- "$attncheck" oracle "$tmp/missing.json"
expect_error "subject" -- "$attncheck" gate --subject "$tmp/nothing.so" --cases 1
echo "not a plugin" >"$tmp/fake.so"
expect_error "subject" -- "$attncheck" gate --subject "$tmp/fake.so" --cases 1
expect_error "subject" -- "$attncheck" gate --subject "builtin:k_tile=70000" --cases 1
expect_error "subject" -- "$attncheck" gate --subject "builtin:tiles=huge" --cases 1
expect_error "subject" -- "$attncheck" gate --subject "naive:k_tile=3" --cases 1
expect_error "tiles" -- "$attncheck" mutation --tiles 1,2
expect_error "subject" -- "$attncheck" gate --subject "builtin:tile=3" --cases 1
expect_error "--only" -- "$attncheck" gate --only no_such_law --cases 1
expect_error "--precision" -- "$attncheck" oracle "$cases/two_keys_ln3.json" --precision float
expect_error "law" -- "$attncheck" repro "$cases/two_keys_ln3.json"
expect_error "law" -- "$attncheck" repro "$cases/two_keys_ln3.json" --law no.such
# A file that records no subject is not replayed on a default one.
expect_error "records no subject; pass --subject" -- "$attncheck" repro "$cases/two_keys_ln3.json" --law differential.output_within_bound_of_oracle
# One-line forms.
expect_error "hkv" -- "$attncheck" case "ATTN(b=1,hq=6,hkv=4,lq=1,lk=1,d=1,dv=1,f32)"
expect_error "lq" -- "$attncheck" case "ATTN(b=1,hq=1,hkv=1,lq=0,lk=1,d=1,dv=1,f32)"
expect_error "lk" -- "$attncheck" case "ATTN(b=1,hq=1,hkv=1,lq=1,lk=99999999999999999999,d=1,dv=1,f32)"
expect_error "" -- "$attncheck" case "ATTN(b=1048576,hq=1048576,hkv=1,lq=1048576,lk=1048576,d=1048576,dv=1,f32)"
expect_error "" -- "$attncheck" case "ATTN(b=1,hq=1"
expect_error "" -- "$attncheck" case "garbage"
# Command-line arguments: one line naming the option, exit 2.
expect_error "--cases" -- "$attncheck" gate --cases -1
expect_error "--cases: 'abc' is not a whole number; expected 1 to 10000000" -- "$attncheck" gate --cases abc
expect_error "--max-work" -- "$attncheck" gate --max-work 1
expect_error "--max-work" -- "$attncheck" gate --max-work 999999999999
expect_error "--seed" -- "$attncheck" gate --seed -5x
expect_error "file" -- "$attncheck" oracle
expect_error "nosuchcommand" -- "$attncheck" nosuchcommand
expect_error "--jobs" -- "$attncheck" campaign --jobs 0
expect_error "--dtype" -- "$attncheck" campaign --dtype f64 --cases 1
echo "hostile input: $fails failures"
[ $fails -eq 0 ]
