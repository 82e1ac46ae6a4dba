#!/usr/bin/env bash
# The README's statistics over a folder: mean attention distance and entropy per head of the softmax,
# linear, FLatten and L2ViT demo models, their effective receptive fields, and linear CKA of softmax
# against FLatten, over COUNT held-out glyph images (seeds from 10^12, never trained on).
# Usage: scripts/folder_stats_example.sh [COUNT] [ATTNSCOPE]   (prints Markdown; the outputs stay in
# $OUT, default /tmp/attnscope-folder-stats)
set -euo pipefail
cd "$(dirname "$0")/.."
count="${1:-64}"
attnscope="${2:-build/attnscope}"
out="${OUT:-/tmp/attnscope-folder-stats}"
rm -rf "$out"
"$attnscope" glyphs --out "$out/heldout" --count "$count" --seed 1000000000000 > /dev/null
models="softmax linear flatten l2vit"
for name in $models; do
  "$attnscope" analyze --analysis headstats --model "assets/models/$name.safetensors" --images "$out/heldout" \
    --out "$out/headstats_$name" > /dev/null 2>&1
  "$attnscope" analyze --analysis erf --model "assets/models/$name.safetensors" --images "$out/heldout" \
    --out "$out/erf_$name" > /dev/null 2>&1
done
"$attnscope" analyze --analysis cka --model assets/models/softmax.safetensors \
  --compare-model assets/models/flatten.safetensors --images "$out/heldout" --out "$out/cka" > /dev/null 2>&1
"${PYTHON:-/usr/bin/python3}" - "$out" $models <<'PY'  # Debian's, with numpy
import csv, json, os, sys
import numpy as np
out, models = sys.argv[1], sys.argv[2:]
print("Mean attention distance (pixels; min / mean / max over heads) and mean entropy (nats) per layer:\n")
stats = {m: list(csv.DictReader(open(os.path.join(out, f"headstats_{m}", "head_stats.csv")))) for m in models}
layers = sorted({int(r["layer"]) for r in stats[models[0]]})
print("| layer | " + " | ".join(f"{m} distance | {m} entropy" for m in models) + " |")
print("|---|" + "---|---|" * len(models))
for layer in layers:
    cells = []
    for m in models:
        rows = [r for r in stats[m] if int(r["layer"]) == layer]
        d = [float(r["mean_distance"]) for r in rows]
        e = [float(r["entropy"]) for r in rows]
        cells.append(f"{min(d):.1f} / {np.mean(d):.1f} / {max(d):.1f} | {np.mean(e):.2f}")
    print(f"| {layer} | " + " | ".join(cells) + " |")
print("\nEffective receptive field of the last block (area ratio of the smallest centred square holding each "
      "share of log10(ERF + 1)):\n")
print("| model | 20 % | 30 % | 50 % | 99 % |\n|---|---|---|---|---|")
for m in models:
    ratios = [r["area_ratio"] for r in csv.DictReader(open(os.path.join(out, f"erf_{m}", "erf_ratios.csv")))]
    print(f"| {m} | " + " | ".join(r if r == "nan" else f"{float(r):.3f}" for r in ratios) + " |")
cka = np.load(os.path.join(out, "cka", "cka.npy"))
print("\nLinear CKA, softmax blocks (rows) against FLatten blocks (columns):\n")
print("| | " + " | ".join(f"FLatten {j}" for j in range(cka.shape[1])) + " |")
print("|---|" + "---|" * cka.shape[1])
for i in range(cka.shape[0]):
    print(f"| softmax {i} | " + " | ".join(f"{v:.3f}" for v in cka[i]) + " |")
PY
