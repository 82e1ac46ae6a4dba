#!/usr/bin/env bash
# One call on a GPU machine (at most 9 minutes): builds the engine-only attnscope against that
# machine's LibTorch (the CUDA one inside its PyTorch wheel) and the libraries build-device/ carries
# (scripts/device_kit.sh), checks with ldd that nothing else is linked, then runs
# `attnscope device-check --device cuda`: the parity table (every family and variant on CUDA against
# the CPU) and the bench table (against eager PyTorch on CUDA in the same call). Everything goes
# under $OUT: device_check.json (both tables), device_check.log, build.txt (configure and build),
# ldd.txt, ldd_check.txt, machine.json, run_<device>/ and run_cpu/ (`attnscope run` on the bundled
# model and image), analyze_<analysis>_<device>/ and analyze_<analysis>_cpu/ (`attnscope analyze`),
# and bench.txt (`attnscope bench` on the device).
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
# LibTorch's headers ask for C++17 up to 2.11 and C++20 from 2.12 on; a build that fails is tried
# once more with the other standard before the check gives up.
read -r cxx_standard torch_dir cxx11_abi < <("$python" -c 'import os, re, torch
major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
print(20 if (major, minor) >= (2, 12) else 17, os.path.dirname(torch.__file__), int(torch._C._GLIBCXX_USE_CXX11_ABI))')
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
[ $rehearse = 1 ] || export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}

# LibTorch through its TorchConfig.cmake first; if that configure fails (it also looks for the CUDA
# toolkit, cuDNN and NVTX), through the wheel's libraries directly (cmake/Torch.cmake).
# Configure and build output go to build.txt, one section per try.
build=build-engine
configure() {  # standard, how LibTorch is found (config or wheel)
  local args=(-S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTNSCOPE_ENGINE_ONLY=ON
              -DATTNSCOPE_CARRIED="$kit/carried" -DCMAKE_CXX_STANDARD="$1")
  if [ "$2" = wheel ]; then
    args+=(-DATTNSCOPE_TORCH_WHEEL="$torch_dir" -DATTNSCOPE_TORCH_CXX11_ABI="$cxx11_abi")
  else
    args+=(-DATTNSCOPE_TORCH_WHEEL= ${torch_prefix:+-DCMAKE_PREFIX_PATH="$torch_prefix"})
  fi
  rm -rf "$build"
  echo "=== configure: C++$1, LibTorch by $2" >> "$OUT/build.txt"
  cmake "${args[@]}" >> "$OUT/build.txt" 2>&1 || { echo "device_check: configure (C++$1, $2) failed"; return 1; }
}
compile() {
  echo "=== build: C++$1" >> "$OUT/build.txt"
  cmake --build "$build" -j "$jobs" -- -k 0 >> "$OUT/build.txt" 2>&1 ||
    { echo "device_check: build (C++$1) failed:"; grep -m 20 -A 3 'error' "$OUT/build.txt" || true; return 1; }
}
: > "$OUT/build.txt"
how=${DEVICE_CHECK_TORCH:-config}  # DEVICE_CHECK_TORCH=wheel: straight to the wheel's libraries
if [ "$how" = wheel ] || ! configure "$cxx_standard" config; then
  how=wheel
  configure "$cxx_standard" wheel || { tail -30 "$OUT/build.txt"; exit 1; }
fi
grep 'attnscope' "$OUT/build.txt" || true
if ! compile "$cxx_standard"; then
  other=$(( cxx_standard == 17 ? 20 : 17 ))
  configure "$other" "$how" && compile "$other" || exit 1
fi
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
status=0
# A failed ldd check fails the script but the check still runs: a device call is rare.
if grep -q 'UNEXPECTED\|NOT FOUND' "$OUT/ldd_check.txt"; then
  echo "device_check: the binary links something that is neither LibTorch's, carried nor the runtime" >&2
  status=1
fi
# `run` and analyses as a researcher calls them (the bundled demo model and image) on the device and,
# beside it on the GPU, on the CPU: their files under run_<device>/ and analyze_<analysis>_<device>/,
# and how far the device's arrays are from the CPU's. The engine-only build draws no figures: the
# figures' analyses write their numbers and say so. The CLIP analyses run on the bundled CLIP demo
# model with a text prompt (analyze_clip_*).
analyses=(gradcam gradcam++ relevance rollout spectrum fp logit-lens dla pca dino-masks)
clip_analyses=(zero-shot chefer-clip legrad textspan gradcam)
clip=(--model assets/models/clip.safetensors --image assets/images/sign_4.png --prompt "a photo of a sign"
      --target "text:a photo of a sign")
analyze_on() {  # analyze_on WHERE NAME ARGS...: into analyze_NAME_WHERE/, its report beside it
  local where=$1 name=$2
  shift 2
  build-engine/attnscope analyze "$@" --device "$where" --out "$OUT/analyze_${name}_$where" --overwrite \
    > "$OUT/analyze_${name}_$where.txt" 2>&1 ||
    { cat "$OUT/analyze_${name}_$where.txt"; echo "device_check: analyze $name --device $where failed" >&2; status=1; }
}
for where in $(printf '%s\n' "$device" cpu | sort -u); do
  build-engine/attnscope run --device "$where" --out "$OUT/run_$where" --overwrite ||
    { echo "device_check: run --device $where failed" >&2; status=1; }
  for analysis in "${analyses[@]}"; do analyze_on "$where" "$analysis" --analysis "$analysis"; done
  for analysis in "${clip_analyses[@]}"; do analyze_on "$where" "clip_$analysis" --analysis "$analysis" "${clip[@]}"; done
done
echo "device_check: run and analyze (${analyses[*]}; CLIP: ${clip_analyses[*]}) on" \
  "$(printf '%s\n' "$device" cpu | sort -u | paste -sd' ')"
if [ $rehearse = 0 ]; then
  "$python" - "$OUT" "$device" <<'PY' || status=1
import array, ast, glob, os, sys
types = {"<f4": "f", "<f8": "d", "<i8": "q", "<i4": "i", "|u1": "B", "|b1": "B"}
def load(path):  # attnscope's NPY files, little-endian, C order (numpy may be absent)
    data = open(path, "rb").read()
    length = int.from_bytes(data[8:10], "little") if data[6] == 1 else int.from_bytes(data[8:12], "little")
    start = (10 if data[6] == 1 else 12) + length
    header = ast.literal_eval(data[start - length:start].decode("latin1"))
    assert header["descr"] in types and not header["fortran_order"], header
    return header["shape"], array.array(types[header["descr"]], data[start:])
out, device = sys.argv[1], sys.argv[2]
for folder in sorted(glob.glob(os.path.join(out, "*_cpu"))):
    other = folder[:-len("cpu")] + device
    for cpu in sorted(glob.glob(os.path.join(folder, "*.npy"))):
        (shape, a), (_, b) = load(cpu), load(os.path.join(other, os.path.basename(cpu)))
        assert len(a) == len(b), (cpu, len(a), len(b))
        diff = max((abs(x - y) for x, y in zip(a, b)), default=0.0)
        print(f"{os.path.basename(folder)[:-4]}: {os.path.basename(cpu)} {list(shape)}: device - cpu max |diff| {diff:.3g}")
PY
fi
# DEVICE_CHECK_MODELS (a folder) and DEVICE_CHECK_ARGS (e.g. "--sides 1036") narrow a rerun.
read -r -a extra <<< "${DEVICE_CHECK_ARGS:-}"
build-engine/attnscope device-check --device "$device" --models "${DEVICE_CHECK_MODELS:-$kit/models}" \
  --python "$python" "${timing[@]}" "${extra[@]}" --json "$OUT/device_check.json" || status=$(( $? > status ? $? : status ))
# `bench` on the device: the plain ViT shapes up to ViT-L/14 at 518 px, softmax and focused, against
# eager PyTorch on the same device, with the device's own GEMM limit; into bench.txt.
if [ $rehearse = 1 ]; then
  bench_args=(--sizes tiny --variants softmax --runs 1 --warmup 0 --rounds 1)
else
  bench_args=(--sizes tiny,small,vit-b16,vit-b16-384,vit-l14,vit-l14-518 --variants softmax,focused --runs 20
              --warmup 5 --rounds 1)
fi
build-engine/attnscope bench --device "$device" --python "$python" "${bench_args[@]}" 2>&1 | tee "$OUT/bench.txt" ||
  status=$(( ${PIPESTATUS[0]} > status ? ${PIPESTATUS[0]} : status ))
echo "device_check: $( [ $status = 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - start )) s"
exit $status
