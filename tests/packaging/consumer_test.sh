#!/usr/bin/env bash
# Usage: consumer_test.sh BUILD_DIR CONSUMER_SOURCE SCRATCH CMAKE CTEST CC CXX
# Installs the build into SCRATCH/prefix, builds tests/consumer against it
# with find_package(attncheck), runs the consumer's ctest (one test per law
# on its C plugin) and checks the ABI's pkg-config file compiles a plugin.
set -euo pipefail
build=$1 consumer=$2 scratch=$3 cmake=$4 ctest=$5 cc=$6 cxx=$7
rm -rf "$scratch"
mkdir -p "$scratch"
prefix=$scratch/prefix
t0=$(date +%s)

echo "== install into $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$scratch/install.log"
for f in bin/attncheck include/attncheck/subject.h include/attncheck/version.hpp include/attncheck/gtest.hpp \
         lib/cmake/attncheck/attncheckConfig.cmake lib/cmake/attncheck/attncheckConfigVersion.cmake \
         lib/attncheck/plugins/libattncheck_naive.so share/pkgconfig/attncheck-abi.pc; do
  [ -e "$prefix/$f" ] || { echo "missing from the install tree: $f"; exit 1; }
done
"$prefix/bin/attncheck" --version

echo "== configure and build the consumer against it"
"$cmake" -S "$consumer" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" >"$scratch/configure.log" ||
  { cat "$scratch/configure.log"; exit 1; }
grep 'attncheck [0-9]' "$scratch/configure.log"
"$cmake" --build "$scratch/build" -j 2
# attncheck::laws judges kernels; it must not bring the bundled one along.
link=$(ninja -C "$scratch/build" -t commands tiny_attention_laws | tail -1)
case "$link" in
  *attncheck*laws*) ;;
  *) echo "the consumer's link line does not link attncheck's laws: $link"; exit 1 ;;
esac
case "$link" in
  *attnimpl*) echo "attncheck::laws brought the bundled kernel (attnimpl) into the consumer's link line: $link"; exit 1 ;;
esac
echo "consumer links attncheck::laws without attnimpl"

echo "== the consumer's tests: one per law"
laws=$("$prefix/bin/attncheck" laws | grep -c '^[a-z]')
listed=$("$ctest" --test-dir "$scratch/build" -N | grep -c 'all_laws/tiny_attention\.law/' || true)
echo "laws registered: $laws, consumer ctest tests over laws: $listed"
[ "$laws" -gt 0 ] && [ "$listed" -eq "$laws" ] || { echo "expected one consumer test per law"; exit 1; }
"$ctest" --test-dir "$scratch/build" --output-on-failure -j 2

echo "== pkg-config attncheck-abi"
cflags=$(PKG_CONFIG_PATH="$prefix/share/pkgconfig" pkg-config --cflags attncheck-abi)
echo "pkg-config --cflags attncheck-abi: $cflags"
# shellcheck disable=SC2086  # cflags is a list of flags
"$cc" $cflags -Wall -Wextra -Werror -fPIC -shared -o "$scratch/libtiny_pkgconfig.so" "$consumer/tiny_attention.c" -lm
"$prefix/bin/attncheck" gate --subject "$scratch/libtiny_pkgconfig.so" --only causal.future_keys_never_change_past_outputs \
  --cases 10 --out "$scratch/gate-out" >"$scratch/gate.log" || { cat "$scratch/gate.log"; exit 1; }
echo "plugin built with pkg-config flags passes the gate's causal law (10 cases)"
echo "packaging.install_and_consume: $(($(date +%s) - t0)) s"
