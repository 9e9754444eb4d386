#!/usr/bin/env bash
# Fails when the repository points outside itself. A clone has only its own
# tree, so every tracked file must do without:
#   1. paths into the sibling "shared" folder the project grew beside (its
#      SPEC.md and MUTANTS.md): the contract is docs/spec.md, the bug classes
#      are in docs/mutation.md;
#   2. code comments that cite "issue <n>", "issue #<n>" or "the design card",
#      which a reader of the clone cannot open (*.c, *.h, *.cpp, *.hpp,
#      CMakeLists.txt, *.cmake and the scripts in ci/).
# Prints every offending file:line and exits 1; exits 0 when there are none.
# Usage: bash tests/repo/no_outside_links_test.sh   (from anywhere inside the repository)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
self=tests/repo/no_outside_links_test.sh

# The tracked files; outside a git checkout (a source tarball), every file
# except build output and the fuzzing work folder.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -d '' files < <(git ls-files -z)
else
  mapfile -d '' files < <(find . -type f ! -path './.git/*' ! -path './build*' ! -path './.fuzz/*' -printf '%P\0')
fi

found=0
others=()
for f in "${files[@]}"; do
  [ "$f" = "$self" ] || [ ! -f "$f" ] || others+=("$f")
done

# 1. Paths outside the repository, anywhere in a text file. The pattern is
# assembled so that this file does not spell the path it looks for.
up='\.\.'
outside_pattern="$up/shared|shared/SPEC\.md|shared/MUTANTS\.md"
outside=$(printf '%s\0' "${others[@]}" |
  xargs -0 grep -I -n -H -E "$outside_pattern" -- 2>/dev/null |
  sed -E 's/^([^:]*:[0-9]+):/\1: points outside the repository: /' || true)

# 2. Comments citing tickets or the design card. Only the comment text of a
# line is searched: after // or inside /* */ in C and C++ (string and
# character literals dropped first), after # in CMake and shell (a # inside
# quotes counts too; such a line is rare and still worth a look).
c_files=() hash_files=()
for f in "${others[@]}"; do
  case "$f" in
    *.c | *.h | *.cpp | *.hpp) c_files+=("$f") ;;
    CMakeLists.txt | */CMakeLists.txt | *.cmake | ci/*) hash_files+=("$f") ;;
  esac
done
cites='
  function check(text) {
    t = tolower(text)
    if (match(t, /(^|[^a-z])issues? *#? *[0-9]+/) || match(t, /design card/))
    {
      m = substr(text, RSTART, RLENGTH)
      sub(/^[^A-Za-z]+/, "", m)
      printf "%s:%d: comment cites a ticket or the design card: \"%s\"\n", FILENAME, FNR, m
    }
  }'
tickets=$(
  if [ ${#c_files[@]} -gt 0 ]; then
    awk "$cites"'
      FNR == 1 { inblock = 0 }
      {
        rest = $0; text = ""
        gsub(/"([^"\\]|\\.)*"/, "\"\"", rest)
        gsub(/\047([^\047\\]|\\.)*\047/, "\047\047", rest)
        while (length(rest) > 0) {
          if (inblock) {
            e = index(rest, "*/")
            if (e == 0) { text = text " " rest; rest = "" }
            else { text = text " " substr(rest, 1, e - 1); rest = substr(rest, e + 2); inblock = 0 }
          } else {
            s = index(rest, "/*"); l = index(rest, "//")
            if (l > 0 && (s == 0 || l < s)) { text = text " " substr(rest, l + 2); rest = "" }
            else if (s > 0) { rest = substr(rest, s + 2); inblock = 1 }
            else rest = ""
          }
        }
        if (text != "") check(text)
      }' "${c_files[@]}"
  fi
  if [ ${#hash_files[@]} -gt 0 ]; then
    awk "$cites"'
      { i = index($0, "#"); if (i > 0 && !(FNR == 1 && substr($0, 1, 2) == "#!")) check(substr($0, i + 1)) }' "${hash_files[@]}"
  fi
)

for list in "$outside" "$tickets"; do
  [ -n "$list" ] || continue
  echo "$list"
  found=$((found + $(wc -l <<<"$list")))
done
if [ $found -gt 0 ]; then
  echo "no_outside_links: $found reference(s) outside the repository (file:line above)"
  exit 1
fi
echo "no_outside_links: none in ${#others[@]} tracked files"
