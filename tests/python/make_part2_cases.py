#!/usr/bin/python3
"""Generate attnscope's parity cases for FLatten-CSwin, L2ViT and CARE: small random-weight models in every
checkpoint form the authors ship, inputs, and the reference outputs of reference_part2.py (float64, stored
as float32).

Usage: /usr/bin/python3 tests/python/make_part2_cases.py OUTDIR

Deterministic (fixed seeds), well under a minute on 2 CPU cores. Independent of attnscope's C++ sources.

Model files (the authors' key names; several files per model):
  <model>.safetensors   flat state_dict (BatchNorm num_batches_tracked as I64).
  <model>.<tag>.pth / .pth.tar   torch.save of:
     flatten_cswin  {"model": sd};  {"model": sd, "state_dict_ema": OTHER weights, "config":
                    argparse.Namespace, "epoch", "max_accuracy"} (FLatten's save_checkpoint_ema; 'model' counts)
     l2vit          {"model": OTHER weights, "model_ema": sd, "optimizer": {}, "epoch": "best-ema", "args":
                    argparse.Namespace} (ConvNeXt/L2ViT save_model of *-checkpoint-best-ema.pth:
                    'model_ema' counts);  {"model": sd}
     care           bare sd as <model>.released.pth.tar (the authors' released ckpt/*.pth.tar);
                    {"state_dict": sd, "state_dict_ema": OTHER weights, "args": argparse.Namespace,
                    "arch", "epoch", "version": 2, "metric"} (timm CheckpointSaver; 'state_dict' counts)
  Where a file holds two weight sets the other one gives clearly different logits (asserted).
  <file>.arch.json      sidecar: the arch dict below, as JSON (for every .pth / .pth.tar).

Arch metadata. safetensors `__metadata__` = {"format": "pt", "attnscope_arch": "<JSON of the arch dict>"};
.pth files have the same dict in the sidecar. Keys (as make_hier_cases.py where the meaning is the same):
  family            "flatten_cswin" | "l2vit" | "care"                                          (required)
  heads             flatten_cswin, l2vit: [int per stage] (CSwin: the block's total; each of two
                    branches has heads/2). care: informative, gc / att_head_dim (0 = strip-conv stage)
  split_size        flatten_cswin: [int per stage], stripe width of S (softmax) blocks          (required)
  la_split_size     flatten_cswin: [int per stage], stripe width of L (focused) blocks (config
                    MODEL.LA.CSWIN_LA_SPLIT_SIZE "56-28-14-7" as a list)                        (required)
  attn_type         flatten_cswin: one letter per stage, L focused / S softmax, or "M<n>" form  (required)
  focusing_factor   flatten_cswin: p of f_p (MODEL.LA.FOCUSING_FACTOR)                          (required)
  img_size          flatten_cswin: training side (required: the stage resolution decides nothing the
                    keys do not show, but positional encodings are sized for it); others informative
  window            l2vit: LWA window_size (7; 12 for L2ViT_Base_384)                           (required)
  att_head_dim      care: [int per stage] (the authors' att_head_dim, (1, 1, 16, 32))            (required)
  informative: depths, embed_dims (CSwin, L2ViT), mlp_ratio(s), kernel_size (CSwin DWC), block_type
  (L2ViT), feat_dims, mem_dims, ratios, cls_dim (CARE), num_classes.
  Derived from the keys (not in the arch): CSwin branches per block (`attns.1` present), L vs S blocks
  (`attns.0.scale`), L2ViT LWA/LGA (`local_mp`), CARE attention stages (`token_mixer.qk`), gc (dwconv1
  channels), last block (no `gamma`).

Inputs and outputs per case: <case>.input.npy float32 [1,3,H,W] (no preprocessing); <case>.logits.npy
float32 [1, classes]; <case>.rows_l{L}.npy float32 [heads, Q, key_h, key_w] for attention layer L (numbered
over every block of the network in run order; CARE counts strip-conv blocks too).

OUTDIR/cases.json: a list of objects as make_hier_cases.py's
  name, family, layout ("authors"), container ("safetensors" | "pth"), state_dict_key ("model" |
  "model_ema" | "state_dict" | null), model, arch_json, arch, variant {"kernel", "p", "window"}, input,
  input_size [H, W], logits,
  layers  one per block: {stage, block, query_grid, key_grid, window [w,w] | null, shift [0,0], kind,
          kernel, structure ("cswin" | "window" | "global" | "none"), native, heads, queries [[r,c],...],
          rows (file | null)} plus
          flatten_cswin: split_size, branches [{heads [h0,h1), window [H_sp,W_sp],
                         padded_grid [Hp,Wp], offset [top,left], stripe "vertical"|"horizontal"|"full"}],
                         pe_trained_grid (focused layers)
          l2vit LWA:     padded_grid [Hp, Wp] (window structure, padding bottom/right)
          l2vit LGA:     rows_lcm (file [heads, Q, key_h, key_w]: rows of C_conv A), lcm_gelu_slope 0.5
          care:          channels {memory, attention, dwconv3, dwconv7: [begin, end)}; strip-conv blocks
                         have kind "none", heads 0, queries [], rows null
  kinds: softmax-cswin, focused-cswin, softmax-window, enhanced-global (L2ViT native LGA),
  elu_linear-global (CARE native), <swapped kernel>-<structure>, none.
"""

import argparse
import json
import math
import os
import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import torch
import numpy as np

import make_hier_cases
import reference_hier as hier
import reference_part2 as ref
import safetensors_io
from fixture_tools import output_folder, replaced, write_cases
from make_hier_cases import Builder as _HierBuilder

CLASSES = 10
RESID_SCALE = 0.02  # residual streams and norm inputs this small make an eps error visible (see make_hier_cases)


class Builder(_HierBuilder):
    def bn(self, p, C, scale=1.0):
        """BatchNorm2d with placeholder running statistics (calibrate() fills them)."""
        self.sd[p + ".weight"] = self.r.normal([C], 0.1, 1.0) * scale
        self.sd[p + ".bias"] = self.r.normal([C], 0.05) * scale
        self.sd[p + ".running_mean"] = torch.zeros(C)
        self.sd[p + ".running_var"] = torch.ones(C)
        self.sd[p + ".num_batches_tracked"] = torch.tensor(1000, dtype=torch.int64)

    def dw(self, p, C, kh, kw, std, bias=True):
        self.sd[p + ".weight"] = self.r.normal([C, 1, kh, kw], std)
        if bias:
            self.sd[p + ".bias"] = self.r.normal([C], 0.02)

    def conv1x1(self, p, o, i, std, bias=True):
        self.sd[p + ".weight"] = self.r.normal([o, i, 1, 1], std)
        if bias:
            self.sd[p + ".bias"] = self.r.normal([o], 0.02)


def calibrate(sd, arch, side, seed):
    """Set every BatchNorm's running statistics from the statistics of its real input on two random images
    at the training size (mean + 0.2 std noise, var x U(0.6, 1.6)), so that the BatchNorms see inputs of the
    size their statistics say (small inputs: BN eps visible)."""
    g = torch.Generator().manual_seed(seed)
    model = ref.build(sd, arch, dtype=torch.float64)

    def hook(stats, x):
        _, _, m, v = stats
        bm, bv = x.mean(dim=(0, 2, 3)), x.var(dim=(0, 2, 3))
        m.copy_(bm + 0.2 * bv.sqrt() * torch.randn(bm.shape, generator=g, dtype=bm.dtype))
        v.copy_(bv * (0.6 + torch.rand(bv.shape, generator=g, dtype=bv.dtype)))

    img = torch.randn(2, 3, side, side, generator=g, dtype=torch.float64)
    ref.BN_CALIBRATE = hook
    try:
        with torch.no_grad():
            model.forward(img)
    finally:
        ref.BN_CALIBRATE = None
    for k in sd:
        if k.endswith("running_mean") or k.endswith("running_var"):
            sd[k] = model.w.sd[k].float()
    return sd


# --------------------------------------------------------------------------------------------
# Random weights in the authors' layouts
# --------------------------------------------------------------------------------------------
def cswin_state(seed, arch, qkv_std=1.1, resid=RESID_SCALE):
    """FLatten-CSwin weights in the authors' module order. Branches per block as CSWinBlock decides at
    the training resolution: one if last stage or resolution == split_size, else two."""
    B = Builder(seed)
    depths, dims, heads = arch["depths"], arch["embed_dims"], arch["heads"]
    types = hier._parse_attn_types(arch["attn_type"], depths)
    k = arch["kernel_size"]
    C = dims[0]
    B.conv("stage1_conv_embed.0", C, 3, 7)
    B.scale("stage1_conv_embed.0", resid)
    B.ln("stage1_conv_embed.2", C, resid)
    reso = arch["img_size"] // 4
    n = len(depths)
    for s in range(n):
        if s > 0:
            B.conv(f"merge{s}.conv", 2 * C, C, 3)
            B.scale(f"merge{s}.conv", resid)
            B.ln(f"merge{s}.norm", 2 * C, resid)
            C *= 2
            reso //= 2
        h = heads[s]
        for b in range(depths[s]):
            p = f"stage{s + 1}.{b}."
            t = types[s][b]
            split = arch["la_split_size"][s] if t == "L" else arch["split_size"][s]
            nb = 1 if (s == n - 1 or reso == split) else 2
            B.lin(p + "qkv", 3 * C, C, qkv_std / math.sqrt(C))
            B.ln(p + "norm1", C)
            B.lin(p + "proj", C, C, 0.6 / math.sqrt(C))
            B.scale(p + "proj", resid)
            for a in range(nb):
                q = p + f"attns.{a}."
                if t == "L":
                    assert nb == 1
                    d = C // h
                    B.sd[q + "scale"] = B.r.normal([1, 1, C], 0.5)
                    pe = 0.5 * B.r.smooth(reso, reso, C) + B.r.normal([reso * reso, C], 0.1)
                    B.sd[q + "positional_encoding"] = pe[None]
                    B.dw(q + "get_v", C, 3, 3, 0.3)
                    B.dw(q + "dwc", d, k, k, 0.15)
                else:
                    B.dw(q + "get_v", C // nb, 3, 3, 0.3)
            B.lin(p + "mlp.fc1", 4 * C, C, 1.0 / math.sqrt(C))
            B.lin(p + "mlp.fc2", C, 4 * C, 0.5 / math.sqrt(4 * C))
            B.scale(p + "mlp.fc2", resid)
            B.ln(p + "norm2", C)
    B.ln("norm", C)
    B.lin("head", CLASSES, C, 1.0 / math.sqrt(C))
    return B.sd


def l2vit_state(seed, arch, qkv_std=(1.2, 1.2, 1.2, 1.2), resid=RESID_SCALE):
    B = Builder(seed)
    dims, depths, heads = arch["embed_dims"], arch["depths"], arch["heads"]
    p = "downsample_layers.0.proj.proj."
    C = dims[0]
    B.conv(p + "0", C // 2, 3, 3)
    B.scale(p + "0", resid)
    B.bn(p + "1", C // 2)
    B.conv(p + "3", C, C // 2, 3)
    B.scale(p + "3", resid)
    B.bn(p + "4", C)
    B.ln("downsample_layers.0.norm", C, resid)
    for s in range(1, len(dims)):
        q = f"downsample_layers.{s}."
        B.conv(q + "proj", dims[s], dims[s - 1], 2)
        B.scale(q + "proj", resid)
        B.ln(q + "norm", dims[s - 1])
    for s, C in enumerate(dims):
        h = heads[s]
        for b in range(depths[s]):
            p = f"stages.{s}.{b}."
            lga = b % 2 == 1
            B.dw(p + "cpe.0.proj", C, 3, 3, 0.2)
            if not lga:
                B.dw(p + "cpe.1.proj", C, 3, 3, 0.2)
            B.ln(p + "norm1", C)
            if lga:
                B.sd[p + "attn.temperature"] = (C // h) ** -0.5 * B.r.uniform([h, 1, 1], 0.5, 2.0)
            B.lin(p + "attn.qkv", 3 * C, C, qkv_std[s] / math.sqrt(C))
            B.lin(p + "attn.proj", C, C, 0.6 / math.sqrt(C))
            B.scale(p + "attn.proj", resid)
            B.ln(p + "norm2", C)
            hid = int(C * arch["mlp_ratios"][s])
            B.lin(p + "mlp.fc1", hid, C, 1.0 / math.sqrt(C))
            B.lin(p + "mlp.fc2", C, hid, 0.5 / math.sqrt(hid))
            B.scale(p + "mlp.fc2", resid)
            if lga:
                B.ln(p + "norm3", C)
                B.dw(p + "local_mp.conv1", C, 7, 7, resid / 7)
                B.bn(p + "local_mp.bn", C)
                B.dw(p + "local_mp.conv2", C, 7, 7, 1.0 / 7)
                B.scale(p + "local_mp.conv2", resid)
    B.ln("norm", dims[-1])
    B.lin("head", CLASSES, dims[-1], 1.0 / math.sqrt(dims[-1]))
    return B.sd


def care_state(seed, arch, qk_std=1.0, resid=RESID_SCALE):
    B = Builder(seed)
    feat, mem, depths, ratios = arch["feat_dims"], arch["mem_dims"], arch["depths"], arch["ratios"]
    dims = [f + m for f, m in zip(feat, mem)]
    n = len(dims)
    B.conv("stem.0", dims[0], 3, 4)
    B.scale("stem.0", resid)
    B.bn("stem.1", dims[0], resid)
    for s in range(n):
        D, gc = dims[s], mem[s]
        r1, r2 = ratios[s]
        if s > 0:
            B.bn(f"stages.{s}.downsample.0", dims[s - 1])
            B.conv(f"stages.{s}.downsample.1", D, dims[s - 1], 2)
            B.scale(f"stages.{s}.downsample.1", resid)
        for b in range(depths[s]):
            p = f"stages.{s}.blocks.{b}."
            last = s == n - 1 and b == depths[s] - 1
            t = p + "token_mixer."
            if s >= 2:
                B.dw(t + "dwconv1", gc, 3, 3, 0.3)
                B.dw(t + "dwconv2", gc, 7, 7, 0.15)
                B.conv1x1(t + "qk", 2 * gc, gc, qk_std / (resid * math.sqrt(gc)))
            else:
                B.dw(t + "dwconvatt_1", gc, 11, 1, 0.15)
                B.dw(t + "dwconvatt_2", gc, 1, 11, 0.15)
                B.dw(t + "dwconv1", gc, 3, 3, 0.3)
                B.dw(t + "dwconv2", gc, 7, 7, 0.15)
            il = p + "inter_layer."
            d1 = 3 * gc
            B.bn(il + "inter1_norm", d1)
            B.conv1x1(il + "inter1_fc1", r1 * d1, d1, 1.0 / math.sqrt(d1))
            B.dw(il + "inter1_conv", r1 * d1, 3, 3, 0.3)
            B.conv1x1(il + "inter1_fc2", d1, r1 * d1, 0.5 / math.sqrt(r1 * d1))
            B.scale(il + "inter1_fc2", resid)
            B.bn(il + "inter2_norm", D)
            B.conv1x1(il + "inter2_fc1", r2 * D, D, 1.0 / math.sqrt(D))
            B.dw(il + "inter2_conv", r2 * D, 3, 3, 0.3)
            if last:
                B.scale(il + "inter2_conv", 0.1)
            else:
                B.conv1x1(il + "inter2_fc2", D, r2 * D, 0.5 / math.sqrt(r2 * D))
                B.scale(il + "inter2_fc2", resid)
                B.sd[p + "gamma"] = B.r.uniform([D], 0.3, 1.0)
    cls = arch["cls_dim"]
    for h in ("head", "dist_head"):
        B.ln(h + ".norm", cls)
        B.lin(h + ".fc", CLASSES, cls, 1.0 / math.sqrt(cls))
    # module order of the authors' state_dict: gamma first in a block (a parameter of CAREBlock itself)
    return B.sd


def _reorder_care(sd):
    def key(k):
        parts = k.split(".")
        if len(parts) > 4 and parts[0] == "stages" and parts[2] == "blocks":
            return (0, int(parts[1]), 1, int(parts[3]), 0 if parts[4] == "gamma" else 1)
        if parts[0] == "stages":
            return (0, int(parts[1]), 0, 0, 0)
        return ({"stem": -1, "head": 1, "dist_head": 2}[parts[0]], 0, 0, 0, 0)

    return {k: sd[k] for k in sorted(sd, key=lambda k: (key(k), list(sd).index(k)))}


def _models():
    """name -> (arch, sd, {tag: (container, wrapper, filename suffix)}, other weights or None)."""
    models = {}

    arch = {"family": "flatten_cswin", "heads": [2, 2, 4, 4], "split_size": [1, 2, 4, 4],
            "la_split_size": [32, 16, 8, 4], "attn_type": "LLSS", "focusing_factor": 3, "img_size": 128,
            "kernel_size": 5, "depths": [1, 1, 2, 1], "embed_dims": [16, 32, 64, 128], "mlp_ratio": 4,
            "num_classes": CLASSES}
    sd = cswin_state(201, arch)
    other = cswin_state(211, arch)
    models["cswin_a"] = (arch, sd, {"": ("safetensors", None, ".safetensors"),
                                    "model": ("pth", "model", ".pth"),
                                    "ema": ("pth", "flatten_ema", ".pth")}, other)

    arch = {"family": "flatten_cswin", "heads": [2, 2, 4, 4], "split_size": [1, 2, 4, 2],
            "la_split_size": [16, 8, 4, 2], "attn_type": "SMSS1", "focusing_factor": 3, "img_size": 64,
            "kernel_size": 3, "depths": [2, 2, 2, 1], "embed_dims": [16, 32, 64, 128], "mlp_ratio": 4,
            "num_classes": CLASSES}
    models["cswin_s"] = (arch, cswin_state(202, arch), {"": ("safetensors", None, ".safetensors"),
                                                         "model": ("pth", "model", ".pth")}, None)

    arch = {"family": "l2vit", "heads": [1, 2, 2, 3], "window": 7, "depths": [2, 2, 2, 2],
            "embed_dims": [16, 32, 32, 48], "mlp_ratios": [4, 4, 4, 4], "block_type": "mix_local_enhanced_vit",
            "num_classes": CLASSES, "img_size": 112}
    sd = calibrate(l2vit_state(203, arch), arch, 112, 303)
    other = calibrate(l2vit_state(213, arch), arch, 112, 313)
    models["l2vit_a"] = (arch, sd, {"": ("safetensors", None, ".safetensors"),
                                    "best_ema": ("pth", "l2vit_best_ema", ".pth"),
                                    "model": ("pth", "model", ".pth")}, other)

    arch = {"family": "care", "att_head_dim": [1, 1, 8, 8], "heads": [0, 0, 2, 2], "depths": [1, 2, 2, 2],
            "feat_dims": [12, 24, 48, 48], "mem_dims": [4, 8, 16, 16], "ratios": [[2, 2], [2, 2], [2, 2], [2, 2]],
            "cls_dim": 128, "num_classes": CLASSES, "img_size": 128}
    sd = _reorder_care(calibrate(care_state(204, arch), arch, 128, 304))
    other = _reorder_care(calibrate(care_state(214, arch), arch, 128, 314))
    models["care_a"] = (arch, sd, {"": ("safetensors", None, ".safetensors"),
                                   "released": ("pth", "bare", ".pth.tar"),
                                   "timm": ("pth", "timm_saver", ".pth.tar")}, other)
    return models


V = ref.Variant
# name: (model, (H, W), variant). The first case of each model is also run on every other file of it.
CASES = [
    ("cswin_128", "cswin_a", (128, 128), V()),
    ("cswin_padded_80x112", "cswin_a", (80, 112), V()),
    ("cswin_softmax_128", "cswin_a", (128, 128), V("softmax")),
    ("cswin_linear_80x112", "cswin_a", (80, 112), V("linear")),
    ("cswin_focused_p3_128", "cswin_a", (128, 128), V("focused", p=3.0)),
    ("cswin_enhanced_80x112", "cswin_a", (80, 112), V("enhanced")),
    ("cswin_s_64", "cswin_s", (64, 64), V()),
    ("cswin_s_padded_72x56", "cswin_s", (72, 56), V()),
    ("cswin_s_linear_64", "cswin_s", (64, 64), V("linear")),
    ("l2vit_112", "l2vit_a", (112, 112), V()),
    ("l2vit_odd_90x70", "l2vit_a", (90, 70), V()),
    ("l2vit_window4_112", "l2vit_a", (112, 112), V(window=4)),
    ("l2vit_window4_odd_90x70", "l2vit_a", (90, 70), V(window=4)),
    ("l2vit_softmax_112", "l2vit_a", (112, 112), V("softmax")),
    ("l2vit_linear_90x70", "l2vit_a", (90, 70), V("linear")),
    ("l2vit_focused_p3_112", "l2vit_a", (112, 112), V("focused", p=3.0)),
    ("l2vit_enhanced_112", "l2vit_a", (112, 112), V("enhanced")),
    ("care_128", "care_a", (128, 128), V()),
    ("care_nonsquare_72x104", "care_a", (72, 104), V()),
    ("care_softmax_128", "care_a", (128, 128), V("softmax")),
    ("care_linear_72x104", "care_a", (72, 104), V("linear")),
    ("care_focused_p3_128", "care_a", (128, 128), V("focused", p=3.0)),
    ("care_enhanced_128", "care_a", (128, 128), V("enhanced")),
]

# Deliberate mistakes: (mistake, case whose input and model are used). Each must move the logits.
MISTAKE_CASES = [
    ("cswin_branch_swap", "cswin_s_64"),
    ("cswin_branch_swap", "cswin_padded_80x112"),
    ("cswin_lepe_whole_grid", "cswin_s_64"),
    ("cswin_lepe_whole_grid", "cswin_128"),
    ("cswin_pad_after", "cswin_padded_80x112"),
    ("l2vit_lcm_after_mlp", "l2vit_112"),
    ("l2vit_down_norm_after_conv", "l2vit_112"),
    ("l2vit_no_clamp", "l2vit_112"),
    ("l2vit_no_clamp", "l2vit_odd_90x70"),
    ("l2vit_mask_padding", "l2vit_odd_90x70"),
    ("l2vit_no_cpe1", "l2vit_112"),
    ("care_single_head", "care_128"),
    ("care_inter_relu", "care_128"),
    ("care_down_norm_after_conv", "care_128"),
]
# eps errors: (module constant, wrong value, case)
EPS_CASES = [
    ("LN_EPS", 1e-6, "cswin_128"),
    ("LN_EPS", 1e-6, "l2vit_112"),
    ("BN_EPS", 1e-6, "l2vit_112"),
    ("BN_EPS", 1e-6, "care_128"),
    ("CARE_HEAD_LN_EPS", 1e-5, "care_128"),
    ("L2VIT_CLAMP", 50.0, "l2vit_112"),
]


def queries_for(rec):
    H, W = rec.query_grid
    qs = [(0, 0), (0, W - 1), (H - 1, 0), (H - 1, W - 1), (H // 2, W // 2), (H // 3, (2 * W) // 3)]
    out = []
    for q in qs:
        if q not in out:
            out.append(q)
    return out


# --------------------------------------------------------------------------------------------
# Writing and reading model files
# --------------------------------------------------------------------------------------------
def write_model_files(out_dir, mname, arch, sd, files, other):
    written = {}
    for tag, (container, wrapper, suffix) in files.items():
        sdc = {k: v.clone().contiguous() for k, v in sd.items()}  # no shared storages in the pickles
        oth = None if other is None else {k: v.clone().contiguous() for k, v in other.items()}
        fname = mname + (f".{tag}" if tag else "") + suffix
        path = os.path.join(out_dir, fname)
        key, arch_json = None, None
        if container == "safetensors":
            safetensors_io.save_file(sdc, path, metadata={"format": "pt", "attnscope_arch": json.dumps(arch)})
        else:
            if wrapper == "bare":
                obj = sdc
            elif wrapper == "model":
                key, obj = "model", {"model": sdc}
            elif wrapper == "flatten_ema":
                key = "model"
                obj = {"model": sdc, "state_dict_ema": oth, "max_accuracy": 12.5, "max_accuracy_e": 12.0,
                       "epoch": 299, "config": argparse.Namespace(MODEL="FLatten_CSWin_64_24181_tiny_224",
                                                                   ATTN_TYPE=arch["attn_type"])}
            elif wrapper == "l2vit_best_ema":
                key = "model_ema"
                obj = {"model": oth, "model_ema": sdc, "optimizer": {}, "epoch": "best-ema",
                       "args": argparse.Namespace(model="L2ViT_Tiny", model_ema=True, model_ema_eval=True,
                                                  input_size=112, drop_path=0.1)}
            elif wrapper == "timm_saver":
                key = "state_dict"
                obj = {"epoch": 299, "arch": "CARETrans_S0", "state_dict": sdc, "state_dict_ema": oth,
                       "version": 2, "metric": 78.4,
                       "args": argparse.Namespace(model="CARETrans_S0", model_ema=True, drop_path=0.1)}
            else:
                raise ValueError(wrapper)
            torch.save(obj, path)
            arch_json = fname + ".arch.json"
            with open(os.path.join(out_dir, arch_json), "w") as f:
                json.dump(arch, f, indent=1)
        written[tag] = {"layout": "authors", "container": container, "state_dict_key": key, "model": fname,
                        "arch_json": arch_json, "_two_sets": wrapper in ("flatten_ema", "l2vit_best_ema",
                                                                         "timm_saver")}
    return written


def load_model_file(out_dir, info, family):
    return make_hier_cases.load_model_file(out_dir, info, lambda obj: ref.unwrap_checkpoint(obj, family))


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------
def check_records(name, recs, queries_all):
    """Self-checks of one case's records (float64); returns a short summary."""
    maxes, spreads = [], []
    n_rows = 0
    for L, (rec, queries) in enumerate(zip(recs, queries_all)):
        H, W = rec.query_grid
        if not rec.has_rows():
            assert rec.kind == "none" and rec.heads == 0, (name, L)
            continue
        for (r, c) in queries:
            row, total = make_hier_cases.checked_row(name, L, rec, r, c)
            if rec.kernel in ("softmax", "elu_linear"):
                assert (total - 1).abs().max().item() < 1e-5, (name, L, (r, c), total)
            elif rec.kernel == "linear":  # 1, or 0 where ReLU(q) of the head is all zero
                assert (((total - 1).abs() < 1e-5) | (total.abs() < 1e-9)).all(), (name, L, (r, c), total)
            elif rec.kernel == "focused":
                # x / (x + 1e-6), x = q . mean(k): with f_p's norms over all channels a head can get an
                # almost zero share of q (x ~ 1e-4 seen), so only bounds here
                assert (total <= 1 + 1e-12).all() and (total > 0.5).all(), (name, L, (r, c), total)
            region = rec.region(r, c)
            assert (row[~region] == 0).all(), (name, L, "non-zero outside the stripe / window")
            for grp in rec.groups:  # stripe orientation: vertical = full height, split columns
                m = grp.region(r, c)
                rows_hit, cols_hit = m.any(dim=1).sum().item(), m.any(dim=0).sum().item()
                if grp.label == "vertical":
                    assert rows_hit == H and cols_hit <= rec.extra["split_size"], (name, L, "vertical stripe")
                elif grp.label == "horizontal":
                    assert cols_hit == W and rows_hit <= rec.extra["split_size"], (name, L, "horizontal stripe")
                elif grp.label == "full":
                    assert m.all(), (name, L, "full")
            vals = row.reshape(row.shape[0], -1)
            for h in range(vals.shape[0]):
                a = vals[h][region[h].reshape(-1)]
                if a.numel() >= 4 and a.abs().sum() > 0:  # corner windows of padded grids may hold 1-3 image keys
                    maxes.append(a.abs().max().item() / max(a.abs().sum().item(), 1e-30))
                    spreads.append((a.std() / a.abs().mean()).item())
            n_rows += 1
        if rec.lcm is not None:
            if H * W <= 400:  # the adjoint rows against the explicit matrix
                Cm = ref.lcm_conv_matrix((H, W), rec.lcm_weights)
                for (r, c) in queries:
                    e = (Cm[r * W + c] - rec.lcm(r, c).reshape(-1)).abs().max().item()
                    assert e < 1e-12, (name, L, "lcm row", e)
            rl = rec.rows_lcm(queries)
            for qi, (r, c) in enumerate(queries):
                crow = rec.lcm(r, c)  # [H, W]
                lhs = torch.einsum("hij,hijd->hd", rl[:, qi], rec.debug["v_keys"])
                rhs = torch.einsum("ij,hijd->hd", crow, rec.debug["out"])
                assert (lhs - rhs).abs().max().item() < 1e-9, (name, L, "rows_lcm . V != C_conv out")
    mx = torch.tensor(maxes)
    assert mx.max().item() < 0.99 and mx.median().item() < 0.8, (name, "one-hot rows", mx.max().item())
    assert min(spreads) > 0.02, (name, "uniform rows", min(spreads))
    return f"{n_rows} rows, max share {mx.min().item():.3f}..{mx.max().item():.3f}, min rel.spread {min(spreads):.2f}"


def clamp_stats(model, img):
    """Per LGA layer of an L2ViT model: the fraction of queries whose denominator is clamped to 100, and the
    closest relative distance of any denominator to 100 (the clamp is continuous: informative only)."""
    out, dist = [], []
    orig = torch.clamp

    def spy(t, min=None, **kw):
        if min == ref.L2VIT_CLAMP:
            out.append((t < min).double().mean().item())
            dist.append(((t - min).abs() / min).min().item())
        return orig(t, min=min, **kw)

    ref.torch.clamp = spy
    try:
        model.forward(img)
    finally:
        ref.torch.clamp = orig
    return out, min(dist)


def main(argv):
    usage = next(line for line in __doc__.splitlines() if line.startswith("Usage"))
    out_dir = output_folder(argv, usage)
    if out_dir is None:
        return 2
    ref.KEEP_DEBUG = True
    t0 = time.time()

    models = _models()
    files, built, others = {}, {}, {}
    for mname, (arch, sd, mfiles, other) in models.items():
        files[mname] = write_model_files(out_dir, mname, arch, sd, mfiles, other)
        sd0, arch0 = load_model_file(out_dir, files[mname][""], arch["family"])
        assert arch0 == arch
        built[mname] = ref.build(sd0, arch0, dtype=torch.float64)
        assert set(sd0) == set(sd) and all(torch.equal(sd0[k], sd[k]) for k in sd), mname
        if other is not None:
            others[mname] = ref.build(other, arch, dtype=torch.float64)

    cases, first_case, inputs, results = [], set(), {}, {}
    for ci, (name, mname, (H, W), variant) in enumerate(CASES):
        arch = models[mname][0]
        model = built[mname]
        g = torch.Generator().manual_seed(3000 + ci)
        img32 = torch.randn(1, 3, H, W, generator=g)
        img = img32.to(torch.float64)
        inputs[name] = (mname, img, variant)
        with torch.no_grad():
            logits, recs = model.forward(img, variant)
        results[name] = logits
        assert torch.isfinite(logits).all(), name
        spread = (logits.max() - logits.min()).item()
        assert spread > 0.1, (name, spread)
        queries_all = [queries_for(rec) if rec.has_rows() else [] for rec in recs]
        summary = check_records(name, recs, queries_all)
        note = ""
        if arch["family"] == "l2vit" and variant.kernel == "native":
            fr, dist = clamp_stats(model, img)
            note = ", clamp active " + "/".join(f"{100 * f:.0f}%" for f in fr) + f" (closest {dist:.1e} from 100)"

        np.save(os.path.join(out_dir, name + ".input.npy"), img32.numpy().astype(np.float32))
        np.save(os.path.join(out_dir, name + ".logits.npy"), logits.numpy().astype(np.float32))
        layers = []
        for L, (rec, queries) in enumerate(zip(recs, queries_all)):
            entry = {**rec.to_json(), "queries": [list(q) for q in queries], "rows": None}
            if rec.has_rows():
                fname = f"{name}.rows_l{L}.npy"
                np.save(os.path.join(out_dir, fname), np.ascontiguousarray(rec.rows(queries).numpy().astype(np.float32)))
                entry["rows"] = fname
            if rec.lcm is not None:
                fname = f"{name}.rows_lcm_l{L}.npy"
                np.save(os.path.join(out_dir, fname),
                        np.ascontiguousarray(rec.rows_lcm(queries).numpy().astype(np.float32)))
                entry["rows_lcm"] = fname
            layers.append(entry)

        tags = make_hier_cases.file_tags(files, mname, first_case)
        for tag in tags:
            info = files[mname][tag]
            if tag:
                make_hier_cases.check_same_logits(load_model_file(out_dir, info, arch["family"]), arch, ref.build, img,
                                                  variant, logits, (name, tag))
                if info["_two_sets"]:
                    lo, _ = others[mname].forward(img, variant)
                    assert (lo - logits).abs().max().item() > 0.1, (name, tag, "the two weight sets agree")
            cases.append({
                "name": name + (f"@{tag}" if tag else ""), "family": arch["family"],
                **{k: v for k, v in info.items() if not k.startswith("_")}, "arch": arch,
                "variant": variant.to_dict(), "input": name + ".input.npy", "input_size": [H, W],
                "logits": name + ".logits.npy", "layers": layers,
            })
        print(f"{name:26s} {len(recs):2d} layers, logits [{logits.min():+.3f},{logits.max():+.3f}], {summary}{note}"
              f"{' files: ' + ','.join(t or 'primary' for t in tags) if len(tags) > 1 else ''}")

    # deliberate mistakes must be visible in float32 logits
    ref.KEEP_DEBUG = False
    print("mistake / eps error                    case                       max|dlogit|  rel. to spread")
    for mname_, cname in MISTAKE_CASES:
        mname, img, variant = inputs[cname]
        with ref.mistake(mname_), torch.no_grad():
            lg, _ = built[mname].forward(img, variant)
        d = (lg - results[cname]).abs().max().item()
        rel = d / (results[cname].max() - results[cname].min()).item()
        print(f"  {mname_:36s} {cname:26s} {d:10.3e}  {rel:9.2e}")
        assert d > 1e-3, (mname_, cname, d)
    for const, val, cname in EPS_CASES:
        mname, img, variant = inputs[cname]
        with replaced(ref, const, val):
            lg, _ = built[mname].forward(img, variant)
        d = (lg - results[cname]).abs().max().item()
        rel = d / (results[cname].max() - results[cname].min()).item()
        print(f"  {const + ' = ' + repr(val):36s} {cname:26s} {d:10.3e}  {rel:9.2e}")
        assert d > 1e-4, (const, cname, d)

    return write_cases(out_dir, cases, t0, f", {len(models)} models")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
