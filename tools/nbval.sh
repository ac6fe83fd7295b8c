#!/usr/bin/env bash
# nbval over the given chapters (default: every chapter), exactly as the test command runs it: each notebook
# is re-executed and every stored output compared with the fresh one (tools/nbval_sanitize.cfg masks memory
# addresses; cells tagged nbval-ignore-output are run but not compared). tools/nbval_run.py is pytest without
# two start-up costs nbval does not need, and it sets the kernels' environment (static figures, slider frames
# drawn but not rasterised).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then set -- chapters; fi
exec .venv/bin/python tools/nbval_run.py -q -p no:randomly --nbval --nbval-current-env \
  --nbval-sanitize-with tools/nbval_sanitize.cfg "$@"
