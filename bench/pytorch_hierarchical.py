#!/usr/bin/python3
"""PyTorch-eager forward benchmark of Swin and PVT v2, the baseline `attnscope bench --family` compares
its C++ runtime against.

The models are tests/python/reference_hier.py (independent references written from the authors'
code: timm's swin_transformer.py and pvt_v2.py), run in float32 under torch.no_grad() with explicit
attention probabilities, as timm's non-fused attention computes them.

Usage:
  bench/pytorch_hierarchical.py --make swin|pvt OUT.safetensors [--seed S]
      writes random-init Swin-T (96, depths 2-2-6-2, heads 3-6-12-24, window 7) or PVT-v2-b2 (64-128-320-512,
      depths 3-4-6-3, heads 1-2-5-8, sr 8-4-2-1) weights in timm's layout, with attnscope_arch metadata.
  bench/pytorch_hierarchical.py --model FILE.safetensors [--kernels native,linear,...] [--threads N] [--runs R]
                                [--warmup W] [--size S]
      times the forward with each attention kernel (reference_hier.KERNELS: the model's own, or swapped
      into every block as attnscope's variants swap it) and prints one JSON line: {"kernels": {kernel:
      {"median_ms", "min_ms", "gemm_gflop"}}, "runs", "threads", "family"}, with the first kernel's three
      numbers at the top level too (gemm_gflop: the matrix-product work of one forward, counted as it
      runs: eager_baseline.GemmCounter)
"""

import argparse
import json
import statistics
import sys
import time

import eager_baseline  # first: Debian's torch, and tests/python on the import path
import reference_hier
import safetensors_io
import torch


def truncated(*shape):
    return torch.nn.init.trunc_normal_(torch.empty(*shape), std=0.02, a=-0.04, b=0.04)


def layer_norm(sd, prefix, dim):
    sd[prefix + ".weight"] = torch.ones(dim)
    sd[prefix + ".bias"] = torch.zeros(dim)


def linear(sd, prefix, out_dim, in_dim, bias=True):
    sd[prefix + ".weight"] = truncated(out_dim, in_dim)
    if bias:
        sd[prefix + ".bias"] = torch.zeros(out_dim)


def make_swin(classes=1000):
    dims, depths, heads, window = [96, 192, 384, 768], [2, 2, 6, 2], [3, 6, 12, 24], 7
    sd = {"patch_embed.proj.weight": truncated(dims[0], 3, 4, 4), "patch_embed.proj.bias": torch.zeros(dims[0])}
    layer_norm(sd, "patch_embed.norm", dims[0])
    for s, (dim, depth) in enumerate(zip(dims, depths)):
        if s > 0:
            layer_norm(sd, f"layers.{s}.downsample.norm", 4 * dims[s - 1])
            sd[f"layers.{s}.downsample.reduction.weight"] = truncated(dim, 4 * dims[s - 1])
        for b in range(depth):
            p = f"layers.{s}.blocks.{b}."
            layer_norm(sd, p + "norm1", dim)
            linear(sd, p + "attn.qkv", 3 * dim, dim)
            linear(sd, p + "attn.proj", dim, dim)
            sd[p + "attn.relative_position_bias_table"] = truncated((2 * window - 1) ** 2, heads[s])
            layer_norm(sd, p + "norm2", dim)
            linear(sd, p + "mlp.fc1", 4 * dim, dim)
            linear(sd, p + "mlp.fc2", dim, 4 * dim)
    layer_norm(sd, "norm", dims[-1])
    linear(sd, "head.fc", classes, dims[-1])
    arch = {"family": "swin", "heads": heads, "window": window, "img_size": 224}
    return sd, arch


def make_pvt(classes=1000):
    dims, depths, heads, srs, ratios = [64, 128, 320, 512], [3, 4, 6, 3], [1, 2, 5, 8], [8, 4, 2, 1], [8, 8, 4, 4]
    sd = {"patch_embed.proj.weight": truncated(dims[0], 3, 7, 7), "patch_embed.proj.bias": torch.zeros(dims[0])}
    layer_norm(sd, "patch_embed.norm", dims[0])
    for s, (dim, depth) in enumerate(zip(dims, depths)):
        if s > 0:
            sd[f"stages.{s}.downsample.proj.weight"] = truncated(dim, dims[s - 1], 3, 3)
            sd[f"stages.{s}.downsample.proj.bias"] = torch.zeros(dim)
            layer_norm(sd, f"stages.{s}.downsample.norm", dim)
        for b in range(depth):
            p = f"stages.{s}.blocks.{b}."
            layer_norm(sd, p + "norm1", dim)
            linear(sd, p + "attn.q", dim, dim)
            linear(sd, p + "attn.kv", 2 * dim, dim)
            linear(sd, p + "attn.proj", dim, dim)
            if srs[s] > 1:
                sd[p + "attn.sr.weight"] = truncated(dim, dim, srs[s], srs[s])
                sd[p + "attn.sr.bias"] = torch.zeros(dim)
                layer_norm(sd, p + "attn.norm", dim)
            layer_norm(sd, p + "norm2", dim)
            hidden = dim * ratios[s]
            linear(sd, p + "mlp.fc1", hidden, dim)
            sd[p + "mlp.dwconv.weight"] = truncated(hidden, 1, 3, 3)
            sd[p + "mlp.dwconv.bias"] = torch.zeros(hidden)
            linear(sd, p + "mlp.fc2", dim, hidden)
        layer_norm(sd, f"stages.{s}.norm", dim)
    linear(sd, "head", classes, dims[-1])
    arch = {"family": "pvt_v2", "heads": heads, "sr_ratios": srs, "linear": False, "img_size": 224}
    return sd, arch


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--make", nargs=2, metavar=("FAMILY", "OUT"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model")
    parser.add_argument("--kernels", default="native",
                        help="comma-separated attention kernels to time: " + ", ".join(reference_hier.KERNELS))
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--size", type=int, default=224)
    eager_baseline.add_device_argument(parser)
    args = parser.parse_args()
    makers = {"swin": make_swin, "pvt": make_pvt}
    if args.make:
        family, out = args.make
        if family not in makers:
            sys.exit("no eager baseline for family %r (have: %s)" % (family, ", ".join(sorted(makers))))
        torch.manual_seed(args.seed)
        sd, arch = makers[family]()
        safetensors_io.save_file(sd, out, metadata={"format": "pt", "attnscope_arch": json.dumps(arch)})
        return 0
    if not args.model:
        parser.error("--model or --make is required")
    kernels = [k for k in args.kernels.split(",") if k]
    unknown = [k for k in kernels if k not in reference_hier.KERNELS]
    if unknown or not kernels:
        sys.exit("no eager kernel %r (have: %s)" % (",".join(unknown), ", ".join(reference_hier.KERNELS)))
    torch.set_num_threads(args.threads)
    device = eager_baseline.use_device(args.device)
    sd, metadata = safetensors_io.load_file(args.model, with_metadata=True)
    arch = json.loads(metadata["attnscope_arch"])
    model = reference_hier.build(eager_baseline.on_device(sd, device), arch, dtype=torch.float32)
    image = eager_baseline.fixed_input(args.size, seed=1).to(device)
    timed = {}
    for kernel in kernels:
        variant = reference_hier.Variant(kernel=kernel)
        samples = []
        with torch.no_grad():
            for i in range(args.warmup + args.runs):
                start = time.perf_counter()
                model.forward(image, variant)
                eager_baseline.synchronize(device)
                elapsed = (time.perf_counter() - start) * 1000.0
                if i >= args.warmup:
                    samples.append(elapsed)
        timed[kernel] = {"median_ms": statistics.median(samples), "min_ms": min(samples),
                         "gemm_gflop": eager_baseline.gemm_gflop(lambda: model.forward(image, variant))}
    print(json.dumps({**timed[kernels[0]], "kernels": timed, "runs": args.runs, "threads": args.threads,
                      "family": arch["family"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
