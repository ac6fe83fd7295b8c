#!/usr/bin/env bash
# The quick loop (`make check`, a few minutes): what catches most mistakes before the full `make test`.
#
#   lint, stale-outputs, prose-numbers, equations, reader-layer   as in make test (seconds)
#   lib-tests      pytest over the library on every core (the browser and PDF tests excluded, and the tools'
#                  end-to-end tests unless a tool or the configuration changed): when only Python files under
#                  lib/ or tests/ changed since BASE, only the test modules that are among them or import one
#                  of them (tools/chapters.py affected-tests: imports followed as for the chapters' digests)
#   nbval          nbval of the chapters affected since BASE: on this machine and on the simulated other one, a
#                  chapter whose notebook changed; on this machine only, one of whose inputs (tools/chapters.py
#                  deps) changed but not the notebook (make test runs both machines for every chapter; the
#                  printing helpers of lib/book/fmt.py refuse, on this machine already, a value close enough to a
#                  rounding tie for another machine to print another digit)
#
# BASE defaults to `main` on another branch and to HEAD (the uncommitted changes) on main itself; set it to
# compare with another revision: `make check BASE=HEAD~3`.
set -uo pipefail
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE  # each module is compiled once, by the first process that imports it (tools/setup.sh)
PY=.venv/bin/python
export BOOK_WIDGETS=static
JOBS=${BOOK_JOBS:-$(nproc 2>/dev/null || echo 2)}
if [ -z "${BASE:-}" ]; then
  if [ "$(git rev-parse --abbrev-ref HEAD)" = main ]; then BASE=HEAD; else BASE=main; fi
fi
T_START=$SECONDS
# shellcheck source=tools/steps.sh
. tools/steps.sh

step lint "$PY" -m ruff check lib tests tools benchmarks chapters _ext jupyter_config
step stale-outputs "$PY" tools/chapters.py check
step prose-numbers "$PY" tools/check_prose_numbers.py
step equations "$PY" tools/check_equations.py
step reader-layer "$PY" tools/check_reader_layer.py
# The tools' end-to-end tests (marked "tools": a probe book built once, a chapter executed by tools/chapters.py, the
# download run, the other machine's settings) run only when a tool, the configuration, the requirements or those
# tests changed since BASE; make test always runs them. A second -m replaces the first (pytest keeps the last).
TOOL_PATHS=(tools _ext jupyter_config .ci Makefile _config.yml _toc.yml pyproject.toml requirements.txt requirements.lock
            tests/conftest.py tests/test_stale_outputs.py tests/test_download.py tests/test_other_machine.py)
tool_changes=$( (git diff --name-only "$BASE" -- "${TOOL_PATHS[@]}"; git ls-files --others --exclude-standard -- \
  "${TOOL_PATHS[@]}") | head -n 1)
touched=()
listed=$("$PY" tools/chapters.py affected-tests --since "$BASE") || listed=tests  # when in doubt, every module
if [ -n "$listed" ]; then mapfile -t touched <<< "$listed"; fi
if [ -n "$tool_changes" ]; then
  step lib-tests "${LIB_TESTS[@]}"
elif [ "${touched[*]}" = tests ]; then
  step "lib-tests (the tools' end-to-end tests left to make test: no tool changed since $BASE)" \
    "${LIB_TESTS[@]}" -m "not browser and not pdf and not tools"
elif [ "${#touched[@]}" -eq 0 ]; then
  summary+=("  SKIP  lib-tests (no test module changed, or imports a file changed, since $BASE)")
else
  step "lib-tests (${#touched[@]} modules that import a file changed since $BASE; make test runs every one)" \
    "${PYTEST_LIB[@]}" "${touched[@]}" -m "not browser and not pdf and not tools"
fi
mapfile -t affected < <("$PY" tools/chapters.py affected --since "$BASE")
edited=()
through_inputs=()
for nb in "${affected[@]}"; do
  if [ -n "$( (git diff --name-only "$BASE" -- "$nb"; git ls-files --others --exclude-standard -- "$nb") | head -n 1)" ]
  then edited+=("$nb"); else through_inputs+=(--native-only "$nb"); fi
done
if [ "${#affected[@]}" -eq 0 ]; then
  summary+=("  SKIP  nbval (no chapter changed, or uses a file changed, since $BASE)")
else
  step "nbval (${#edited[@]} chapters edited since $BASE, both machines; $((${#through_inputs[@]} / 2)) affected through \
their inputs, this machine only)" "$PY" tools/nbval_parallel.py -j "$JOBS" "${through_inputs[@]}" "${edited[@]}"
fi

echo
echo "Summary:"
printf '%s\n' "${summary[@]}"
echo "make check: $failed failed in $((SECONDS - T_START)) s (BASE=$BASE; make test runs everything)"
[ "$failed" -eq 0 ]
