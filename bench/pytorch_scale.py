#!/usr/bin/python3
"""PyTorch-eager baseline of `attnscope bench --scale`: a DINOv2-S/14-with-4-registers-shaped ViT in
timm's layout (reg_token, pos_embed of 37 x 37 patches without the class position, LayerScale),
random weights, run on an image as timm's eager Attention computes it (q*scale @ k^T, softmax, @ v)
in float32 under torch.no_grad(), with the position embedding resized bicubic with antialias.

With --family dinov3: a DINOv3-S/16 in timm's registered settings (rotary positions, storage tokens, no
pos_embed), as timm's Eva computes it eagerly. With --family siglip2: a SigLIP 2 B/16 at 512 px in timm's
registered settings (vit_base_patch16_siglip_512: no class token, a 32 x 32 pos_embed, the attention-pool
head), as timm's VisionTransformer computes it eagerly.

Usage:
  bench/pytorch_scale.py [--family dinov2|dinov3|siglip2] --make OUT.safetensors|OUT_FOLDER [--seed S]
      writes the random weights (metadata num_heads=6) that both sides run
  bench/pytorch_scale.py --model FILE --image PNG --threads N --runs R [--compare OUTPUT.npy]
      prints one JSON line: {"median_ms", "runs", "threads", "max_abs_diff" (against --compare)}
  bench/pytorch_scale.py --model FILE --size S [--warmup W] [--runs R] [--device D]
      the same timing on a fixed random [1, 3, S, S] input on device D (`attnscope device-check`)
"""
import argparse
import json
import math
import statistics
import sys
import time

import eager_baseline  # first: Debian's torch, and tests/python on the import path
import numpy as np
import safetensors_io
import torch
import torch.nn.functional as F
from PIL import Image

DIM, DEPTH, HEADS, PATCH, GRID, REGISTERS = 384, 12, 6, 14, 37, 4
MEAN, STD = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
# DINOv3-S/16 as timm registers it (vit_small_patch16_dinov3): patch 16, no pos_embed, rotary
# positions 'dinov3' (base 100, halves rotated), 4 storage tokens, qkv without bias, LayerScale,
# LayerNorm eps 1e-5, the mean of the normed patches.
DINOV3_PATCH, DINOV3_EPS, DINOV3_ARCHITECTURE = 16, 1e-5, "vit_small_patch16_dinov3"


def block_weights(tn, C, p, qkv_bias=True, scales=()):
    """One timm block's random weights under prefix p (drawn in the order: qkv, proj, fc1, fc2), the
    layer-scale vectors `scales` (their key names) at 0.1."""
    w = {p + "norm1.weight": torch.ones(C), p + "norm1.bias": torch.zeros(C), p + "attn.qkv.weight": tn(3 * C, C)}
    if qkv_bias:
        w[p + "attn.qkv.bias"] = torch.zeros(3 * C)
    w.update({p + "attn.proj.weight": tn(C, C), p + "attn.proj.bias": torch.zeros(C)})
    for key in scales:
        w[p + key] = torch.full((C,), 0.1)
    w.update({p + "norm2.weight": torch.ones(C), p + "norm2.bias": torch.zeros(C),
              p + "mlp.fc1.weight": tn(4 * C, C), p + "mlp.fc1.bias": torch.zeros(4 * C),
              p + "mlp.fc2.weight": tn(C, 4 * C), p + "mlp.fc2.bias": torch.zeros(C)})
    return w


def block(x, sd, p, heads, eps, scales=(None, None), rope=None):
    """timm's Block (Eva's, with `rope` = (sin, cos, prefix tokens not rotated)) with fused attention off:
    q*scale @ k^T, softmax, @ v; the layer scale of the keys in `scales` where given."""
    B, _, C = x.shape
    d = C // heads
    h = F.layer_norm(x, (C,), sd[p + "norm1.weight"], sd[p + "norm1.bias"], eps)
    q, k, v = F.linear(h, sd[p + "attn.qkv.weight"], sd.get(p + "attn.qkv.bias")).reshape(B, -1, 3, heads, d).permute(
        2, 0, 3, 1, 4)
    if rope is not None:
        sin, cos, n = rope
        q = torch.cat([q[:, :, :n], rotate(q[:, :, n:], sin, cos)], dim=2)
        k = torch.cat([k[:, :, :n], rotate(k[:, :, n:], sin, cos)], dim=2)
    o = ((q * d ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v
    a = F.linear(o.transpose(1, 2).reshape(B, -1, C), sd[p + "attn.proj.weight"], sd[p + "attn.proj.bias"])
    x = x + (a if scales[0] is None else sd[p + scales[0]] * a)
    h = F.layer_norm(x, (C,), sd[p + "norm2.weight"], sd[p + "norm2.bias"], eps)
    h = F.linear(F.gelu(F.linear(h, sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"])), sd[p + "mlp.fc2.weight"],
                 sd[p + "mlp.fc2.bias"])
    return x + (h if scales[1] is None else sd[p + scales[1]] * h)


def make(path, seed):
    torch.manual_seed(seed)
    tn = lambda *shape: torch.nn.init.trunc_normal_(torch.empty(*shape), std=0.02, a=-0.04, b=0.04)
    sd = {"cls_token": tn(1, 1, DIM), "reg_token": tn(1, REGISTERS, DIM), "pos_embed": tn(1, GRID * GRID, DIM),
          "patch_embed.proj.weight": tn(DIM, 3, PATCH, PATCH), "patch_embed.proj.bias": torch.zeros(DIM),
          "norm.weight": torch.ones(DIM), "norm.bias": torch.zeros(DIM)}
    for b in range(DEPTH):
        sd.update(block_weights(tn, DIM, f"blocks.{b}.", scales=("ls1.gamma", "ls2.gamma")))
    safetensors_io.save_file(sd, path, metadata={"format": "pt", "num_heads": str(HEADS)})


def make_dinov3(folder, seed):
    """model.safetensors and the config.json timm's save_for_hf writes (its registered name)."""
    import os
    torch.manual_seed(seed)
    tn = lambda *shape: torch.nn.init.trunc_normal_(torch.empty(*shape), std=0.02, a=-0.04, b=0.04)
    sd = {"cls_token": tn(1, 1, DIM), "reg_token": tn(1, REGISTERS, DIM),
          "patch_embed.proj.weight": tn(DIM, 3, DINOV3_PATCH, DINOV3_PATCH), "patch_embed.proj.bias": torch.zeros(DIM),
          "norm.weight": torch.ones(DIM), "norm.bias": torch.zeros(DIM)}
    for b in range(DEPTH):
        sd.update(block_weights(tn, DIM, f"blocks.{b}.", qkv_bias=False, scales=("gamma_1", "gamma_2")))
    os.makedirs(folder, exist_ok=True)
    safetensors_io.save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architecture": DINOV3_ARCHITECTURE, "num_classes": 0}, f)


# SigLIP 2 B/16 at 512 px as timm registers it (vit_base_patch16_siglip_512): no class token, pos_embed of
# 32 x 32 patches, qkv with bias, LayerNorm eps 1e-6, GELU, the attention-pool head (a latent query,
# q / kv / proj, its norm and MLP) over the normed tokens.
SIGLIP_DIM, SIGLIP_HEADS, SIGLIP_PATCH, SIGLIP_GRID = 768, 12, 16, 32
SIGLIP_ARCHITECTURE = "vit_base_patch16_siglip_512"


def make_siglip2(folder, seed):
    """model.safetensors and the config.json timm's save_for_hf writes (its registered name)."""
    import os
    torch.manual_seed(seed)
    C = SIGLIP_DIM
    tn = lambda *shape: torch.nn.init.trunc_normal_(torch.empty(*shape), std=0.02, a=-0.04, b=0.04)
    sd = {"pos_embed": tn(1, SIGLIP_GRID * SIGLIP_GRID, C), "patch_embed.proj.weight": tn(C, 3, SIGLIP_PATCH, SIGLIP_PATCH),
          "patch_embed.proj.bias": torch.zeros(C), "norm.weight": torch.ones(C), "norm.bias": torch.zeros(C),
          "attn_pool.latent": tn(1, 1, C), "attn_pool.q.weight": tn(C, C), "attn_pool.q.bias": torch.zeros(C),
          "attn_pool.kv.weight": tn(2 * C, C), "attn_pool.kv.bias": torch.zeros(2 * C),
          "attn_pool.proj.weight": tn(C, C), "attn_pool.proj.bias": torch.zeros(C),
          "attn_pool.norm.weight": torch.ones(C), "attn_pool.norm.bias": torch.zeros(C),
          "attn_pool.mlp.fc1.weight": tn(4 * C, C), "attn_pool.mlp.fc1.bias": torch.zeros(4 * C),
          "attn_pool.mlp.fc2.weight": tn(C, 4 * C), "attn_pool.mlp.fc2.bias": torch.zeros(C)}
    for b in range(DEPTH):
        sd.update(block_weights(tn, C, f"blocks.{b}."))
    os.makedirs(folder, exist_ok=True)
    safetensors_io.save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architecture": SIGLIP_ARCHITECTURE, "num_classes": 0}, f)


def patch_tokens_with_positions(sd, x, patch, grid, dim):
    """The patch embedding plus the grid x grid position table, resized bicubically (antialiased, as
    timm's resample_abs_pos_embed) where the input's grid differs: [B, H * W, dim]."""
    x = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=patch)
    _, _, H, W = x.shape
    x = x.flatten(2).transpose(1, 2)
    pos = sd["pos_embed"].reshape(1, grid, grid, dim).permute(0, 3, 1, 2)
    if (H, W) != (grid, grid):
        pos = F.interpolate(pos, size=(H, W), mode="bicubic", antialias=True, align_corners=False)
    return x + pos.permute(0, 2, 3, 1).reshape(1, H * W, dim)


def forward_siglip2(sd, x):
    """timm's VisionTransformer forward with global_pool 'map' (fused attention off), float32, no_grad."""
    C, heads = SIGLIP_DIM, SIGLIP_HEADS
    d = C // heads
    x = patch_tokens_with_positions(sd, x, SIGLIP_PATCH, SIGLIP_GRID, C)
    B = x.shape[0]
    for b in range(DEPTH):
        x = block(x, sd, f"blocks.{b}.", heads, 1e-6)
    x = F.layer_norm(x, (C,), sd["norm.weight"], sd["norm.bias"], 1e-6)
    # timm's AttentionPoolLatent (latent_len 1, pool 'token')
    q = F.linear(sd["attn_pool.latent"].expand(B, -1, -1), sd["attn_pool.q.weight"], sd["attn_pool.q.bias"])
    q = q.reshape(B, 1, heads, d).transpose(1, 2)
    k, v = F.linear(x, sd["attn_pool.kv.weight"], sd["attn_pool.kv.bias"]).reshape(B, -1, 2, heads, d).permute(
        2, 0, 3, 1, 4)
    o = ((q * d ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v
    o = F.linear(o.transpose(1, 2).reshape(B, 1, C), sd["attn_pool.proj.weight"], sd["attn_pool.proj.bias"])
    h = F.layer_norm(o, (C,), sd["attn_pool.norm.weight"], sd["attn_pool.norm.bias"], 1e-6)
    o = o + F.linear(F.gelu(F.linear(h, sd["attn_pool.mlp.fc1.weight"], sd["attn_pool.mlp.fc1.bias"])),
                     sd["attn_pool.mlp.fc2.weight"], sd["attn_pool.mlp.fc2.bias"])
    return o[:, 0]


def dinov3_rope(h, w, d):
    """timm's RotaryEmbeddingDinoV3.get_embed(shape) in float32, as its dynamic-size forward builds it."""
    periods = 100.0 ** (2 * torch.arange(d // 4, dtype=torch.float32) / (d // 2))
    ch = torch.arange(0.5, h, dtype=torch.float32) / h
    cw = torch.arange(0.5, w, dtype=torch.float32) / w
    coords = 2.0 * torch.stack(torch.meshgrid(ch, cw, indexing="ij"), dim=-1).flatten(0, 1) - 1.0
    angles = (2 * math.pi * coords[:, :, None] / periods[None, None, :]).flatten(1).tile(2)
    return angles.sin(), angles.cos()


def rotate(t, sin, cos):  # timm apply_rot_embed_cat(half=True) on the patch tokens
    t1, t2 = t.chunk(2, dim=-1)
    return t * cos + torch.cat([-t2, t1], dim=-1) * sin


def forward_dinov3(sd, x):
    """timm's Eva forward (fused attention off: q*scale @ k^T, softmax, @ v), float32, no_grad."""
    x = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=DINOV3_PATCH)
    B, _, H, W = x.shape
    x = x.flatten(2).transpose(1, 2)
    x = torch.cat([sd["cls_token"].expand(B, -1, -1), sd["reg_token"].expand(B, -1, -1), x], 1)
    d = DIM // HEADS
    sin, cos = dinov3_rope(H, W, d)
    n = 1 + REGISTERS
    for b in range(DEPTH):
        x = block(x, sd, f"blocks.{b}.", HEADS, DINOV3_EPS, ("gamma_1", "gamma_2"), (sin, cos, n))
    x = F.layer_norm(x, (DIM,), sd["norm.weight"], sd["norm.bias"], DINOV3_EPS)
    return x[:, n:].mean(1)


def forward(sd, x):
    x = patch_tokens_with_positions(sd, x, PATCH, GRID, DIM)
    B = x.shape[0]
    x = torch.cat([sd["cls_token"].expand(B, -1, -1), sd["reg_token"].expand(B, -1, -1), x], 1)
    for b in range(DEPTH):
        x = block(x, sd, f"blocks.{b}.", HEADS, 1e-6, ("ls1.gamma", "ls2.gamma"))
    return F.layer_norm(x, (DIM,), sd["norm.weight"], sd["norm.bias"], 1e-6)[:, 0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--make")
    parser.add_argument("--family", default="dinov2", choices=["dinov2", "dinov3", "siglip2"],
                        help="dinov3, siglip2: --make writes a folder (model.safetensors, config.json); --model is "
                             "that folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model")
    parser.add_argument("--image")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--compare")
    parser.add_argument("--size", type=int, help="a fixed random input of this side instead of --image")
    parser.add_argument("--warmup", type=int, default=0)
    eager_baseline.add_device_argument(parser)
    args = parser.parse_args()
    if args.make:
        {"dinov2": make, "dinov3": make_dinov3, "siglip2": make_siglip2}[args.family](args.make, args.seed)
        return 0
    torch.set_num_threads(args.threads)
    device = eager_baseline.use_device(args.device)
    weights = args.model if args.family == "dinov2" else args.model + "/model.safetensors"
    sd = eager_baseline.on_device(safetensors_io.load_file(weights), device)
    run_forward = {"dinov2": forward, "dinov3": forward_dinov3, "siglip2": forward_siglip2}[args.family]
    if args.size:
        x = eager_baseline.fixed_input(args.size, seed=1)
    else:
        rgb = np.asarray(Image.open(args.image).convert("RGB"), dtype=np.float32) / 255.0
        x = torch.from_numpy(((rgb - MEAN) / STD).transpose(2, 0, 1)[None].copy())
    x = x.to(device)
    times = []
    with torch.no_grad():
        for i in range(args.warmup + args.runs):
            start = time.perf_counter()
            out = run_forward(sd, x)
            eager_baseline.synchronize(device)
            if i >= args.warmup:
                times.append(1000 * (time.perf_counter() - start))
    result = {"median_ms": statistics.median(times), "runs": args.runs, "threads": args.threads}
    if args.compare:
        result["max_abs_diff"] = float(np.abs(out[0].cpu().numpy() - np.load(args.compare)).max())
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
