#!/usr/bin/env bash
# The full test command (`make test`), one step after another, each printed with its status and seconds:
#
#   lint           ruff over lib, tests, tools, benchmarks and the chapters
#   stale-outputs  every chapter's stored outputs were computed from its code and the files it uses
#   prose-numbers  no result is typed by hand into a chapter's prose (glued, or an allow-listed input)
#   equations      every numbered equation is executed as displayed or marked a definition
#   reader-layer   no visible testing lines, no shown cell over 30 lines, code and output within 76 characters,
#                  no prose about the project (tools/check_reader_layer.py)
#   lib-tests      pytest over the library (and the checks of the tools themselves), on every core
#   nbval          every chapter re-executed and every stored output compared, twice: on this machine and on
#                  a simulated other machine (other CPU kernels, tools/other_machine.env), so round-off
#                  digits differ while the book must not; one queue of 2 x chapters jobs on every core
#   book           strict build (-W -n) of the stored outputs, no execution: the HTML the browser tests read
#   browser        the built book in Chromium (skipped, and said so, with BOOK_SKIP_BROWSER=1 or without a build)
#   pdf-build      the whole book printed to one PDF by Chromium (tools/build_pdf.py), while the browser tests run
#   pdf            the PDF read back: cover, outline, contents with page numbers, one chapter per page, no web-page
#                  text, no raw TeX, the same numbers as the HTML (skipped with the browser tests)
#
# Every step runs even when an earlier one failed (except browser, which needs the book); exits non-zero if any
# step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export BOOK_WIDGETS=static  # lib.book.widgets draws figures, not sliders, in every headless execution
STRICT_OUT=_build/strict
JOBS=${BOOK_JOBS:-$(nproc 2>/dev/null || echo 2)}  # workers for the parallel steps (BOOK_JOBS overrides)
T_START=$SECONDS
# shellcheck source=tools/steps.sh
. tools/steps.sh

if [ "${1:-}" = "--setup" ]; then  # make test: the set-up is the first step, timed like the others
  step set-up bash tools/setup.sh --test
  if [ "$failed" -ne 0 ]; then printf '%s\n' "${summary[@]}"; exit 1; fi
fi
if [ ! -x "$PY" ]; then
  echo "tools/test.sh: $PY is missing: run 'bash tools/setup.sh --test' (or 'make test', which does)" >&2
  exit 2
fi

step lint "$PY" -m ruff check lib tests tools benchmarks chapters _ext
step stale-outputs "$PY" tools/chapters.py check
step prose-numbers "$PY" tools/check_prose_numbers.py
step equations "$PY" tools/check_equations.py
step reader-layer "$PY" tools/check_reader_layer.py
step lib-tests "$PY" -m pytest -q -n "$JOBS" tests -m "not browser and not pdf"
step nbval "$PY" tools/nbval_parallel.py -j "$JOBS"
rm -rf "$STRICT_OUT/_build/html"
step book "$PY" tools/build_book.py --strict --output "$STRICT_OUT"
if [ "${BOOK_SKIP_BROWSER:-0}" = "1" ]; then
  summary+=("  SKIP  browser (BOOK_SKIP_BROWSER=1: the pages were not checked in a browser)")
  summary+=("  SKIP  pdf (BOOK_SKIP_BROWSER=1: Chromium prints the PDF)")
elif [ -f "$STRICT_OUT/_build/html/index.html" ]; then
  # The PDF is printed (tools/build_pdf.py: its own single-page build, printed by Chromium) while the browser
  # tests read the strict build: both spend much of their time waiting on Chromium, so they share the cores.
  rm -f "$STRICT_OUT/book.pdf" "$STRICT_OUT/pdf-build.cpu"
  pdf_t0=$SECONDS
  children_cpu
  both_c0=$cpu_now
  ( "$PY" tools/build_pdf.py --output "$STRICT_OUT/book.pdf" > "$STRICT_OUT/pdf-build.log" 2>&1
    echo $? > "$STRICT_OUT/pdf-build.rc"
    children_cpu
    echo "$cpu_now" > "$STRICT_OUT/pdf-build.cpu" ) &
  pdf_pid=$!
  # the browser step by hand (not `step`): its CPU seconds are those of both jobs less the PDF's own
  echo
  echo "==> browser: $PY -m pytest -q -n $JOBS tests -m browser"
  browser_t0=$SECONDS
  browser_rc=0
  BOOK_HTML="$STRICT_OUT/_build/html" "$PY" -m pytest -q -n "$JOBS" tests -m browser || browser_rc=$?
  browser_dt=$((SECONDS - browser_t0))
  wait "$pdf_pid"
  children_cpu
  pdf_cpu=$(cat "$STRICT_OUT/pdf-build.cpu" 2>/dev/null || echo 0)
  record browser "$browser_rc" "$browser_dt" "cpu $((cpu_now - both_c0 - pdf_cpu))s"
  pdf_rc=$(cat "$STRICT_OUT/pdf-build.rc" 2>/dev/null || echo 1)
  echo
  echo "==> pdf-build (alongside the browser tests): $PY tools/build_pdf.py --output $STRICT_OUT/book.pdf"
  tail -n 40 "$STRICT_OUT/pdf-build.log"
  record pdf-build "$pdf_rc" $((SECONDS - pdf_t0)) "cpu ${pdf_cpu}s, alongside browser"
  BOOK_PDF="$STRICT_OUT/book.pdf" step pdf "$PY" -m pytest -q tests -m pdf
else
  summary+=("  FAIL  browser (not run: the book step built no HTML at $STRICT_OUT/_build/html)")
  failed=$((failed + 1))
fi

echo
echo "Summary:"
printf '%s\n' "${summary[@]}"
children_cpu
echo "make test: $passed passed, $failed failed in $((SECONDS - T_START)) s, cpu ${cpu_now} s ($JOBS workers)"
[ "$failed" -eq 0 ]
