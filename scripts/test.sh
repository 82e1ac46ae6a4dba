#!/usr/bin/env bash
# The whole test suite from any state: installs what is missing, builds, runs every test.
# --sanitize: the same suite built with AddressSanitizer and UndefinedBehaviorSanitizer into
# build-sanitize/; a sanitizer finding fails the test it happens in. Leaks of third-party
# libraries (LibTorch, fontconfig, Mesa...) are named in tests/sanitizer/lsan.supp.
# --kernels: the suite once per OpenBLAS kernel set (OPENBLAS_CORETYPE Prescott, Sandybridge,
# Haswell, Zen) and linear-layer back end (ATTNSCOPE_LINEAR blas, onednn), 8 runs that must all
# pass: CI runs on whichever machine submits, and float results differ in the last bits between
# them. The Python references are written again under each kernel set, as such a machine would.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--kernels" ]; then
  scripts/setup.sh
  cmake --build build
  failed=()
  for core in Prescott Sandybridge Haswell Zen; do
    for linear in blas onednn; do
      echo "== OPENBLAS_CORETYPE=$core ATTNSCOPE_LINEAR=$linear"
      OPENBLAS_CORETYPE=$core ATTNSCOPE_LINEAR=$linear \
        ctest --test-dir build --output-on-failure --parallel 2 -E '^FuzzReplay$' || failed+=("$core/$linear")
    done
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "test.sh --kernels: failed under ${failed[*]}"
    exit 1
  fi
  echo "test.sh --kernels: all 8 kernel and back-end combinations passed"
  exit 0
fi
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
cmake --build build
ctest --test-dir build --output-on-failure --parallel 2
