#!/usr/bin/python3
"""PyTorch-eager forward benchmark of a timm-layout ViT/DeiT, the baseline attnscope's C++ runtime is
compared against.

The model is tests/python/reference_vit.py (an independent reference written from
../shared/reference/attention-variants.md); weights come from a safetensors file read with
tests/python/safetensors_io.py. The softmax path is timm's eager Attention (qkv linear,
reshape/permute, q*scale @ k^T, softmax, @ v, proj; LayerNorm, GELU) in float32 under
torch.no_grad(), on a fixed [1,3,S,S] input (S = --size, 224 by default).

Usage:
  bench/pytorch_forward.py --model FILE.safetensors [--heads H] [--threads N] [--runs R] [--warmup W]
                           [--variant softmax|linear|focused|enhanced|window|anchor|agent|inline|mlla|pola]
                           [--p P] [--window W] [--anchors M] [--agents N] [--pola-alpha A] [--no-dwc] [--norm all|head] [--size S] [--device D]
      prints one JSON line: {"median_ms", "min_ms", "runs", "threads", "variant", "tokens"}
  bench/pytorch_forward.py --make-deit tiny|small OUT.safetensors [--seed S]
      writes random-init DeiT weights (timm key names, F32) so C++ and Python bench the same file.
"""

import argparse
import json
import statistics
import sys
import time

import eager_baseline  # first: Debian's torch, and tests/python on the import path
import reference_vit
import safetensors_io
import torch

DEIT = {"tiny": (192, 12, 3), "small": (384, 12, 6)}  # dim, depth, heads


def make_deit(size, path, seed=0, patch=16, img=224, classes=1000, mlp_ratio=4):
    """Random-init DeiT (timm init style: trunc-normal std 0.02 for weights, zero biases, unit LN)."""
    dim, depth, _ = DEIT[size]
    torch.manual_seed(seed)
    tn = lambda *shape: torch.nn.init.trunc_normal_(torch.empty(*shape), std=0.02, a=-0.04, b=0.04)
    n = (img // patch) ** 2
    hidden = dim * mlp_ratio
    sd = {
        "patch_embed.proj.weight": tn(dim, 3, patch, patch),
        "patch_embed.proj.bias": torch.zeros(dim),
        "cls_token": tn(1, 1, dim),
        "pos_embed": tn(1, n + 1, dim),
        "norm.weight": torch.ones(dim), "norm.bias": torch.zeros(dim),
        "head.weight": tn(classes, dim), "head.bias": torch.zeros(classes),
    }
    for i in range(depth):
        p = f"blocks.{i}."
        sd.update({
            p + "norm1.weight": torch.ones(dim), p + "norm1.bias": torch.zeros(dim),
            p + "attn.qkv.weight": tn(3 * dim, dim), p + "attn.qkv.bias": torch.zeros(3 * dim),
            p + "attn.proj.weight": tn(dim, dim), p + "attn.proj.bias": torch.zeros(dim),
            p + "norm2.weight": torch.ones(dim), p + "norm2.bias": torch.zeros(dim),
            p + "mlp.fc1.weight": tn(hidden, dim), p + "mlp.fc1.bias": torch.zeros(hidden),
            p + "mlp.fc2.weight": tn(dim, hidden), p + "mlp.fc2.bias": torch.zeros(dim),
        })
    safetensors_io.save_file(sd, path, metadata={"format": "pt"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    eager_baseline.add_vit_arguments(ap, runs=20, warmup=3, model_required=False)
    ap.add_argument("--variant", default="softmax", choices=reference_vit.VARIANTS)
    ap.add_argument("--p", type=float, default=3.0, help="focusing factor (focused)")
    ap.add_argument("--window", type=int, default=0, help="window side (0 = global; 'window' uses 7)")
    ap.add_argument("--anchors", type=int, default=0, help="anchor count (anchor)")
    ap.add_argument("--agents", type=int, default=0, help="agent count (agent)")
    ap.add_argument("--pola-alpha", dest="alpha", type=float, default=4.0, help="power range (pola)")
    ap.add_argument("--no-dwc", action="store_true", help="skip the FLatten DWC of native focused models")
    ap.add_argument("--norm", default="all", choices=("all", "head"), help="f_p norms (focused)")
    ap.add_argument("--make-deit", nargs=2, metavar=("SIZE", "OUT"), help="write random DeiT weights and exit")
    ap.add_argument("--seed", type=int, default=0, help="seed of --make-deit")
    args = ap.parse_args()

    if args.make_deit:
        size, out = args.make_deit
        if size not in DEIT:
            ap.error(f"--make-deit SIZE must be one of {sorted(DEIT)}")
        make_deit(size, out, seed=args.seed)
        return 0
    if not args.model:
        ap.error("--model is required")
    eager_baseline.check_counts(ap, args)

    settings = reference_vit.Settings(variant=args.variant, p=args.p, window=args.window,
                                      anchors=args.anchors, agents=args.agents, alpha=args.alpha,
                                      dwc=not args.no_dwc,
                                      norm=args.norm)
    model, x = eager_baseline.load_vit(args)
    times = []
    with torch.no_grad():
        try:
            model.forward(x, settings)  # validates the settings against the model
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        for _ in range(args.warmup):
            model.forward(x, settings)
        for _ in range(args.runs):
            t0 = time.perf_counter()
            logits = model.forward(x, settings)
            eager_baseline.synchronize(model.device)
            times.append((time.perf_counter() - t0) * 1e3)
    if not torch.isfinite(logits).all():
        print("non-finite logits", file=sys.stderr)
        return 1
    tokens = (x.shape[2] // model.patch[0]) * (x.shape[3] // model.patch[1]) + model.num_prefix
    print(json.dumps({"median_ms": round(statistics.median(times), 4), "min_ms": round(min(times), 4),
                      "runs": args.runs, "threads": torch.get_num_threads(), "variant": args.variant,
                      "tokens": tokens}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
