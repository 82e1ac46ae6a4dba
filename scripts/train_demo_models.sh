#!/usr/bin/env bash
# Trains the demo models shipped in assets/models (one after another: the eight DeiT-shaped ones take
# about 4-10 minutes each on 2 CPU cores, FLatten-Swin and PolaFormer-Swin about 25, L2ViT about 12,
# MLLA about 15, the CLIP about as its card says) and writes a model card beside each.
# Usage: scripts/train_demo_models.sh [ATTNSCOPE]
set -euo pipefail
cd "$(dirname "$0")/.."
attnscope="${1:-build/attnscope}"
for variant in softmax flatten focused linear l2vit anchor agent inline; do
  "$attnscope" train --variant "$variant" --steps 700 --batch 64 --lr 0.001 --seed 0 --eval-samples 1000 \
    --out "assets/models/$variant.safetensors"
done
# The hierarchical demo: at lr 1e-3 it stays at chance (its pooled head has no class token to
# route the sign through); at 3e-4 it learns, slowly, so it gets more steps.
"$attnscope" train --variant flatten_swin --steps 2000 --batch 64 --lr 0.0003 --seed 0 --eval-samples 1000 \
  --out assets/models/flatten_swin.safetensors
# PolaFormer-Swin, the same shape with PolaFormer's blocks in stage 0: like FLatten-Swin it stays at
# chance at lr 1e-3, so it takes FLatten-Swin's recipe.
"$attnscope" train --variant pola_swin --steps 2000 --batch 64 --lr 0.0003 --seed 0 --eval-samples 1000 \
  --out assets/models/pola_swin.safetensors
# The whole L2ViT architecture (conv stem, local windows, global linear attention with the LCM)
# learns at the DeiT recipe's lr 1e-3: its loss leaves chance after about 160 steps.
"$attnscope" train --variant l2vit_hierarchical --steps 1500 --batch 64 --lr 0.001 --seed 0 --eval-samples 1000 \
  --out assets/models/l2vit_hierarchical.safetensors
# The whole MLLA architecture (conv stem, MLLA blocks in three stages) learns at lr 1e-3 as L2ViT's
# does: 0.99 training accuracy by step 400, so 500 steps.
"$attnscope" train --variant mlla --steps 500 --batch 64 --lr 0.001 --seed 0 --eval-samples 1000 \
  --out assets/models/mlla.safetensors
# The demo CLIP (OpenAI's layout with its text tower; scripts/train_demo_clip.py, Debian's
# python3-torch): contrastive on the sign task's images with captions generated from what was drawn
# (letters.csv), on 2 threads (a run on other threads or another BLAS sums in
# another order: the same recipe, not the same bits).
clip_data="$(mktemp -d)"
trap 'rm -rf "$clip_data"' EXIT
"$attnscope" glyphs --format npy --count 60000 --seed 0 --out "$clip_data/train"
"$attnscope" glyphs --format npy --count 1000 --seed 1000000000000 --out "$clip_data/held_out"
scripts/train_demo_clip.py --train "$clip_data/train" --held-out "$clip_data/held_out" \
  --steps 1000 --batch 128 --patch 8 --text-layers 3 --digit-only 0.5 --lr 0.001 --warmup 100 --seed 0 \
  --threads 2 --checkpoint-every 250 --out assets/models/clip.safetensors
