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
#   book           strict build (-W -n) of the stored outputs, no execution: the HTML the browser tests read (in
#                  the background from the library tests on)
#   browser        the built book in Chromium (skipped, and said so, with BOOK_SKIP_BROWSER=1 or without a build)
#   pdf-build      the whole book printed to one PDF by Chromium (tools/build_pdf.py), in the background from the
#                  library tests on
#   pdf            the PDF read back as soon as it is printed: cover, outline, contents with page numbers, one
#                  chapter per page, no web-page text, no raw TeX, the same numbers as the HTML (skipped with the
#                  browser tests)
#
# Every step runs even when an earlier one failed (except browser, which needs the book); exits non-zero if any
# step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE  # each module is compiled once, by the first process that imports it (tools/setup.sh)
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

step lint "$PY" -m ruff check lib tests tools benchmarks chapters _ext jupyter_config
step stale-outputs "$PY" tools/chapters.py check
step prose-numbers "$PY" tools/check_prose_numbers.py
step equations "$PY" tools/check_equations.py
step reader-layer "$PY" tools/check_reader_layer.py
# The strict build and the PDF (tools/build_pdf.py: its own single-page build, printed by Chromium, then read
# back) need only the stored outputs, not the steps before them: they run in the background from the library
# tests' start, which leaves both cores to nbval's end and the browser tests, with no single-threaded step
# (either build, the PDF checks) left alone on a core. They are recorded as steps (tools/steps.sh bg_run,
# bg_record) when the test command waits for them, with their own CPU seconds (a step in the foreground also
# counts those of a background job that ended while it ran: tools/steps.sh); the book's zip is renamed into place
# whole, so a library test that reads it while the book is built sees all of it or none.
rm -rf "$STRICT_OUT/_build/html"
rm -f "$STRICT_OUT"/book.pdf "$STRICT_OUT"/{book,pdf-build,pdf}.{log,result}
mkdir -p "$STRICT_OUT"
in_background bg_run "$STRICT_OUT" book "$PY" tools/build_book.py --strict --output "$STRICT_OUT"
book_pid=$!
pdf_job() {
  bg_run "$STRICT_OUT" pdf-build "$PY" tools/build_pdf.py --output "$STRICT_OUT/book.pdf" || return
  # the checks compare the PDF's numbers with the strict build's HTML: wait for that build to have ended
  for _ in $(seq 1800); do [ -f "$STRICT_OUT/book.result" ] && break; sleep 1; done
  BOOK_PDF="$STRICT_OUT/book.pdf" BOOK_HTML="$STRICT_OUT/_build/html" \
    bg_run "$STRICT_OUT" pdf "$PY" -m pytest -q tests/test_pdf.py -m pdf
}
if [ "${BOOK_SKIP_BROWSER:-0}" != "1" ]; then
  in_background pdf_job
  pdf_pid=$!
fi
step lib-tests "${LIB_TESTS[@]}"
step nbval "$PY" tools/nbval_parallel.py -j "$JOBS"
wait "$book_pid"
echo
echo "==> book (in the background from the library tests on): $PY tools/build_book.py --strict --output $STRICT_OUT"
bg_record "$STRICT_OUT" book "alongside lib-tests" 60
if [ "${BOOK_SKIP_BROWSER:-0}" = "1" ]; then
  summary+=("  SKIP  browser (BOOK_SKIP_BROWSER=1: the pages were not checked in a browser)")
  summary+=("  SKIP  pdf-build (BOOK_SKIP_BROWSER=1: Chromium prints the PDF)")
  summary+=("  SKIP  pdf (BOOK_SKIP_BROWSER=1: Chromium prints the PDF)")
else
  if [ -f "$STRICT_OUT/_build/html/index.html" ]; then
    BOOK_HTML="$STRICT_OUT/_build/html" step browser "$PY" -m pytest -q -n "$JOBS" tests/browser -m browser
  else
    summary+=("  FAIL  browser (not run: the book step built no HTML at $STRICT_OUT/_build/html)")
    failed=$((failed + 1))
  fi
  wait "$pdf_pid"
  echo
  echo "==> pdf-build (in the background from the library tests on): $PY tools/build_pdf.py --output $STRICT_OUT/book.pdf"
  bg_record "$STRICT_OUT" pdf-build "alongside lib-tests" 40
  echo
  echo "==> pdf (after pdf-build, in the background): $PY -m pytest -q tests/test_pdf.py -m pdf"
  bg_record "$STRICT_OUT" pdf "alongside lib-tests"
fi

echo
echo "Summary:"
printf '%s\n' "${summary[@]}"
children_cpu
echo "make test: $passed passed, $failed failed in $((SECONDS - T_START)) s, cpu ${cpu_now} s ($JOBS workers)"
[ "$failed" -eq 0 ]
