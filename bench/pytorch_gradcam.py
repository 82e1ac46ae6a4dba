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
import os
import statistics
import sys
import time

try:
    import torch
except ImportError:  # e.g. a pyenv python3 first on PATH: Debian's python3-torch lives in /usr/bin/python3
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import reference_vit  # noqa: E402


def grad_cam(model, x, lean):
    target = model.blocks[-1]["n1"]
    kept = {}
    original = model._ln

    def hooked(inp, wb):
        y = original(inp, wb)
        if wb is target:
            if lean:
                y = y.detach().requires_grad_(True)
            else:
                y.retain_grad()
            kept["a"] = y
        return y

    model._ln = hooked
    try:
        logits = model.forward(x)
    finally:
        model._ln = original
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


def median_ms(model, x, lean, warmup, runs):
    times = []
    for i in range(warmup + runs):
        for t in model.sd.values():
            t.grad = None
        t0 = time.perf_counter()
        grad_cam(model, x, lean)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--heads", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    if args.runs < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("--runs and --threads must be >= 1, --warmup >= 0")
    torch.set_num_threads(args.threads)
    model = reference_vit.load_model(args.model, heads=args.heads, dtype=torch.float32)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    lean = median_ms(model, x, True, args.warmup, args.runs)
    for t in model.sd.values():
        if t.is_floating_point():
            t.requires_grad_(True)
    library = median_ms(model, x, False, args.warmup, args.runs)
    print(json.dumps({"library_ms": round(library, 4), "lean_ms": round(lean, 4), "runs": args.runs,
                      "threads": torch.get_num_threads()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
