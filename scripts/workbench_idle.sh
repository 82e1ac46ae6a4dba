#!/bin/bash
# The workbench's CPU use while it waits for the user: starts `attnscope gui` on the bundled default
# model and image under Xvfb, lets it load and run its first inference, then reads the CPU time of
# the whole process (every thread, /proc/PID/stat utime + stime) over a quiet interval. Prints one
# line: seconds, CPU seconds, percent of one core, threads. Extra arguments go to `attnscope gui`.
#
#   scripts/workbench_idle.sh [--settle S] [--seconds S] [gui options]   (default: settle 15 s, measure 10 s)
set -euo pipefail
cd "$(dirname "$0")/.."
settle=15
seconds=10
while [ $# -gt 0 ]; do
  case "$1" in
    --settle) settle=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) break ;;
  esac
done
binary=${ATTNSCOPE:-build/attnscope}
[ -x "$binary" ] || { echo "workbench_idle.sh: no $binary (build first: cmake --build build)" >&2; exit 2; }
command -v xvfb-run >/dev/null || { echo "workbench_idle.sh: needs xvfb-run (apt install xvfb)" >&2; exit 2; }

log=$(mktemp)
trap 'kill "$gui" 2>/dev/null || true; rm -f "$log"' EXIT
xvfb-run -a -s "-screen 0 1600x1000x24" "$binary" gui "$@" >"$log" 2>&1 &
wrapper=$!
# The gui process is xvfb-run's grandchild: find it by its parent chain.
gui=""
for _ in $(seq 1 100); do
  gui=$(pgrep -f -n "^$binary gui" || true)
  [ -n "$gui" ] && break
  sleep 0.1
done
[ -n "$gui" ] || { echo "workbench_idle.sh: the workbench did not start:" >&2; cat "$log" >&2; exit 1; }
sleep "$settle"
kill -0 "$gui" 2>/dev/null || { echo "workbench_idle.sh: the workbench ended early:" >&2; cat "$log" >&2; exit 1; }
ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
before=$(cpu_ticks "$gui")
sleep "$seconds"
after=$(cpu_ticks "$gui")
threads=$(ls "/proc/$gui/task" | wc -l)
kill "$gui" 2>/dev/null || true
wait "$wrapper" 2>/dev/null || true
awk -v t="$((after - before))" -v hz="$ticks" -v s="$seconds" -v n="$threads" \
  'BEGIN { printf "idle %d s: %.2f CPU s, %.2f%% of one core, %d threads\n", s, t / hz, 100 * t / hz / s, n }'
