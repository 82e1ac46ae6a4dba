#!/usr/bin/python3
"""PyTorch-eager Grad-CAM timing on a timm-layout ViT, the baseline `attnscope bench --analysis`
compares its Grad-CAM against (same safetensors weights, same thread count).

Two eager baselines, each one forward and one backward, float32, fixed [1,3,224,224] input, target
layer norm1 of the last block, top-1 class:
- "library": what jacobgil/pytorch-grad-cam does on a torch.nn.Module: every weight requires grad, a
  forward hook keeps the layer output and retains its gradient, logit.backward() runs the whole
  backward (weight gradients included), then the cam.
- "lean": the same trick attnscope uses, in eager: weights do not require grad, the hook swaps in a
  detached leaf that does, torch.autograd.grad(logit, leaf).

Usage: bench/pytorch_gradcam.py --model FILE.safetensors [--heads H] [--threads N] [--runs R] [--warmup W]
prints one JSON line: {"library_ms", "lean_ms", "runs", "threads"}
"""

import argparse
import json
import sys

import eager_baseline  # first: Debian's torch, and tests/python on the import path
import torch


def retaining_gradient(y):
    y.retain_grad()
    return y


def grad_cam(model, x, lean):
    """One forward and backward at norm1 of the last block; the cam over the patch tokens."""
    prepare = (lambda y: y.detach().requires_grad_(True)) if lean else retaining_gradient
    with eager_baseline.keeping_layer_norm_output(model, model.blocks[-1]["n1"], {}, prepare) as kept:
        logits = model.forward(x)
    score = logits[0, logits[0].argmax()]
    if lean:
        grad = torch.autograd.grad(score, kept["a"])[0]
    else:
        score.backward()
        grad = kept["a"].grad
    P = model.num_prefix
    a = kept["a"].detach()[0, P:]
    g = grad[0, P:]
    cam = torch.relu(a @ g.mean(dim=0))
    cam = cam - cam.min()
    return cam / (cam.max() + 1e-7)


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    eager_baseline.add_vit_arguments(ap, runs=10, warmup=2)
    args = ap.parse_args()
    eager_baseline.check_counts(ap, args)
    model, x = eager_baseline.load_vit(args)
    lean = eager_baseline.median_ms(lambda: grad_cam(model, x, True), args.warmup, args.runs, model)
    eager_baseline.require_weight_gradients(model)
    library = eager_baseline.median_ms(lambda: grad_cam(model, x, False), args.warmup, args.runs, model)
    print(json.dumps({"library_ms": round(library, 4), "lean_ms": round(lean, 4), "runs": args.runs,
                      "threads": torch.get_num_threads()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
