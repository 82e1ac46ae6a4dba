#!/usr/bin/env bash
# Rewrites the reference pages generated from the binary's tables (a test checks they are current):
# docs/commands.md (every command and option) and docs/analysis_outputs.md (each analysis's files).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build --target attnscope
build/attnscope reference > docs/commands.md.new && mv docs/commands.md.new docs/commands.md
build/attnscope reference --outputs > docs/analysis_outputs.md.new && mv docs/analysis_outputs.md.new docs/analysis_outputs.md
echo "wrote docs/commands.md and docs/analysis_outputs.md"
