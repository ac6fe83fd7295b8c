# Sourced by tools/test.sh and tools/check.sh: run named steps, time them, and keep a summary.
#   step NAME CMD...          run CMD, print "==> NAME: CMD", record PASS/FAIL with its seconds and CPU seconds
#   record NAME RC SECONDS [NOTE]   record a step that ran some other way (e.g. in the background)
#   track NAME FUNCTION       run FUNCTION (which calls step/record) in the background, its output to a log
#   wait_tracks NAME...       wait for every track, print each one's log as it ends, then add their steps to the
#                             summary in the order NAME...
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
TRACKS=$(mktemp -d "${TMPDIR:-/tmp}/steps-tracks.XXXXXX")
trap 'rm -rf "$_times_file" "$TRACKS"' EXIT
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

track_pids=()
track_names=()
track() {
  local name=$1 fn=$2
  # a subshell of its own: its own summary, counts and CPU accounting (`times` sees its own children only)
  ( summary=(); failed=0; passed=0; _times_file="$TRACKS/$name.times"
    "$fn" > "$TRACKS/$name.log" 2>&1
    printf '%s\n' "${summary[@]}" > "$TRACKS/$name.summary"
    echo "$passed $failed" > "$TRACKS/$name.counts" ) &
  track_pids+=("$!")
  track_names+=("$name")
}

wait_tracks() {
  local t0=$SECONDS i name p f line
  local remaining=("${!track_pids[@]}") still pids lines
  while [ "${#remaining[@]}" -gt 0 ]; do
    pids=()
    for i in "${remaining[@]}"; do pids+=("${track_pids[$i]}"); done
    wait -n "${pids[@]}" 2>/dev/null || true
    still=()
    for i in "${remaining[@]}"; do
      if kill -0 "${track_pids[$i]}" 2>/dev/null; then
        still+=("$i")
      else
        wait "${track_pids[$i]}" 2>/dev/null || true
        echo
        echo "---- track ${track_names[$i]} ended after $((SECONDS - t0)) s ----"
        cat "$TRACKS/${track_names[$i]}.log"
      fi
    done
    remaining=("${still[@]}")
  done
  for name in "$@"; do
    if [ -f "$TRACKS/$name.counts" ]; then
      mapfile -t lines < "$TRACKS/$name.summary"
      for line in "${lines[@]}"; do [ -n "$line" ] && summary+=("$line"); done
      read -r p f < "$TRACKS/$name.counts"
      passed=$((passed + p))
      failed=$((failed + f))
    else
      summary+=("  FAIL  $name (the track ended without a summary)")
      failed=$((failed + 1))
    fi
  done
  track_pids=()
  track_names=()
}
