#!/usr/bin/env bash
# The full test command (`make test`): lint, the lib tests, nbval over every chapter, a strict book build
# that executes every chapter, and the browser tests against the built HTML. Runs every step even when an
# earlier one failed, prints one line per step (status and seconds), and exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export BOOK_WIDGETS=static  # lib.widgets draws figures, not sliders, in every headless execution
summary=()
failed=0

step() {
  local name=$1; shift
  echo
  echo "==> $name: $*"
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  local dt=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then
    summary+=("  PASS  $name (${dt}s)")
  else
    summary+=("  FAIL  $name (exit $rc, ${dt}s)")
    failed=$((failed + 1))
  fi
}

if [ ! -x "$PY" ]; then
  echo "tools/test.sh: $PY is missing: run 'bash tools/setup.sh --test' (or 'make test', which does)" >&2
  exit 2
fi

lint_paths=(lib tests tools)
[ -d benchmarks ] && lint_paths+=(benchmarks)
step lint "$PY" -m ruff check "${lint_paths[@]}"
step lib-tests "$PY" -m pytest -q tests -m "not browser"
step nbval "$PY" -m pytest -q -p no:randomly --nbval --nbval-current-env \
  --nbval-sanitize-with tools/nbval_sanitize.cfg chapters
step book "$PY" tools/build_book.py --strict
if [ -f _build/html/index.html ]; then
  step browser "$PY" -m pytest -q tests -m browser
else
  summary+=("  FAIL  browser (not run: there is no built book at _build/html)")
  failed=$((failed + 1))
fi

echo
echo "Summary:"
printf '%s\n' "${summary[@]}"
if [ "$failed" -gt 0 ]; then
  echo "make test: FAILED ($failed of ${#summary[@]} steps)"
  exit 1
fi
echo "make test: all ${#summary[@]} steps passed"
