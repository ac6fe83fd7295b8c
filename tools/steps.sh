# Sourced by tools/test.sh and tools/check.sh: run named steps, time them, and keep a summary.
#   step NAME CMD...          run CMD, print "==> NAME: CMD", record PASS/FAIL with its seconds and CPU seconds
#   record NAME RC SECONDS [NOTE]   record a step that ran some other way
#   in_background CMD...      run CMD (a function or command that calls bg_run) in a background shell of its own
#   bg_run DIR NAME CMD...    run CMD, its output to DIR/NAME.log, its exit status, seconds and CPU seconds to
#                             DIR/NAME.result (for a step in the background; returns CMD's exit status)
#   bg_record DIR NAME NOTE [LINES]   print DIR/NAME.log (its last LINES lines) and record the step from
#                             DIR/NAME.result, or as failed if it wrote none
#   LIB_TESTS                 the library tests' command (needs $PY and $JOBS set before this file is sourced);
#                             PYTEST_LIB the same without the folder and the markers
# After the steps: ${summary[@]} holds one line per step, $passed and $failed count them.
# A step's CPU seconds are the user + system time of the processes it ran (bash's `times` for finished children,
# so they include everything those processes waited for, and a background job reaped while the step ran):
# on a busy machine the wall seconds grow with the other jobs, the CPU seconds hardly do.
# The library tests, as both loops run them ($PY and $JOBS set by the caller): pytest-xdist's work-stealing
# workers (a long test at the end no longer leaves one core idle), without nbval's plugin, which no library test
# uses (it imports nbformat and jsonschema's format checks in every process), browser and PDF tests excluded
PYTEST_LIB=("$PY" -m pytest -q -n "$JOBS" --dist worksteal -p no:nbval)  # LIB_TESTS without what it runs
LIB_TESTS=("${PYTEST_LIB[@]}" tests -m "not browser and not pdf")
summary=()
failed=0
passed=0

# user + system seconds of this shell's finished children so far, into $cpu_now (`times` has to run in this
# shell, not in a $(...) subshell, whose children are others)
_times_file=$(mktemp "${TMPDIR:-/tmp}/steps-times.XXXXXX")
trap 'rm -f "$_times_file"' EXIT
cpu_now=0
children_cpu() {
  times > "$_times_file"
  cpu_now=$(tail -n 1 "$_times_file" | awk '{
    s = 0
    for (i = 1; i <= 2; i++) { split($i, p, "m"); sub("s", "", p[2]); s += p[1] * 60 + p[2] }
    printf "%.0f\n", s }')
}

record() {
  local name=$1 rc=$2 dt=$3 note=${4:+, $4}
  if [ "$rc" -eq 0 ]; then
    summary+=("  PASS  $name (${dt}s$note)")
    passed=$((passed + 1))
  else
    summary+=("  FAIL  $name (exit $rc, ${dt}s$note)")
    failed=$((failed + 1))
  fi
}

step() {
  local name=$1; shift
  echo
  echo "==> $name: $*"
  local t0=$SECONDS rc=0 c0
  children_cpu
  c0=$cpu_now
  "$@" || rc=$?
  children_cpu
  record "$name" "$rc" $((SECONDS - t0)) "cpu $((cpu_now - c0))s"
}

in_background() {
  # its own file for children_cpu (`times` in a background shell counts that shell's children only)
  ( _times_file=$(mktemp "${TMPDIR:-/tmp}/steps-times.XXXXXX")
    trap 'rm -f "$_times_file"' EXIT
    "$@" ) &
}

bg_run() {
  local dir=$1 name=$2; shift 2
  local t0=$SECONDS rc=0 c0
  children_cpu
  c0=$cpu_now
  "$@" > "$dir/$name.log" 2>&1 || rc=$?
  children_cpu
  echo "$rc $((SECONDS - t0)) $((cpu_now - c0))" > "$dir/$name.result"
  return "$rc"
}

bg_record() {
  local dir=$1 name=$2 note=$3 lines=${4:-} rc dt cpu
  if [ -n "$lines" ]; then tail -n "$lines" "$dir/$name.log" 2>/dev/null; else cat "$dir/$name.log" 2>/dev/null; fi
  if { read -r rc dt cpu < "$dir/$name.result"; } 2>/dev/null; then
    record "$name" "$rc" "$dt" "cpu ${cpu}s, $note"
  else
    summary+=("  FAIL  $name (not run, or it ended without a result: $dir/$name.log)")
    failed=$((failed + 1))
  fi
}
