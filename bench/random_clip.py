#!/usr/bin/python3
"""Writes a random-weight CLIP of ViT-B/16's shape in OpenAI's layout (scripts/train_demo_clip.py's
module tree, clip/model.py's keys; visual width 768, 12 blocks, patch 16 at 224 px = 197 tokens; text
width 512, 12 blocks, context 77, OpenAI's vocabulary size), float16 as OpenAI releases CLIP, for
`attnscope bench --analysis` (the textspan view's cost of a new prompt).

Usage: bench/random_clip.py --out FILE.safetensors
prints one JSON line: {"path", "parameters"}
"""
import argparse
import json
import os
import sys

import eager_baseline  # noqa: F401  (first: Debian's torch, and tests/python on the import path)
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from safetensors_io import save_file  # noqa: E402
from train_demo_clip import CLIP  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = CLIP(512, 224, 16, 768, 12, 77, 49408, 512, 12)
    save_file({name: tensor.detach() for name, tensor in model.state_dict().items()}, args.out, dtype=torch.float16)
    print(json.dumps({"path": args.out, "parameters": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
