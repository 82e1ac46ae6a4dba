#!/usr/bin/env bash
# Writes every fixture the C++ tests compare against; each generator is independent of the C++ code
# and of the others, so they run side by side (one per core): most of a generator's time is Python
# importing torch, which a second core halves.
set -euo pipefail
python=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
run_generator() {
  local name
  name=$(basename "$1" .py)
  mkdir -p "$out/${name#make_}"
  "$python" "$1" "$out/${name#make_}" || { echo "make_all_fixtures: $name failed" >&2; return 1; }
}
export -f run_generator
export python out
# xargs exits non-zero when any generator did; every generator still runs, so one failure does
# not hide another.
printf '%s\0' "$here"/make_*.py | xargs -0 -n 1 -P "$(nproc)" bash -c 'run_generator "$1"' _
