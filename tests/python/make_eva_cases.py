#!/usr/bin/python3
"""Generate attnscope's parity cases for the backbones researchers download in 2026, as timm hub folders
(model.safetensors + config.json as timm's save_for_hf writes them: the registered `architecture` and
`model_args` that reduce its size): DINOv3 S/16 and S+/16, EVA-02 S/14 and B/14, Perception Encoder core
S/16, SigLIP 2 B/16, timm's CLIP B/16, BEiT v2 B/16 and CaiT XXS-24, random weights at reduced widths; one DINOv3 file without any
config (read from its keys alone: one head of timm's width 64, DINOv3's rotary positions, assumed). The reference is reference_eva.py (float64, written from timm's code).

Usage: /usr/bin/python3 tests/python/make_eva_cases.py OUTDIR

OUTDIR/<case>/model.safetensors, config.json; <case>.<size>.input.npy float32 [1,3,H,W];
<case>.<size>.output.npy float32 [1, out]; <case>.<size>.rows.npy float32 [L, heads, Q, T] (rows of the
queries, every layer and head); <case>.<size>.pool.npy float32 [heads, N] (the attention-pool head's
attention, when it has one; CaiT: its last class-attention block's); <case>.<size>.class_attention.npy
float32 [blocks, heads, 1 + N] (CaiT: every class-attention block's). cases.json: list of {name, model, architecture, input, output, rows, queries,
grid [gh, gw], prefix, tokens, heads, pool (file | null), pool_tokens, rope (kind | "none"),
global_pool, eps, class_attention (CaiT)}.
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
import reference_hub_vit as hub
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


def qk_gain_qkv(r, sd, name, bias, C):
    sd[name + ".weight"] = torch.cat([r.normal([C, C], 1.8 / math.sqrt(C)), r.normal([C, C], 1.8 / math.sqrt(C)),
                                      r.normal([C, C], 1.0 / math.sqrt(C))])
    if bias:
        sd[name + ".bias"] = r.normal([3 * C], 0.02)


def make_state(seed, spec):
    """A state dict in timm's keys for `spec` (see CASES)."""
    r = Init(seed)
    sd = {}
    C, P = spec.get("width", WIDTH), spec["patch"]
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
    for i in range(spec.get("depth", DEPTH)):
        b = f"blocks.{i}."
        norm(r, sd, b + "norm1", C)
        qkv = spec.get("qkv", "fused")
        if qkv == "fused":
            qk_gain_qkv(r, sd, b + "attn.qkv", spec.get("qkv_bias", True), C)
        elif qkv == "qv_bias":
            qk_gain_qkv(r, sd, b + "attn.qkv", False, C)
            sd[b + "attn.q_bias"] = r.normal([C], 0.05)
            sd[b + "attn.v_bias"] = r.normal([C], 0.05)
        else:
            linear(r, sd, b + "attn.q_proj", C, C, True, 1.8)
            linear(r, sd, b + "attn.k_proj", C, C, False, 1.8)
            linear(r, sd, b + "attn.v_proj", C, C, True)
        if spec.get("attn_norm"):
            norm(r, sd, b + "attn.norm", C)
        linear(r, sd, b + "attn.proj", C, C, True, 0.6)
        if spec.get("talking"):  # CaiT's talking heads: mixes of the heads, with bias
            h = spec.get("heads", HEADS)
            sd[b + "attn.proj_l.weight"] = torch.eye(h) + r.normal([h, h], 0.4)
            sd[b + "attn.proj_l.bias"] = r.normal([h], 0.3)
            sd[b + "attn.proj_w.weight"] = torch.eye(h) + r.normal([h, h], 0.4)
            sd[b + "attn.proj_w.bias"] = r.normal([h], 0.01)
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
        if spec.get("rel_bias"):
            g = spec["rel_bias"]
            sd[b + "attn.relative_position_bias_table"] = r.normal([(2 * g - 1) ** 2 + 3, spec.get("heads", HEADS)], 1.0)
            sd[b + "attn.relative_position_index"] = ref.beit_relative_position_index(g)
    for i in range(spec.get("class_blocks", 0)):  # CaiT's class-attention blocks
        b = f"blocks_token_only.{i}."
        norm(r, sd, b + "norm1", C)
        linear(r, sd, b + "attn.q", C, C, True, 1.8)
        linear(r, sd, b + "attn.k", C, C, True, 1.8)
        linear(r, sd, b + "attn.v", C, C, True)
        linear(r, sd, b + "attn.proj", C, C, True, 0.6)
        norm(r, sd, b + "norm2", C)
        linear(r, sd, b + "mlp.fc1", C, spec["hidden"])
        linear(r, sd, b + "mlp.fc2", spec["hidden"], C, True, 0.5)
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
    dict(name="beitv2_b16", architecture="beitv2_base_patch16_224", patch=16, qkv="qv_bias", gamma=True,
         rel_bias=4, hidden=4 * WIDTH, final_norm=False, fc_norm=True, classes=10, eps=1e-6, act="gelu",
         timm_class="Beit", global_pool="avg", img_size=64, rope=None, sizes=[(64, 64)], num_classes=10),
    # CaiT: talking heads over the patches, the class token joining at two class-attention blocks.
    dict(name="cait_xxs24", architecture="cait_xxs24_224", patch=16, pos_grid=4, pos_prefix=False, gamma=True,
         talking=True, class_blocks=2, hidden=4 * WIDTH, classes=10, eps=1e-6, act="gelu", timm_class="Cait",
         global_pool="token", img_size=64, rope=None, sizes=[(64, 64)], num_classes=10, stream_prefix=0),
    # DINOv3's file alone: its keys, no config (rotary settings and the input size are assumed, and said).
    dict(name="dinov3_s16_bare", architecture=None, patch=16, reg=4, gamma=True, qkv_bias=False, heads=1,
         hidden=4 * WIDTH, eps=1e-6, act="gelu", timm_class="Eva", global_pool="avg", rope=DINOV3_ROPE,
         sizes=[(48, 64)], num_classes=0),
]


# ------------------------------------------------------------------------------------------------
# The same kinds of model in their authors' own layouts (keys as each author's converter writes them)
# ------------------------------------------------------------------------------------------------
def hf_dinov3_keys(sd):
    """timm keys -> transformers' DINOv3ViTModel keys (convert_dinov3_vit_to_hf.py and the modeling file)."""
    C = WIDTH
    out = {"embeddings.cls_token": sd["cls_token"], "embeddings.register_tokens": sd["reg_token"],
           "embeddings.mask_token": torch.zeros(1, 1, C),
           "embeddings.patch_embeddings.weight": sd["patch_embed.proj.weight"],
           "embeddings.patch_embeddings.bias": sd["patch_embed.proj.bias"],
           "norm.weight": sd["norm.weight"], "norm.bias": sd["norm.bias"]}
    for i in range(DEPTH):
        b, l = f"blocks.{i}.", f"layer.{i}."
        w, bias = sd[b + "attn.qkv.weight"].chunk(3), sd[b + "attn.qkv.bias"].chunk(3)
        out.update({l + "attention.q_proj.weight": w[0], l + "attention.q_proj.bias": bias[0],
                    l + "attention.k_proj.weight": w[1],
                    l + "attention.v_proj.weight": w[2], l + "attention.v_proj.bias": bias[2],
                    l + "attention.o_proj.weight": sd[b + "attn.proj.weight"],
                    l + "attention.o_proj.bias": sd[b + "attn.proj.bias"],
                    l + "layer_scale1.lambda1": sd[b + "gamma_1"], l + "layer_scale2.lambda1": sd[b + "gamma_2"]})
        for n in ("norm1", "norm2"):
            out[l + n + ".weight"], out[l + n + ".bias"] = sd[b + n + ".weight"], sd[b + n + ".bias"]
        names = {"fc1_g": "gate_proj", "fc1_x": "up_proj", "fc1": "up_proj", "fc2": "down_proj"}
        for timm_name, hf_name in names.items():
            if b + "mlp." + timm_name + ".weight" in sd:
                out[l + "mlp." + hf_name + ".weight"] = sd[b + "mlp." + timm_name + ".weight"]
                out[l + "mlp." + hf_name + ".bias"] = sd[b + "mlp." + timm_name + ".bias"]
    return out


def meta_dinov3_keys(sd, r):
    """timm keys -> facebookresearch/dinov3's (the reverse of timm's checkpoint_filter_fn): storage_tokens,
    mask_token, qkv.bias with its bias_mask (its key part set to noise: the mask must remove it), rope_embed.periods
    as the released files hold them (bfloat16), SwiGLUFFN w1/w2/w3."""
    C, d = WIDTH, WIDTH // HEADS
    out = {"cls_token": sd["cls_token"], "storage_tokens": sd["reg_token"], "mask_token": torch.zeros(1, C),
           "patch_embed.proj.weight": sd["patch_embed.proj.weight"], "patch_embed.proj.bias": sd["patch_embed.proj.bias"],
           "norm.weight": sd["norm.weight"], "norm.bias": sd["norm.bias"],
           "rope_embed.periods": (100.0 ** (2 * torch.arange(d // 4, dtype=torch.float32) / (d // 2))).to(torch.bfloat16)}
    for i in range(DEPTH):
        b = f"blocks.{i}."
        bias = sd[b + "attn.qkv.bias"].clone()
        bias[C:2 * C] = r.normal([C], 0.5)
        mask = torch.ones(3 * C)
        mask[C:2 * C] = 0
        out.update({b + "attn.qkv.weight": sd[b + "attn.qkv.weight"], b + "attn.qkv.bias": bias,
                    b + "attn.qkv.bias_mask": mask,
                    b + "attn.proj.weight": sd[b + "attn.proj.weight"], b + "attn.proj.bias": sd[b + "attn.proj.bias"],
                    b + "ls1.gamma": sd[b + "gamma_1"], b + "ls2.gamma": sd[b + "gamma_2"]})
        for n in ("norm1", "norm2"):
            out[b + n + ".weight"], out[b + n + ".bias"] = sd[b + n + ".weight"], sd[b + n + ".bias"]
        for timm_name, meta_name in {"fc1_g": "w1", "fc1_x": "w2", "fc1": "fc1", "fc2": "fc2"}.items():
            if b + "mlp." + timm_name + ".weight" in sd:
                name = "w3" if (timm_name == "fc2" and b + "mlp.fc1_g.weight" in sd) else meta_name
                out[b + "mlp." + name + ".weight"] = sd[b + "mlp." + timm_name + ".weight"]
                out[b + "mlp." + name + ".bias"] = sd[b + "mlp." + timm_name + ".bias"]
    return out


def hf_siglip_keys(sd, r):
    """timm keys -> transformers' SiglipModel keys (vision_model.*; a small text tower and the similarity's
    logit_scale / logit_bias beside it, as SiglipModel files have them)."""
    C = WIDTH
    v = "vision_model."
    out = {v + "embeddings.patch_embedding.weight": sd["patch_embed.proj.weight"],
           v + "embeddings.patch_embedding.bias": sd["patch_embed.proj.bias"],
           v + "embeddings.position_embedding.weight": sd["pos_embed"][0],
           v + "post_layernorm.weight": sd["norm.weight"], v + "post_layernorm.bias": sd["norm.bias"],
           v + "head.probe": sd["attn_pool.latent"],
           v + "head.attention.in_proj_weight": torch.cat([sd["attn_pool.q.weight"], sd["attn_pool.kv.weight"]]),
           v + "head.attention.in_proj_bias": torch.cat([sd["attn_pool.q.bias"], sd["attn_pool.kv.bias"]]),
           v + "head.attention.out_proj.weight": sd["attn_pool.proj.weight"],
           v + "head.attention.out_proj.bias": sd["attn_pool.proj.bias"],
           v + "head.layernorm.weight": sd["attn_pool.norm.weight"], v + "head.layernorm.bias": sd["attn_pool.norm.bias"],
           "text_model.embeddings.token_embedding.weight": r.normal([32, C], 0.02),
           "text_model.final_layer_norm.weight": torch.ones(C), "logit_scale": torch.tensor([2.3]),
           "logit_bias": torch.tensor([-10.0])}
    for n in ("fc1", "fc2"):
        out[v + "head.mlp." + n + ".weight"] = sd["attn_pool.mlp." + n + ".weight"]
        out[v + "head.mlp." + n + ".bias"] = sd["attn_pool.mlp." + n + ".bias"]
    for i in range(DEPTH):
        b, l = f"blocks.{i}.", f"{v}encoder.layers.{i}."
        w, bias = sd[b + "attn.qkv.weight"].chunk(3), sd[b + "attn.qkv.bias"].chunk(3)
        for j, n in enumerate(("q_proj", "k_proj", "v_proj")):
            out[l + "self_attn." + n + ".weight"], out[l + "self_attn." + n + ".bias"] = w[j], bias[j]
        out[l + "self_attn.out_proj.weight"], out[l + "self_attn.out_proj.bias"] = sd[b + "attn.proj.weight"], \
            sd[b + "attn.proj.bias"]
        for timm_name, hf_name in (("norm1", "layer_norm1"), ("norm2", "layer_norm2"), ("mlp.fc1", "mlp.fc1"),
                                   ("mlp.fc2", "mlp.fc2")):
            out[l + hf_name + ".weight"], out[l + hf_name + ".bias"] = sd[b + timm_name + ".weight"], \
                sd[b + timm_name + ".bias"]
    return out


def dinov2_swiglu_keys(sd):
    """timm keys -> DINOv2's hub layout with ViT-g's SwiGLUFFNFused (mlp.w12 = [gate; value], mlp.w3)."""
    out = {}
    for k, t in sd.items():
        k = k.replace("gamma_1", "ls1.gamma").replace("gamma_2", "ls2.gamma")
        k = k.replace("mlp.fc1.", "mlp.w12.").replace("mlp.fc2.", "mlp.w3.")
        out[k] = t
    out["mask_token"] = torch.zeros(1, WIDTH)
    return out


def bf16_rounded(sd):
    return {k: v.to(torch.bfloat16).to(torch.float32) for k, v in sd.items()}


def write_shards(tensors, folder, count, dtype):
    """model-0000i-of-0000n.safetensors and model.safetensors.index.json, as save_pretrained splits them."""
    names = sorted(tensors)
    weight_map = {}
    for i in range(count):
        shard = f"model-{i + 1:05d}-of-{count:05d}.safetensors"
        part = {n: tensors[n] for n in names[i::count]}
        safetensors_io.save_file(part, os.path.join(folder, shard), metadata={"format": "pt"}, dtype=dtype)
        weight_map.update({n: shard for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=1)


def layout_cases(out, started_index):
    """Cases of the authors' own layouts: {name, layout, model, ...} as the timm cases, plus `layout`."""
    cases = []
    swiglu = dict(patch=16, reg=4, gamma=True, qkv_bias=True, mlp="swiglu", hidden=4 * WIDTH)
    plain = dict(patch=16, reg=4, gamma=True, qkv_bias=True, hidden=4 * WIDTH)

    def add(name, layout, folder, output, probs, img, heads, prefix, pool=None):
        tag = f"{name}.{img.shape[2]}x{img.shape[3]}"
        gh, gw = img.shape[2] // 16 if layout != "dinov2" else img.shape[2] // 14, \
            img.shape[3] // 16 if layout != "dinov2" else img.shape[3] // 14
        tokens = prefix + gh * gw
        queries = list(range(prefix)) + [prefix, prefix + (gh * gw) // 2, tokens - 1]
        np.save(os.path.join(out, tag + ".input.npy"), img.numpy())
        np.save(os.path.join(out, tag + ".output.npy"), output.to(torch.float32).numpy())
        np.save(os.path.join(out, tag + ".rows.npy"),
                torch.stack([p[0][:, queries, :] for p in probs]).to(torch.float32).numpy())
        pool_file = None
        if pool is not None:
            pool_file = tag + ".pool.npy"
            np.save(os.path.join(out, pool_file), pool[0].to(torch.float32).numpy())
        cases.append({"name": tag, "layout": layout, "model": folder, "input": tag + ".input.npy",
                      "output": tag + ".output.npy", "rows": tag + ".rows.npy", "queries": queries, "grid": [gh, gw],
                      "prefix": prefix, "tokens": tokens, "heads": heads, "pool": pool_file,
                      "pool_tokens": None if pool is None else int(pool.shape[-1])})

    # transformers' DINOv3, plain MLP, one file.
    sd = hf_dinov3_keys(make_state(started_index, plain))
    folder = os.path.join(out, "hf_dinov3")
    os.makedirs(folder, exist_ok=True)
    safetensors_io.save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    hf_config = {"model_type": "dinov3_vit", "hidden_size": WIDTH, "num_hidden_layers": DEPTH,
                 "num_attention_heads": HEADS, "intermediate_size": 4 * WIDTH, "hidden_act": "gelu",
                 "layer_norm_eps": 1e-5, "rope_theta": 100.0, "num_register_tokens": 4, "patch_size": 16,
                 "image_size": 64, "use_gated_mlp": False, "query_bias": True, "key_bias": False,
                 "value_bias": True, "proj_bias": True, "mlp_bias": True}
    json.dump(hf_config, open(os.path.join(folder, "config.json"), "w"), indent=1)
    json.dump({"image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225], "resample": 2,
               "size": {"height": 64, "width": 64}, "do_resize": True},
              open(os.path.join(folder, "preprocessor_config.json"), "w"))
    img = smooth_image(501, 48, 80)
    output, probs = ref.forward_hf_dinov3(sd, img, HEADS, 1e-5)
    add("hf_dinov3", "hf-dinov3", "hf_dinov3", output, probs, img, HEADS, 5)

    # transformers' DINOv3 S+ (gated MLP) in bfloat16, split in two shards by an index.
    sd = bf16_rounded(hf_dinov3_keys(make_state(started_index + 1, swiglu)))
    folder = os.path.join(out, "hf_dinov3_sharded")
    os.makedirs(folder, exist_ok=True)
    write_shards(sd, folder, 2, torch.bfloat16)
    json.dump(dict(hf_config, hidden_act="silu", use_gated_mlp=True),
              open(os.path.join(folder, "config.json"), "w"), indent=1)
    img = smooth_image(502, 64, 48)
    output, probs = ref.forward_hf_dinov3(sd, img, HEADS, 1e-5, act="silu")
    add("hf_dinov3_sharded", "hf-dinov3", "hf_dinov3_sharded", output, probs, img, HEADS, 5)

    # Meta's DINOv3 .pth (torch.save of the state dict), plain MLP and SwiGLU.
    for offset, (name, spec) in enumerate((("meta_dinov3", plain), ("meta_dinov3_splus", swiglu))):
        r = Init(started_index + 10 + offset)
        sd = meta_dinov3_keys(make_state(started_index + 2 + offset, spec), r)
        torch.save(sd, os.path.join(out, name + ".pth"))
        img = smooth_image(503 + offset, 64, 64)
        output, probs = ref.forward_meta_dinov3(sd, img, HEADS)
        add(name, "dinov3", name + ".pth", output, probs, img, HEADS, 5)

    # transformers' SiglipModel (vision and text towers).
    siglip_spec = dict(patch=16, cls=False, pos_grid=4, hidden=4 * WIDTH, map=True)
    sd = hf_siglip_keys(make_state(started_index + 4, siglip_spec), Init(started_index + 20))
    folder = os.path.join(out, "hf_siglip")
    os.makedirs(folder, exist_ok=True)
    safetensors_io.save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    json.dump({"model_type": "siglip", "vision_config": {"hidden_size": WIDTH, "num_hidden_layers": DEPTH,
                                                         "num_attention_heads": HEADS, "intermediate_size": 4 * WIDTH,
                                                         "image_size": 64, "patch_size": 16,
                                                         "layer_norm_eps": 1e-6, "hidden_act": "gelu_pytorch_tanh"},
               "text_config": {"hidden_size": WIDTH, "vocab_size": 32}},
              open(os.path.join(folder, "config.json"), "w"), indent=1)
    json.dump({"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 2,
               "size": {"height": 64, "width": 64}, "do_resize": True},
              open(os.path.join(folder, "preprocessor_config.json"), "w"))
    img = smooth_image(505, 64, 64)
    output, probs, pool = ref.forward_hf_siglip(sd, img, HEADS, 1e-6)
    add("hf_siglip", "hf-siglip", "hf_siglip", output, probs, img, HEADS, 0, pool)

    # DINOv2's hub layout with ViT-g's fused SwiGLU (w12, w3), at its trained size.
    spec = dict(patch=14, pos_grid=4, gamma=True, mlp="packed", hidden=2 * WIDTH)
    timm_sd = make_state(started_index + 5, spec)
    sd = dinov2_swiglu_keys(timm_sd)
    torch.save(sd, os.path.join(out, "dinov2_swiglu.pth"))
    img = smooth_image(506, 56, 56)
    cfg = {"patch": 14, "heads": 1, "eps": 1e-6, "act": "gelu", "timm_class": "VisionTransformer",
           "global_pool": "token", "pos_grid": (4, 4), "rope": None}
    output, probs, _ = ref.forward(timm_sd, img, cfg)
    add("dinov2_swiglu", "dinov2", "dinov2_swiglu.pth", output, probs, img, 1, 1)
    cases += open_clip_cases(out, started_index + 30, add)
    swinv2_cases(out, started_index + 40, cases)
    return cases


def swinv2_state(seed, embed, depths, heads, classes=10):
    """timm's SwinTransformerV2 keys at reduced widths (cpb_mlp, logit_scale, q_bias / v_bias; merging with the
    norm over the reduced width)."""
    r = Init(seed)
    sd = {}
    linear(r, sd, "patch_embed.proj", 48, embed)
    sd["patch_embed.proj.weight"] = sd["patch_embed.proj.weight"].view(embed, 3, 4, 4)
    norm(r, sd, "patch_embed.norm", embed)
    dim = embed
    for s, (depth, h) in enumerate(zip(depths, heads)):
        if s > 0:
            sd[f"layers.{s}.downsample.reduction.weight"] = r.normal([2 * dim, 4 * dim], 1.0 / math.sqrt(4 * dim))
            dim *= 2
            norm(r, sd, f"layers.{s}.downsample.norm", dim)
        for b in range(depth):
            bp = f"layers.{s}.blocks.{b}."
            sd[bp + "attn.qkv.weight"] = r.normal([3 * dim, dim], 1.0 / math.sqrt(dim))
            sd[bp + "attn.q_bias"] = r.normal([dim], 0.1)
            sd[bp + "attn.v_bias"] = r.normal([dim], 0.1)
            sd[bp + "attn.logit_scale"] = r.uniform([h, 1, 1], 1.0, 2.5)
            linear(r, sd, bp + "attn.cpb_mlp.0", 2, 512)
            sd[bp + "attn.cpb_mlp.2.weight"] = r.normal([h, 512], 1.0 / math.sqrt(512))
            linear(r, sd, bp + "attn.proj", dim, dim, True, 0.6)
            norm(r, sd, bp + "norm1", dim)
            linear(r, sd, bp + "mlp.fc1", dim, 4 * dim)
            linear(r, sd, bp + "mlp.fc2", 4 * dim, dim, True, 0.5)
            norm(r, sd, bp + "norm2", dim)
    norm(r, sd, "norm", dim)
    linear(r, sd, "head.fc", dim, classes)
    return {k: v.to(torch.float32).contiguous() for k, v in sd.items()}


def swinv2_cases(out, seed, cases):
    """Swin V2 T-shaped (4 stages, window 8) at 128 px: stage grids 32, 16, 8, 4 (shifted windows with the
    mask in the first two, one window in the third, the window clamped in the last); with and without
    pretrained windows. The rows are those of query windows: [blocks, heads, queries, window area]."""
    import reference_swinv2 as v2
    depths, heads = [2, 2, 2, 1], [1, 2, 2, 4]
    for index, (name, pretrained) in enumerate((("swinv2_t", [0, 0, 0, 0]), ("swinv2_pretrained_w", [6, 6, 6, 3]))):
        sd = swinv2_state(seed + index, 16, depths, heads)
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        safetensors_io.save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        args = {"embed_dim": 16, "depths": depths, "num_heads": heads, "img_size": 128, "num_classes": 10}
        if any(pretrained):
            args["pretrained_window_sizes"] = pretrained
        json.dump({"architecture": "swinv2_tiny_window8_256", "num_classes": 10, "model_args": args},
                  open(os.path.join(folder, "config.json"), "w"), indent=1)
        img = smooth_image(700 + index, 128, 128)
        output, probs = v2.forward(sd, img, {"patch": 4, "window": 8, "heads": heads,
                                             "pretrained_windows": pretrained, "eps": 1e-5})
        tag = f"{name}.128x128"
        np.save(os.path.join(out, tag + ".input.npy"), img.numpy())
        np.save(os.path.join(out, tag + ".output.npy"), output.to(torch.float32).numpy())
        # Per block: the first window's rows of its first, middle and last query.
        rows = [pr[0][:, [0, pr.shape[-1] // 2, pr.shape[-1] - 1], :] for pr in probs]
        for i, r in enumerate(rows):
            np.save(os.path.join(out, f"{tag}.rows_b{i}.npy"), r.to(torch.float32).numpy())
        cases.append({"name": tag, "layout": "timm", "model": name, "input": tag + ".input.npy",
                      "output": tag + ".output.npy", "swin": True, "blocks": len(rows), "window_rows": f"{tag}.rows_b",
                      "heads": heads})


def open_clip_visual_keys(sd):
    """timm keys -> open_clip's VisionTransformer (OpenAI CLIP's keys; ls_1 / ls_2 its layer scale)."""
    v = {"visual.conv1.weight": sd["patch_embed.proj.weight"], "visual.class_embedding": sd["cls_token"][0, 0],
         "visual.positional_embedding": sd["pos_embed"][0], "visual.ln_pre.weight": sd["norm_pre.weight"],
         "visual.ln_pre.bias": sd["norm_pre.bias"], "visual.ln_post.weight": sd["norm.weight"],
         "visual.ln_post.bias": sd["norm.bias"], "visual.proj": sd["head.weight"].t().contiguous()}
    i = 0
    while f"blocks.{i}.norm1.weight" in sd:
        b, o = f"blocks.{i}.", f"visual.transformer.resblocks.{i}."
        pairs = {"norm1": "ln_1", "norm2": "ln_2", "attn.proj": "attn.out_proj", "mlp.fc1": "mlp.c_fc",
                 "mlp.fc2": "mlp.c_proj"}
        for timm_name, clip_name in pairs.items():
            v[o + clip_name + ".weight"], v[o + clip_name + ".bias"] = sd[b + timm_name + ".weight"], \
                sd[b + timm_name + ".bias"]
        v[o + "attn.in_proj_weight"], v[o + "attn.in_proj_bias"] = sd[b + "attn.qkv.weight"], sd[b + "attn.qkv.bias"]
        v[o + "ls_1.gamma"], v[o + "ls_2.gamma"] = sd[b + "gamma_1"], sd[b + "gamma_2"]
        i += 1
    return v


def open_clip_cases(out, seed, add):
    """open_clip folders: its own ViT (OpenAI keys, GELU as LAION's towers, head_width 32) and a timm trunk
    (vit_tiny_patch16_224, timm_pool avg, a linear projection) in float16."""
    # open_clip's VisionTransformer.
    spec = dict(patch=16, pos_grid=4, norm_pre=True, patch_bias=False, gamma=True, hidden=4 * WIDTH, classes=32)
    timm_sd = make_state(seed, spec)
    timm_sd.pop("head.bias")
    folder = os.path.join(out, "open_clip_vit")
    os.makedirs(folder, exist_ok=True)
    sd = open_clip_visual_keys(timm_sd)
    safetensors_io.save_file(sd, os.path.join(folder, "open_clip_model.safetensors"))
    json.dump({"model_cfg": {"embed_dim": 32, "quick_gelu": False,
                             "vision_cfg": {"image_size": 64, "layers": DEPTH, "width": WIDTH, "head_width": 32,
                                            "patch_size": 16},
                             "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2,
                                          "layers": 2}},
               "preprocess_cfg": {"mean": [0.48145466, 0.4578275, 0.40821073],
                                  "std": [0.26862954, 0.26130258, 0.27577711]}},
              open(os.path.join(folder, "open_clip_config.json"), "w"), indent=1)
    img = smooth_image(601, 64, 64)
    output, probs = hub.clip_forward(sd, img, heads=2, act=hub.gelu_erf)
    add("open_clip_vit", "open-clip", "open_clip_vit", output, probs, img, 2, 1)

    # A timm trunk: the registered vit_tiny_patch16_224 (192 wide, 12 blocks, 3 heads), avg pooling.
    spec = dict(patch=16, pos_grid=14, width=192, depth=12, hidden=768, final_norm=False, fc_norm=True)
    timm_sd = {k: v.to(torch.float16).to(torch.float32) for k, v in make_state(seed + 1, spec).items()}
    head = Init(seed + 2).normal([32, 192], 1.0 / math.sqrt(192)).to(torch.float16).to(torch.float32)
    folder = os.path.join(out, "open_clip_timm")
    os.makedirs(folder, exist_ok=True)
    sd = {"visual.trunk." + k: v for k, v in timm_sd.items()}
    sd["visual.head.proj.weight"] = head
    sd["text.token_embedding.weight"] = torch.zeros(8, 16)
    safetensors_io.save_file(sd, os.path.join(folder, "open_clip_model.safetensors"), dtype=torch.float16)
    json.dump({"model_cfg": {"embed_dim": 32,
                             "vision_cfg": {"timm_model_name": "vit_tiny_patch16_224", "timm_model_pretrained": False,
                                            "timm_pool": "avg", "timm_proj": "linear", "image_size": 224}},
               "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}},
              open(os.path.join(folder, "open_clip_config.json"), "w"), indent=1)
    img = smooth_image(602, 224, 224)
    cfg = {"patch": 16, "heads": 3, "eps": 1e-6, "act": "gelu", "timm_class": "VisionTransformer",
           "global_pool": "avg", "pos_grid": (14, 14), "rope": None}
    output, probs, _ = ref.forward(dict(timm_sd, **{"head.weight": head}), img, cfg)
    add("open_clip_timm", "open-clip", "open_clip_timm", output, probs, img, 3, 1)
    return []


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
            class_probs = None
            if spec["timm_class"] == "Cait":
                output, probs, class_probs = ref.forward_cait(sd, img, cfg)
                pool = class_probs[-1]
            else:
                output, probs, pool = ref.forward(sd, img, cfg)
            gh, gw = h // spec["patch"], w // spec["patch"]
            prefix = spec.get("stream_prefix", int(spec.get("cls", True)) + spec.get("reg", 0))
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
            if class_probs is not None:
                np.save(os.path.join(out, tag + ".class_attention.npy"),
                        torch.stack([c[0] for c in class_probs]).to(torch.float32).numpy())
                cases[-1]["class_attention"] = tag + ".class_attention.npy"
    with open(os.path.join(out, "layout_cases.json"), "w") as f:
        json.dump(layout_cases(out, 2000), f, indent=1)
    return write_cases(out, cases, started)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
