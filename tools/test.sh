#!/usr/bin/env bash
# The full test command (`make test`): lint, the lib tests, nbval over every chapter, a strict book build
# that executes every chapter, and the browser tests against the built HTML. Runs every step, then exits
# non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
failed=()

step() {
  local name=$1; shift
  echo
  echo "==> $name: $*"
  if ! "$@"; then failed+=("$name"); fi
}

step lint "$PY" -m ruff check lib tests tools benchmarks
step lib-tests "$PY" -m pytest -q tests -m "not browser"
step nbval "$PY" -m pytest -q -p no:randomly --nbval --nbval-current-env --nbval-sanitize-with tools/nbval_sanitize.cfg chapters
step book "$PY" tools/build_book.py --strict
step browser "$PY" -m pytest -q tests -m browser

echo
if [ ${#failed[@]} -gt 0 ]; then
  echo "make test: FAILED steps: ${failed[*]}"
  exit 1
fi
echo "make test: every step passed"
