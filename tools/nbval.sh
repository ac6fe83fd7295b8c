#!/usr/bin/env bash
# nbval over the given chapters (default: every chapter), exactly as the test command runs it: each notebook
# is re-executed and every stored output compared with the fresh one (tools/nbval_sanitize.cfg masks memory
# addresses; cells tagged nbval-ignore-output are run but not compared). tools/nbval_run.py is pytest without
# two start-up costs nbval does not need.
set -euo pipefail
cd "$(dirname "$0")/.."
export BOOK_WIDGETS=static  # lib.book.widgets draws figures, not sliders, in every headless execution
export BOOK_SLIDER_FRAMES=unrendered  # slider frames drawn, not rasterised: nbval compares no images or metadata
if [ $# -eq 0 ]; then set -- chapters; fi
exec .venv/bin/python tools/nbval_run.py -q -p no:randomly --nbval --nbval-current-env \
  --nbval-sanitize-with tools/nbval_sanitize.cfg "$@"
