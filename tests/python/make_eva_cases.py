#!/usr/bin/python3
"""Generate attnscope's parity cases for the backbones researchers download in 2026, as timm hub folders
(model.safetensors + config.json as timm's save_for_hf writes them: the registered `architecture` and
`model_args` that reduce its size): DINOv3 S/16 and S+/16, EVA-02 S/14 and B/14, Perception Encoder core
S/16, SigLIP 2 B/16 and timm's CLIP B/16, random weights at reduced widths; one DINOv3 file without any
config (read from its keys alone: one head of timm's width 64, DINOv3's rotary positions, assumed). The reference is reference_eva.py (float64, written from timm's code).

Usage: /usr/bin/python3 tests/python/make_eva_cases.py OUTDIR

OUTDIR/<case>/model.safetensors, config.json; <case>.<size>.input.npy float32 [1,3,H,W];
<case>.<size>.output.npy float32 [1, out]; <case>.<size>.rows.npy float32 [L, heads, Q, T] (rows of the
queries, every layer and head); <case>.<size>.pool.npy float32 [heads, N] (the attention-pool head's
attention, when it has one). cases.json: list of {name, model, architecture, input, output, rows, queries,
grid [gh, gw], prefix, tokens, heads, pool (file | null), pool_tokens, rope (kind | "none"),
global_pool, eps}.
"""

import json
import math
import os
import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch

import reference_eva as ref
import safetensors_io
from fixture_tools import Init, output_folder, write_cases
from make_hub_cases import smooth_image, position_values

WIDTH, DEPTH, HEADS = 64, 2, 4


def linear(r, sd, name, fan_in, fan_out, bias=True, gain=1.0):
    sd[name + ".weight"] = r.normal([fan_out, fan_in], gain / math.sqrt(fan_in))
    if bias:
        sd[name + ".bias"] = r.normal([fan_out], 0.02)


def norm(r, sd, name, width):
    sd[name + ".weight"] = r.normal([width], 0.1, 1.0)
    sd[name + ".bias"] = r.normal([width], 0.05)


def qk_gain_qkv(r, sd, name, bias):
    C = WIDTH
    sd[name + ".weight"] = torch.cat([r.normal([C, C], 1.8 / math.sqrt(C)), r.normal([C, C], 1.8 / math.sqrt(C)),
                                      r.normal([C, C], 1.0 / math.sqrt(C))])
    if bias:
        sd[name + ".bias"] = r.normal([3 * C], 0.02)


def make_state(seed, spec):
    """A state dict in timm's keys for `spec` (see CASES)."""
    r = Init(seed)
    sd = {}
    C, P = WIDTH, spec["patch"]
    sd["patch_embed.proj.weight"] = r.normal([C, 3, P, P], 1.0 / math.sqrt(3 * P * P))
    if spec.get("patch_bias", True):
        sd["patch_embed.proj.bias"] = r.normal([C], 0.02)
    n_prefix = 0
    if spec.get("cls", True):
        sd["cls_token"] = r.normal([1, 1, C], 0.5)
        n_prefix += 1
    if spec.get("reg", 0):
        sd["reg_token"] = r.normal([1, spec["reg"], C], 0.5)
        n_prefix += spec["reg"]
    if spec.get("pos_grid"):
        g = spec["pos_grid"]
        sd["pos_embed"] = position_values(r, n_prefix if spec.get("pos_prefix", True) else 0, g, C).unsqueeze(0)
    if spec.get("norm_pre"):
        norm(r, sd, "norm_pre", C)
    for i in range(DEPTH):
        b = f"blocks.{i}."
        norm(r, sd, b + "norm1", C)
        qkv = spec.get("qkv", "fused")
        if qkv == "fused":
            qk_gain_qkv(r, sd, b + "attn.qkv", spec.get("qkv_bias", True))
        elif qkv == "qv_bias":
            qk_gain_qkv(r, sd, b + "attn.qkv", False)
            sd[b + "attn.q_bias"] = r.normal([C], 0.05)
            sd[b + "attn.v_bias"] = r.normal([C], 0.05)
        else:
            linear(r, sd, b + "attn.q_proj", C, C, True, 1.8)
            linear(r, sd, b + "attn.k_proj", C, C, False, 1.8)
            linear(r, sd, b + "attn.v_proj", C, C, True)
        if spec.get("attn_norm"):
            norm(r, sd, b + "attn.norm", C)
        linear(r, sd, b + "attn.proj", C, C, True, 0.6)
        norm(r, sd, b + "norm2", C)
        hidden = spec["hidden"]
        mlp = spec.get("mlp", "plain")
        if mlp == "swiglu":
            linear(r, sd, b + "mlp.fc1_g", C, hidden)
            linear(r, sd, b + "mlp.fc1_x", C, hidden)
        elif mlp == "packed":
            linear(r, sd, b + "mlp.fc1", C, 2 * hidden)
        else:
            linear(r, sd, b + "mlp.fc1", C, hidden)
        if spec.get("mlp_norm"):
            norm(r, sd, b + "mlp.norm", hidden)
        linear(r, sd, b + "mlp.fc2", hidden, C, True, 0.5)
        if spec.get("gamma"):
            sd[b + "gamma_1"] = r.uniform([C], 0.3, 1.0)
            sd[b + "gamma_2"] = r.uniform([C], 0.3, 1.0)
    if spec.get("final_norm", True):
        norm(r, sd, "norm", C)
    if spec.get("fc_norm"):
        norm(r, sd, "fc_norm", C)
    if spec.get("map"):
        sd["attn_pool.latent"] = r.normal([1, 1, C], 1.0)
        linear(r, sd, "attn_pool.q", C, C, True, 1.8)
        linear(r, sd, "attn_pool.kv", C, 2 * C, True, 1.4)
        linear(r, sd, "attn_pool.proj", C, C, True, 0.8)
        norm(r, sd, "attn_pool.norm", C)
        linear(r, sd, "attn_pool.mlp.fc1", C, 4 * C)
        linear(r, sd, "attn_pool.mlp.fc2", 4 * C, C, True, 0.5)
    if spec.get("classes"):
        linear(r, sd, "head", C, spec["classes"], True, 1.0)
    return {k: v.to(torch.float32).contiguous() for k, v in sd.items()}


# Each case: the registered name, the model_args that reduce it, the state dict's switches, the reference
# settings (what timm's constructor makes of the name), and the input sizes.
DINOV3_ROPE = {"kind": "dinov3", "temperature": 100.0, "half": True}
CASES = [
    dict(name="dinov3_s16", architecture="vit_small_patch16_dinov3", patch=16, reg=4, gamma=True,
         qkv_bias=False, hidden=4 * WIDTH, eps=1e-5, act="gelu", timm_class="Eva", global_pool="avg",
         rope=DINOV3_ROPE, sizes=[(64, 48), (48, 80)], num_classes=0),
    dict(name="dinov3_splus16", architecture="vit_small_plus_patch16_dinov3", patch=16, reg=4, gamma=True,
         qkv_bias=False, mlp="swiglu", hidden=4 * WIDTH, eps=1e-5, act="gelu", timm_class="Eva",
         global_pool="avg", rope=DINOV3_ROPE, sizes=[(64, 64), (32, 80)], num_classes=0),
    dict(name="eva02_s14", architecture="eva02_small_patch14_224", patch=14, pos_grid=4, qkv="qv_bias",
         mlp="packed", hidden=int(WIDTH * 4 * 2 / 3), final_norm=False, fc_norm=True, classes=10, eps=1e-6,
         act="gelu", timm_class="Eva", global_pool="avg", img_size=56,
         rope={"kind": "axial", "temperature": 10000.0, "grid_offset": 0.0, "xy": False, "ref": (16, 16),
               "half": False},
         sizes=[(56, 56), (70, 42)], num_classes=10),
    dict(name="eva02_b14", architecture="eva02_base_patch14_224", patch=14, pos_grid=4, qkv="separate",
         mlp="swiglu", mlp_norm=True, hidden=int(WIDTH * 4 * 2 / 3), final_norm=False, fc_norm=True, classes=10,
         eps=1e-6, act="gelu", timm_class="Eva", global_pool="avg", img_size=56,
         rope={"kind": "axial", "temperature": 10000.0, "grid_offset": 0.0, "xy": False, "ref": (16, 16),
               "half": False},
         sizes=[(56, 56)], num_classes=10),
    dict(name="pe_core_s16", architecture="vit_pe_core_small_patch16_384", patch=16, pos_grid=4, norm_pre=True,
         patch_bias=False, hidden=4 * WIDTH, map=True, classes=10, eps=1e-5, act="gelu", timm_class="Eva",
         global_pool="map", attn_pool_heads=8, img_size=64,
         rope={"kind": "axial", "temperature": 10000.0, "grid_offset": 1.0, "xy": True, "ref": (24, 24),
               "half": False},
         sizes=[(64, 64), (48, 80)], num_classes=10),
    dict(name="siglip2_b16", architecture="vit_base_patch16_siglip_224", patch=16, cls=False, pos_grid=4,
         hidden=4 * WIDTH, map=True, eps=1e-6, act="gelu", timm_class="VisionTransformer", global_pool="map",
         attn_pool_heads=HEADS, img_size=64, rope=None, sizes=[(64, 64)], num_classes=0),
    dict(name="clip_b16_timm", architecture="vit_base_patch16_clip_224", patch=16, pos_grid=4, norm_pre=True,
         patch_bias=False, hidden=4 * WIDTH, classes=10, eps=1e-5, act="gelu", timm_class="VisionTransformer",
         global_pool="token", img_size=64, rope=None, sizes=[(64, 64)], num_classes=10),
    # DINOv3's file alone: its keys, no config (rotary settings and the input size are assumed, and said).
    dict(name="dinov3_s16_bare", architecture=None, patch=16, reg=4, gamma=True, qkv_bias=False, heads=1,
         hidden=4 * WIDTH, eps=1e-6, act="gelu", timm_class="Eva", global_pool="avg", rope=DINOV3_ROPE,
         sizes=[(48, 64)], num_classes=0),
]


def config_json(spec):
    args = {"embed_dim": WIDTH, "depth": DEPTH, "num_heads": HEADS}
    if spec.get("img_size"):
        args["img_size"] = spec["img_size"]
    if spec["num_classes"]:
        args["num_classes"] = spec["num_classes"]
    return {"architecture": spec["architecture"], "num_classes": spec["num_classes"], "num_features": WIDTH,
            "global_pool": spec["global_pool"], "model_args": args,
            "pretrained_cfg": {"tag": "random", "input_size": [3, 64, 64], "interpolation": "bicubic",
                               "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "crop_pct": 1.0}}


def main(argv):
    out = output_folder(argv, __doc__)
    if out is None:
        return 2
    started = time.time()
    cases = []
    for index, spec in enumerate(CASES):
        name = spec["name"]
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        sd = make_state(1000 + index, spec)
        safetensors_io.save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        if spec["architecture"]:
            with open(os.path.join(folder, "config.json"), "w") as f:
                json.dump(config_json(spec), f, indent=2)
        heads = spec.get("heads", HEADS)
        cfg = {"patch": spec["patch"], "heads": heads, "eps": spec["eps"], "act": spec["act"],
               "timm_class": spec["timm_class"], "global_pool": spec["global_pool"],
               "pos_grid": (spec.get("pos_grid"), spec.get("pos_grid")), "rope": spec["rope"],
               "attn_pool_heads": spec.get("attn_pool_heads", HEADS)}
        for h, w in spec["sizes"]:
            tag = f"{name}.{h}x{w}"
            img = smooth_image(7 * index + h + w, h, w)
            output, probs, pool = ref.forward(sd, img, cfg)
            gh, gw = h // spec["patch"], w // spec["patch"]
            prefix = int(spec.get("cls", True)) + spec.get("reg", 0)
            tokens = prefix + gh * gw
            queries = list(range(prefix)) + [prefix, prefix + (gh * gw) // 2, tokens - 1]
            rows = torch.stack([p[0][:, queries, :] for p in probs])  # [L, heads, Q, T]
            np.save(os.path.join(out, tag + ".input.npy"), img.numpy())
            np.save(os.path.join(out, tag + ".output.npy"), output.to(torch.float32).numpy())
            np.save(os.path.join(out, tag + ".rows.npy"), rows.to(torch.float32).numpy())
            pool_file = None
            if pool is not None:
                pool_file = tag + ".pool.npy"
                np.save(os.path.join(out, pool_file), pool[0].to(torch.float32).numpy())
            cases.append({"name": tag, "model": name, "architecture": spec["architecture"],
                          "input": tag + ".input.npy", "output": tag + ".output.npy", "rows": tag + ".rows.npy",
                          "queries": queries, "grid": [gh, gw], "prefix": prefix, "tokens": tokens, "heads": heads,
                          "pool": pool_file, "pool_tokens": None if pool is None else int(pool.shape[-1]),
                          "rope": spec["rope"]["kind"] if spec["rope"] else "none",
                          "global_pool": spec["global_pool"], "eps": spec["eps"]})
    return write_cases(out, cases, started)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
