#!/usr/bin/python3
"""PyTorch-eager forward benchmark of the FLatten authors' successors' own modules (Agent-Swin,
InLine-Swin, PolaFormer-Swin, MLLA), the baseline `attnscope bench --family NAME` compares its native
reading of the same weights against.

The modules are the authors' files themselves, loaded alone from their checkouts (LeapLabTHU/
Agent-Attention, LeapLabTHU/InLine, ZacharyMeng/PolaFormer, LeapLabTHU/MLLA) with a timm checkout on
PYTHONPATH: ATTNSCOPE_AUTHORS names a folder holding them as agent/, inline/, pola/ and mlla/. They run
in float32, eval mode, under torch.no_grad(), as their own eval loops run them.

Usage:
  bench/pytorch_authors.py --make NAME OUTDIR
      builds NAME (agent_swin_tiny, inline_swin_tiny, pola_swin_tiny, mlla_tiny: the released shapes at 224
      px) with the authors' own initialisation and writes OUTDIR/model.pth ({"model": state_dict}, as their
      training scripts save it) and OUTDIR/config.json ({"architecture": the registered name}).
  bench/pytorch_authors.py --model OUTDIR/model.pth [--threads N] [--runs R] [--warmup W]
      times the authors' module on those weights and prints one JSON line: {"median_ms", "min_ms", "runs",
      "threads", "family"}.
"""

import argparse
import json
import os
import statistics
import sys
import time

import eager_baseline  # first: Debian's torch, and tests/python on the import path
import torch
from fixture_tools import module_at

TINY_SWIN = dict(img_size=224, patch_size=4, num_classes=1000, embed_dim=96, depths=[2, 2, 6, 2],
                 num_heads=[3, 6, 12, 24], window_size=56, drop_path_rate=0.0)

# name -> (checkout, file, class, constructor arguments, the name attnscope's registry knows it by)
MODELS = {
    "agent_swin_tiny": ("agent", "agent_transformer/models/agent_swin.py", "AgentSwinTransformer",
                        dict(TINY_SWIN, attn_type="AAAB", agent_num=[9, 16, 49, 49]), "agent_swin_tiny"),
    "inline_swin_tiny": ("inline", "models/inline_swin.py", "InLineSwin", dict(TINY_SWIN, attn_type="IIIS"),
                         "inline_swin_tiny"),
    "pola_swin_tiny": ("pola", "models/pola_swin.py", "PolaSwinTransformer",
                       dict(TINY_SWIN, attn_type="LLSS", alpha=4, kernel_size=5), "pola_swin_tiny_patch4_224"),
    "mlla_tiny": ("mlla", "models/mlla.py", "MLLA",
                  dict(img_size=224, num_classes=1000, embed_dim=64, depths=[2, 4, 8, 4], num_heads=[2, 4, 8, 16],
                       drop_path_rate=0.0), "mlla_tiny"),
}


def build(name):
    authors = os.environ.get("ATTNSCOPE_AUTHORS", "")
    checkout, path, cls, kwargs, _ = MODELS[name]
    file = os.path.join(authors, checkout, path)
    if not os.path.isfile(file):
        sys.exit(f"{name}: the authors' {path} is not under ATTNSCOPE_AUTHORS={authors!r}/{checkout} (fetch their "
                 "repository there; a timm checkout goes on PYTHONPATH)")
    return getattr(module_at(file), cls)(**kwargs).eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--make", nargs=2, metavar=("NAME", "OUTDIR"))
    parser.add_argument("--model")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    eager_baseline.add_device_argument(parser)
    args = parser.parse_args()
    if args.make:
        name, out = args.make
        if name not in MODELS:
            sys.exit("no authors' module for %r (have: %s)" % (name, ", ".join(sorted(MODELS))))
        torch.manual_seed(0)
        model = build(name)
        os.makedirs(out, exist_ok=True)
        torch.save({"model": model.state_dict()}, os.path.join(out, "model.pth"))
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump({"architecture": MODELS[name][4]}, f)
        return 0
    if not args.model:
        parser.error("--model or --make is required")
    with open(os.path.join(os.path.dirname(args.model), "config.json")) as f:
        architecture = json.load(f)["architecture"]
    name = next(name for name, spec in MODELS.items() if spec[4] == architecture)
    torch.set_num_threads(args.threads)
    device = eager_baseline.use_device(args.device)
    model = build(name)
    model.load_state_dict(torch.load(args.model, map_location="cpu")["model"], strict=True)
    model = model.to(device)
    image = eager_baseline.fixed_input(224, seed=1).to(device)
    samples = []
    with torch.no_grad():
        for i in range(args.warmup + args.runs):
            start = time.perf_counter()
            model(image)
            eager_baseline.synchronize(device)
            if i >= args.warmup:
                samples.append((time.perf_counter() - start) * 1000.0)
    print(json.dumps({"median_ms": statistics.median(samples), "min_ms": min(samples), "runs": args.runs,
                      "threads": args.threads, "family": name}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
