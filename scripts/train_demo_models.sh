#!/usr/bin/env bash
# Trains the seven demo models shipped in assets/models (one after another, about 10-15 minutes each
# on 2 CPU cores) and writes a model card beside each. Usage: scripts/train_demo_models.sh [ATTNSCOPE]
set -euo pipefail
cd "$(dirname "$0")/.."
attnscope="${1:-build/attnscope}"
for variant in softmax flatten focused linear l2vit anchor flatten_swin; do
  "$attnscope" train --variant "$variant" --steps 700 --batch 64 --lr 0.001 --seed 0 --eval-samples 1000 \
    --out "assets/models/$variant.safetensors"
done
