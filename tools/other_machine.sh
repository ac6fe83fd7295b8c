#!/usr/bin/env bash
# Run a command as if on another machine: the processor-specific code paths of PyTorch, MKL, OpenBLAS and
# NumPy, and the thread count, are set to other values than this machine picks (see tools/other_machine.env).
# Example: bash tools/other_machine.sh bash tools/nbval.sh chapters/softmax.ipynb
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
set -a
# shellcheck source=/dev/null
. "$here/other_machine.env"
set +a
exec "$@"
