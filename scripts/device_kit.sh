#!/usr/bin/env bash
# Prepares build-device/, the folder a GPU machine's call carries beside the working tree (at most
# 30 MB): Debian's packages of the engine's small libraries unpacked into build-device/carried/
# (headers and shared libraries: nlohmann-json, yaml-cpp, utf8proc, zlib, libpng, libjpeg-turbo,
# sentencepiece),
# and build-device/models/, one test checkpoint of every family for the parity table (written by
# the test suite's Python fixtures: run scripts/test.sh first). Runs here, where apt works.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=build-device
packages=(nlohmann-json3-dev libyaml-cpp-dev libyaml-cpp0.7 libutf8proc-dev libutf8proc2 zlib1g-dev zlib1g
          libpng-dev libpng16-16 libjpeg62-turbo-dev libjpeg62-turbo libsentencepiece-dev libsentencepiece0)
data=build/tests/data
models=(parity_cases/vit_softmax.safetensors parity_cases/vit_registers.safetensors parity_cases/vit_focused_pe_t.safetensors
        parity_cases/vit_enhanced_lcm.safetensors parity_cases/vit_anchor.safetensors hub_cases/hf_vit
        hub_cases/clip_full.pth hub_cases/dinov2_reg.pth hier_cases/swin_a.safetensors
        hier_cases/fswin_a.safetensors hier_cases/pvt_a.safetensors hier_cases/fpvt_a.safetensors
        part2_cases/l2vit_a.safetensors part2_cases/care_a.safetensors part2_cases/cswin_a.safetensors
        eva_cases/dinov3_s16 eva_cases/eva02_s14 eva_cases/pe_core_s16 eva_cases/siglip2_b16 eva_cases/beitv2_b16 eva_cases/cait_xxs24
        eva_cases/meta_dinov3.pth eva_cases/hf_siglip successor_cases/agent_deit.safetensors
        successor_swin_cases/agent_swin.pth successor_swin_cases/inline_swin.pth
        successor_swin_cases/pola_swin.pth successor_pvt_cases/agent_pvt successor_pvt_cases/inline_pvt.pth
        successor_pvt_cases/pola_pvt successor_cswin_cases/agent_cswin successor_cswin_cases/inline_cswin
        mlla_cases/mlla)
for model in "${models[@]}"; do
  if [ ! -e "$data/$model" ]; then
    echo "device_kit: $data/$model is missing: run scripts/test.sh first (its Python fixtures write it)" >&2
    exit 1
  fi
done

rm -rf "$kit.partial"
mkdir -p "$kit.partial/debs" "$kit.partial/carried" "$kit.partial/models"
# (apt says it downloads "unsandboxed as root" when run as root: harmless here.)
(cd "$kit.partial/debs" && apt-get download -q "${packages[@]}" > /dev/null 2>&1)
for deb in "$kit.partial"/debs/*.deb; do dpkg-deb -x "$deb" "$kit.partial/carried"; done
# What a build does not read: documentation, manuals, static archives.
rm -rf "$kit.partial"/debs "$kit.partial"/carried/usr/share/doc "$kit.partial"/carried/usr/share/man \
       "$kit.partial"/carried/usr/share/lintian
find "$kit.partial/carried" -name '*.a' -delete
# Debian's development links point at /lib/... (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13): made
# relative, so that they reach the carried file wherever the folder is unpacked.
while read -r link; do
  target=$(readlink "$link")
  if [[ "$target" == /* ]]; then
    [ -e "$kit.partial/carried$target" ] || { echo "device_kit: $link points outside the packages" >&2; exit 1; }
    ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$kit.partial/carried$target")" "$link"
  fi
done < <(find "$kit.partial/carried" -type l)
for model in "${models[@]}"; do
  # A family prefix keeps the names apart (two folders hold an a.safetensors-like name).
  cp -r "$data/$model" "$kit.partial/models/$(basename "$(dirname "$model")")__$(basename "$model")"
done
rm -rf "$kit"
mv "$kit.partial" "$kit"
bytes=$(du -sb "$kit" | cut -f1)
echo "device_kit: $kit is $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB" \
     "($(du -sh "$kit/carried" | cut -f1) carried libraries, $(du -sh "$kit/models" | cut -f1) models," \
     "${#models[@]} checkpoints)"
if [ "$bytes" -ge 30000000 ]; then
  echo "device_kit: more than 30 MB: the device call carries 64 MiB with the working tree" >&2
  exit 1
fi
