#!/usr/bin/env bash
# Runs one fuzz target with libFuzzer: scripts/fuzz.sh TARGET SECONDS
# TARGET: safetensors, checkpoint_zip, image, session, arch, yaml, sae or prompt_file (tests/fuzz/fuzz_TARGET.cpp).
# Builds with clang, ASan and UBSan into build-fuzz/ on first use. Inputs up to 1 MB; one over
# 2 GB of memory or 10 s is a failure. New inputs go to build-fuzz/corpus/TARGET, crashes to
# build-fuzz/crashes/TARGET/ (add them to tests/fuzz/corpus/TARGET/ once fixed); the checked-in
# seeds are tests/fuzz/corpus/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ ! -f "tests/fuzz/fuzz_$1.cpp" ]; then
  echo "usage: scripts/fuzz.sh TARGET [SECONDS]   (TARGET: safetensors checkpoint_zip image session arch yaml sae prompt_file)" >&2
  exit 2
fi
target=$1
seconds=${2:-60}
if ! command -v clang++-14 > /dev/null || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a > /dev/null 2>&1; then
  echo "fuzz.sh needs clang and libFuzzer: apt-get install clang-14 libclang-rt-14-dev" >&2
  exit 2
fi
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTNSCOPE_FUZZ=ON
fi
nice cmake --build build-fuzz --target "fuzz_$target"
work=build-fuzz/corpus/$target
crashes=build-fuzz/crashes/$target
mkdir -p "$work" "$crashes"
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
exec nice "build-fuzz/tests/fuzz/fuzz_$target" -max_len=1048576 -max_total_time="$seconds" -rss_limit_mb=2048 \
  -len_control=0 -malloc_limit_mb=2048 -timeout=10 -report_slow_units=1 -print_final_stats=1 -artifact_prefix="$crashes/" \
  "$work" "tests/fuzz/corpus/$target"
