#!/usr/bin/env bash
# The whole test suite from any state: installs what is missing, builds, runs every test.
# --sanitize: the same suite built with AddressSanitizer and UndefinedBehaviorSanitizer into
# build-sanitize/; a sanitizer finding fails the test it happens in. Leaks of third-party
# libraries (LibTorch, fontconfig, Mesa...) are named in tests/sanitizer/lsan.supp.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sanitize" ]; then
  scripts/setup.sh --packages-only
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTNSCOPE_SANITIZE=ON
  nice cmake --build build-sanitize
  export ASAN_OPTIONS=detect_leaks=1:strict_init_order=1:detect_stack_use_after_return=0
  export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  exec ctest --test-dir build-sanitize --output-on-failure --parallel 2 --timeout 3000
fi
scripts/setup.sh
ctest --test-dir build --output-on-failure --parallel 2
