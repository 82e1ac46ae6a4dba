#!/usr/bin/env bash
# One call on a GPU machine (at most 9 minutes): builds the engine-only attnscope against that
# machine's LibTorch (the CUDA one inside its PyTorch wheel) and the libraries build-device/ carries
# (scripts/device_kit.sh), checks with ldd that nothing else is linked, then runs
# `attnscope device-check --device cuda`: the parity table (every family and variant on CUDA against
# the CPU) and the bench table (against eager PyTorch on CUDA in the same call). Everything goes
# under $OUT: device_check.json (both tables), device_check.log, ldd.txt, machine.json.
#
#   OUT=DIR scripts/device_check.sh              on the GPU machine
#   OUT=DIR scripts/device_check.sh --rehearse   here: the same steps on the CPU, with Debian's
#                                                LibTorch and python3-torch, one timed run each
set -euo pipefail
cd "$(dirname "$0")/.."
rehearse=0
[ "${1:-}" = "--rehearse" ] && rehearse=1
: "${OUT:?set OUT to the folder the results go to}"
mkdir -p "$OUT"
exec > >(tee "$OUT/device_check.log") 2>&1
kit=$PWD/build-device
if [ ! -d "$kit/carried" ] || [ ! -d "$kit/models" ]; then
  echo "device_check: no build-device/: run scripts/device_kit.sh first (on a machine with apt)" >&2
  exit 2
fi
start=$(date +%s)
if [ $rehearse = 1 ]; then
  device=cpu python=/usr/bin/python3 jobs=$(nproc) timing=(--runs 1 --warmup 0) torch_prefix=
else
  device=cuda python=$(command -v python3) jobs=$(nproc) timing=(--runs 10 --warmup 3)
  torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
fi
# LibTorch's headers ask for C++17 up to 2.12 and C++20 from 2.13 on.
cxx_standard=$("$python" -c 'import torch, re
major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
print(20 if (major, minor) >= (2, 13) else 17)')
"$python" - > "$OUT/machine.json" <<'PY'
import json, os, platform, torch
info = {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
        "cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
if torch.cuda.is_available():
    info["gpu"] = torch.cuda.get_device_name(0)
print(json.dumps(info))
PY
echo "device_check: $(cat "$OUT/machine.json")"
echo "device_check: build-device/ is $(du -sh "$kit" | cut -f1)"

cmake -S . -B build-engine -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTNSCOPE_ENGINE_ONLY=ON \
  -DATTNSCOPE_CARRIED="$kit/carried" -DCMAKE_CXX_STANDARD="$cxx_standard" \
  ${torch_prefix:+-DCMAKE_PREFIX_PATH="$torch_prefix"} > "$OUT/configure.txt"
grep 'attnscope' "$OUT/configure.txt" || true
cmake --build build-engine -j "$jobs" > "$OUT/build.txt" || { tail -40 "$OUT/build.txt"; exit 1; }
echo "device_check: built in $(( $(date +%s) - start )) s"

# Every library the binary loads must be LibTorch's (a library LibTorch itself loads), carried, or
# the C and C++ runtime.
ldd build-engine/attnscope > "$OUT/ldd.txt"
torch_closure=$(awk '$1 ~ /^lib(torch|c10)/ && $3 ~ /^\// {print $3}' "$OUT/ldd.txt" |
                while read -r lib; do basename "$lib"; ldd "$lib" | awk '{print $1}'; done | sort -u)
runtime='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libstdc\+\+\.so|libgcc_s\.so|libpthread\.so|libdl\.so|librt\.so|libgomp\.so)'
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || path=$name
  name=$(basename "$name")
  if [[ "$path" == "$kit/carried/"* ]]; then why=carried
  elif [[ "$name" =~ $runtime ]]; then why=runtime
  elif grep -qxF "$name" <<< "$torch_closure"; then why=libtorch
  else why=UNEXPECTED
  fi
  [ "$path" = "not" ] && why="NOT FOUND"
  printf '  %-10s %-36s %s\n' "$why" "$name" "$path"
done < "$OUT/ldd.txt" | tee "$OUT/ldd_check.txt"
if grep -q 'UNEXPECTED\|NOT FOUND' "$OUT/ldd_check.txt"; then
  echo "device_check: the binary links something that is neither LibTorch's, carried nor the runtime" >&2
  exit 1
fi

status=0
build-engine/attnscope device-check --device "$device" --models "$kit/models" --python "$python" "${timing[@]}" \
  --json "$OUT/device_check.json" || status=$?
echo "device_check: $( [ $status = 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - start )) s"
exit $status
