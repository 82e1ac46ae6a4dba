#!/usr/bin/env bash
# Writes every fixture the C++ tests compare against; each generator is independent of the C++ code.
set -euo pipefail
python=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for gen in "$here"/make_*.py; do
  name=$(basename "$gen" .py)
  mkdir -p "$out/${name#make_}"
  "$python" "$gen" "$out/${name#make_}"
done
