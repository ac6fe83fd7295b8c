# Sourced by tools/test.sh and tools/check.sh: run named steps, time them, and keep a summary.
#   step NAME CMD...          run CMD, print "==> NAME: CMD", record PASS/FAIL with its seconds
#   record NAME RC SECONDS [NOTE]   record a step that ran some other way (e.g. in the background)
# After the steps: ${summary[@]} holds one line per step, $passed and $failed count them.
summary=()
failed=0
passed=0

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
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  record "$name" "$rc" $((SECONDS - t0))
}
