#!/usr/bin/env bash
# Installs what attnscope needs from Debian 12 (only what is missing), then configures and builds the
# app, build/attnscope (with --packages-only: installs, nothing more). The test binary is built by
# scripts/test.sh. OpenBLAS replaces the reference BLAS that Debian's LibTorch otherwise uses (about
# 40x slower here).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake ninja-build g++ ccache pkg-config
  libtorch-dev libopenblas0-openmp
  libopencv-dev nlohmann-json3-dev libyaml-cpp-dev libgtest-dev
  libimgui-dev libglfw3-dev libcairo2-dev
  libutf8proc-dev libsentencepiece-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev
  python3-torch python3-numpy python3-pil python3-regex python3-sentencepiece
  xvfb xauth libgl1-mesa-dri poppler-utils
)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = "--packages-only" ] && exit 0
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target attnscope
