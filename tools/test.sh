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
#   pdf-build      the whole book printed to one PDF by Chromium (tools/build_pdf.py), in the background while the
#                  strict build and the browser tests run
#   pdf            the PDF read back as soon as it is printed: cover, outline, contents with page numbers, one
#                  chapter per page, no web-page text, no raw TeX, the same numbers as the HTML (skipped with the
#                  browser tests)
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
if [ "${BOOK_SKIP_BROWSER:-0}" = "1" ]; then
  step book "$PY" tools/build_book.py --strict --output "$STRICT_OUT"
  summary+=("  SKIP  browser (BOOK_SKIP_BROWSER=1: the pages were not checked in a browser)")
  summary+=("  SKIP  pdf-build (BOOK_SKIP_BROWSER=1: Chromium prints the PDF)")
  summary+=("  SKIP  pdf (BOOK_SKIP_BROWSER=1: Chromium prints the PDF)")
else
  # The PDF (tools/build_pdf.py: its own single-page build, printed by Chromium), then its checks, run in the
  # background from the strict build's start to the browser tests' end: the two builds are single-threaded, and
  # the browser tests and the printing both spend much of their time waiting on Chromium, so they share the cores.
  # Each part writes its exit status, seconds and CPU seconds to files, recorded as steps once it has ended.
  rm -f "$STRICT_OUT"/book.pdf "$STRICT_OUT"/pdf-build.* "$STRICT_OUT"/pdf-check.*
  mkdir -p "$STRICT_OUT"
  ( t0=$SECONDS
    _times_file=$(mktemp "${TMPDIR:-/tmp}/steps-times.XXXXXX")  # children_cpu's file: not the main shell's
    trap 'rm -f "$_times_file"' EXIT
    "$PY" tools/build_pdf.py --output "$STRICT_OUT/book.pdf" > "$STRICT_OUT/pdf-build.log" 2>&1
    rc=$?
    children_cpu
    c0=$cpu_now
    echo "$rc $((SECONDS - t0)) $c0" > "$STRICT_OUT/pdf-build.result"
    if [ "$rc" -eq 0 ]; then
      t0=$SECONDS
      BOOK_PDF="$STRICT_OUT/book.pdf" "$PY" -m pytest -q tests/test_pdf.py -m pdf > "$STRICT_OUT/pdf-check.log" 2>&1
      rc=$?
      children_cpu
      echo "$rc $((SECONDS - t0)) $((cpu_now - c0))" > "$STRICT_OUT/pdf-check.result"
    fi ) &
  pdf_pid=$!
  step book "$PY" tools/build_book.py --strict --output "$STRICT_OUT"
  if [ -f "$STRICT_OUT/_build/html/index.html" ]; then
    # the browser step by hand (not `step`): the PDF job is reaped after it, so its CPU seconds are counted apart
    echo
    echo "==> browser: $PY -m pytest -q -n $JOBS tests/browser -m browser"
    browser_t0=$SECONDS
    browser_rc=0
    children_cpu
    browser_c0=$cpu_now
    BOOK_HTML="$STRICT_OUT/_build/html" "$PY" -m pytest -q -n "$JOBS" tests/browser -m browser || browser_rc=$?
    children_cpu
    record browser "$browser_rc" $((SECONDS - browser_t0)) "cpu $((cpu_now - browser_c0))s"
  else
    summary+=("  FAIL  browser (not run: the book step built no HTML at $STRICT_OUT/_build/html)")
    failed=$((failed + 1))
  fi
  wait "$pdf_pid"
  echo
  echo "==> pdf-build (in the background from the book step on): $PY tools/build_pdf.py --output $STRICT_OUT/book.pdf"
  tail -n 40 "$STRICT_OUT/pdf-build.log"
  { read -r rc dt cpu < "$STRICT_OUT/pdf-build.result"; } 2>/dev/null || { rc=1; dt=0; cpu=0; }
  record pdf-build "$rc" "$dt" "cpu ${cpu}s, alongside book and browser"
  echo
  echo "==> pdf (after pdf-build, in the background): $PY -m pytest -q tests/test_pdf.py -m pdf"
  if [ -f "$STRICT_OUT/pdf-check.result" ]; then
    cat "$STRICT_OUT/pdf-check.log"
    read -r rc dt cpu < "$STRICT_OUT/pdf-check.result"
    record pdf "$rc" "$dt" "cpu ${cpu}s, alongside browser"
  else
    summary+=("  FAIL  pdf (not run: pdf-build made no PDF)")
    failed=$((failed + 1))
  fi
fi

echo
echo "Summary:"
printf '%s\n' "${summary[@]}"
children_cpu
echo "make test: $passed passed, $failed failed in $((SECONDS - T_START)) s, cpu ${cpu_now} s ($JOBS workers)"
[ "$failed" -eq 0 ]
