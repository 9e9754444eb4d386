#!/usr/bin/env bash
# Usage: deb_test.sh BUILD_DIR SCRATCH CASE_FILE EXPECTED_VERSION_LINE [CPACK]
# Builds the .deb of an already built tree (cpack -G DEB), checks that its
# Depends names the runtime libraries, extracts it without installing
# (dpkg-deb -x) and runs the extracted CLI: --version and the oracle on the
# hand-computed case of docs/oracle.md.
set -euo pipefail
build=$1 scratch=$2 case_file=$3 expected=$4 cpack=${5:-cpack}
[ -f "$case_file" ] || { echo "no case file $case_file"; exit 1; }
rm -rf "$scratch"
mkdir -p "$scratch"
t0=$(date +%s)

"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$scratch" >"$scratch/cpack.log" || { cat "$scratch/cpack.log"; exit 1; }
deb=$(ls "$scratch"/attncheck_*.deb)
echo "built $(basename "$deb"): $(du -h "$deb" | cut -f1)"
dpkg-deb -I "$deb" | tee "$scratch/info.txt"
depends=$(sed -n 's/^ Depends: //p' "$scratch/info.txt")
for lib in libmpfr6 libgmp10 libstdc++6 libc6; do
  grep -q "\b$lib\b" <<<"$depends" || { echo "Depends lacks $lib: $depends"; exit 1; }
done

dpkg-deb -x "$deb" "$scratch/root"
cli=$scratch/root/usr/bin/attncheck
out=$("$cli" --version | head -1)  # the first line; the second names the python: interpreter
[ "$out" = "$expected" ] || { echo "extracted attncheck --version: '$out', expected '$expected'"; exit 1; }
echo "$out"
"$cli" oracle "$case_file" | tee "$scratch/oracle.json"
grep -q '3\.0000000148755657' "$scratch/oracle.json" || { echo "O is not 3.0000000148755657 (docs/oracle.md)"; exit 1; }
for p in naive example example_v2; do
  [ -f "$scratch/root/usr/lib/attncheck/plugins/libattncheck_$p.so" ] || { echo "the package lacks plugin $p"; exit 1; }
done
echo "packaging.deb: $(($(date +%s) - t0)) s"
