#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build: the four harnesses compiled with $CC $CXX
# $CFLAGS $CXXFLAGS, linked with $LIB_FUZZING_ENGINE, copied to $OUT with
# <harness>_seed_corpus.zip and the dictionary. ci/clusterfuzzlite-check runs
# this script by hand (no Docker) with the variables set.
src="${SRC:?}/attncheck"
[ -d "$src" ] || src="$(cd "$(dirname "$0")/.." && pwd)"   # run from a checkout
build="${WORK:-/tmp}/attncheck-cflite-build"

# The distribution's C++ libraries (rapidcheck) are built against libstdc++,
# so the builder's -stdlib=libc++ is dropped (ASan and UBSan need no libc++).
CXXFLAGS="${CXXFLAGS//-stdlib=libc++/}"

cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DATTNCHECK_LIBFUZZER=ON -DATTNCHECK_FUZZ_ENGINE="$LIB_FUZZING_ENGINE" \
  -DATTNCHECK_TESTS=OFF -DATTNCHECK_WERROR=OFF
cmake --build "$build" -j "$(nproc)" --target fuzz_differential fuzz_laws fuzz_case_file fuzz_backward

for h in fuzz_differential fuzz_laws fuzz_case_file fuzz_backward; do
  cp "$build/fuzz/$h" "$OUT/"
  rm -f "$OUT/${h}_seed_corpus.zip"
  (cd "$src/fuzz/corpus/$h" && zip -q -j "$OUT/${h}_seed_corpus.zip" ./*)
done
cp "$src/fuzz/dict/case_file.dict" "$OUT/fuzz_case_file.dict"
