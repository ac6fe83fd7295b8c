# Sourced by tools/test.sh and tools/check.sh: run named steps, time them, and keep a summary.
#   step NAME CMD...          run CMD, print "==> NAME: CMD", record PASS/FAIL with its seconds and CPU seconds
#   record NAME RC SECONDS [NOTE]   record a step that ran some other way (e.g. in the background)
# After the steps: ${summary[@]} holds one line per step, $passed and $failed count them.
# A step's CPU seconds are the user + system time of the processes it ran (bash's `times` for finished children,
# so they include everything those processes waited for, and a background job reaped while the step ran):
# on a busy machine the wall seconds grow with the other jobs, the CPU seconds hardly do.
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
