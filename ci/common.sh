# Sourced by ci/ scripts: repository root, dependencies, the default build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
JOBS="${ATTNCHECK_JOBS:-$(nproc)}"

# Configures and builds the default build in build/ (g++, Release, -Werror).
build_default() {
  bash "$ROOT/ci/deps"
  cmake -S "$ROOT" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$ROOT/build" -j "$JOBS"
}
