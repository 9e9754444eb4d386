#!/usr/bin/env bash
# Runs a command that needs torch, or skips (ctest SKIP_REGULAR_EXPRESSION)
# with a clear message when torch cannot be imported.
# Usage: with_torch.sh PYTHON COMMAND...
set -u
python=$1
shift
if ! "$python" -c "import torch" >/dev/null 2>&1; then
  echo "SKIP: torch cannot be imported by $python (ci/deps installs python3-torch)"
  exit 0
fi
exec "$@"
