#!/usr/bin/python3
"""Generate attnscope's parity cases for hierarchical backbones: Swin, FLatten-Swin, PVT v2 (and -li),
FLatten-PVT v2. Small random-weight models in every checkpoint layout the family has, inputs, and the
reference outputs of reference_hier.py (float64, stored as float32).

Usage: /usr/bin/python3 tests/python/make_hier_cases.py OUTDIR

Deterministic (fixed seeds), a few seconds on 2 CPU cores. Independent of attnscope's C++ sources.

Model files (several per model, same weights):
  <model>.safetensors   flat state_dict. swin / pvt_v2: timm layout. flatten_swin: Microsoft layout
                        (incl. the int64 `relative_position_index` and float `attn_mask` buffers);
                        flatten_pvt_v2: original whai362 layout (as a .pth converted by a script).
  <model>.<tag>.pth     torch.save of the Microsoft / original layout: {"model": sd} or {"model_ema": sd}
                        or the bare sd, or {"model": sd, "args": argparse.Namespace(...), "epoch": int,
                        "max_accuracy": float} (FLatten-style extra objects). cases.json says which.
  <model>.<tag>.pth.arch.json   sidecar: the arch dict below, as JSON (for every .pth).

Arch metadata. safetensors `__metadata__` holds {"format": "pt", "attnscope_arch": "<JSON of the arch
dict>"}; .pth files have the same dict in the sidecar. Arch dict keys:
  family            "swin" | "flatten_swin" | "pvt_v2" | "flatten_pvt_v2"                    (required)
  heads             [int per stage]                                                           (required)
  window            swin: int or [int per stage], the target window (timm window_size);
                    flatten_swin: int, the L-block window (config MODEL.SWIN.WINDOW_SIZE)    (required)
  window_s          flatten_swin: window of the S blocks (authors: 7 if window <= 56 else 12) (required)
  attn_type         flatten_*: one letter per stage, "L" focused / "S" softmax (FLatten's
                    MODEL.LA.ATTN_TYPE; "M<n>" form accepted by the reference)              (required)
  focusing_factor   flatten_*: p of f_p (MODEL.LA.FOCUSING_FACTOR)                           (required)
  sr_ratios         pvt_v2, flatten_pvt_v2: [int per stage] spatial reduction of S stages    (required)
  la_sr_ratios      flatten_pvt_v2: [int per stage] reduction of L stages (MODEL.LA.
                    PVT_LA_SR_RATIOS, the string "1111" as a list)                           (required)
  linear            pvt_v2, flatten_pvt_v2: bool, PVT v2-li (pool 7x7, 1x1 sr, ReLU in MLP)  (required)
  informative (derivable from the keys, written for convenience): kernel_size (DWC), depths,
  embed_dims, mlp_ratios, patch_size, num_classes, img_size (training input side: sizes of the stored
  tables / positional encodings follow from it).

Inputs and outputs per case: <case>.input.npy float32 [1,3,H,W] (already normalised: no preprocessing);
<case>.logits.npy float32 [1, classes]; <case>.rows_l{L}.npy float32 [heads, Q, key_h, key_w] for
attention layer L (numbered across stages in run order): row q is the probabilities of query
queries[q] = [r, c] over the layer's key grid in image coordinates (see reference_hier.py).

OUTDIR/cases.json: a list of objects
  name              unique; cases on extra files of a model are "<case>@<file tag>"
  family, layout    "timm" | "microsoft" | "original" (the layout of `model`)
  container         "safetensors" | "pth";  state_dict_key: "model" | "model_ema" | null (bare / flat)
  model             the weights file; arch_json: its sidecar (null for safetensors)
  arch              the arch dict (as in the file)
  variant           {"kernel": "native"|"softmax"|"linear"|"focused"|"enhanced", "p": float,
                    "window": int|null}: attnscope's runtime options (reference_hier.py docstring)
  input, input_size [H, W], logits
  layers            one per attention block: {stage, block, query_grid [h,w], key_grid [h,w],
                    window [wh,ww]|null, shift [sh,sw], padded_grid [Hp,Wp], kind
                    ("<kernel>-window" | "<kernel>-sr" | "<kernel>-pool"), kernel, native (bool),
                    heads, queries [[r,c],...], rows (file)}; PVT layers add sr (or pool: 7 for
                    -li); focused layers add pe_trained_grid (the square grid their
                    positional_encoding was stored for); Swin softmax layers add bias_table_window
                    (window of the stored table); Swin layers add clamp_grid: the grid the window
                    clamp uses, timm's stage resolution patch_grid // 2**stage (smaller than
                    query_grid after an odd grid was merged).
                    Rows of padded Swin layers sum to 1 minus the padding mass (padding tokens have
                    no image position); masked entries are ~1e-44, entries outside the window 0.
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

import fixture_tools
import reference_hier as ref
import safetensors_io

CLASSES = 10
# Scale of the residual stream and of the conv outputs feeding a LayerNorm: small enough (variance
# ~4e-4) that a wrong LayerNorm eps (1e-5 vs 1e-6) moves the logits well beyond float32 noise.
RESID_SCALE = 0.02


# --------------------------------------------------------------------------------------------
# Random weights
# --------------------------------------------------------------------------------------------
class Init(fixture_tools.Init):
    def smooth(self, h, w, channels):
        """[h*w, channels] low-frequency random field (unit std), row-major, like a trained embedding."""
        yy, xx = torch.meshgrid(torch.arange(h) / max(h, 1), torch.arange(w) / max(w, 1), indexing="ij")
        freq = torch.randint(0, 3, (channels, 3, 2), generator=self.g).float()
        phase = self.uniform([channels, 3], 0.0, 2 * math.pi)
        amp = self.normal([channels, 3], 1.0)
        arg = math.pi * (freq[..., 0, None, None] * yy + freq[..., 1, None, None] * xx) + phase[..., None, None]
        field = (amp[..., None, None] * torch.cos(arg)).sum(dim=1).reshape(channels, h * w).T
        return field / field.std()


class Builder:
    def __init__(self, seed):
        self.r = Init(seed)
        self.sd = {}

    def ln(self, p, C, scale=1.0):
        self.sd[p + ".weight"] = self.r.normal([C], 0.1, 1.0) * scale
        self.sd[p + ".bias"] = self.r.normal([C], 0.05) * scale

    def scale(self, p, s):
        for k in (p + ".weight", p + ".bias"):
            if k in self.sd:
                self.sd[k] = self.sd[k] * s

    def lin(self, p, o, i, std, bias=True):
        self.sd[p + ".weight"] = self.r.normal([o, i], std)
        if bias:
            self.sd[p + ".bias"] = self.r.normal([o], 0.02)

    def conv(self, p, o, i, k, std=None, bias=True):
        self.sd[p + ".weight"] = self.r.normal([o, i, k, k], std if std else 1.0 / math.sqrt(i * k * k))
        if bias:
            self.sd[p + ".bias"] = self.r.normal([o], 0.02)

    def focused(self, p, C, heads, k, pe_hw, pe_std=0.5):
        d = C // heads
        self.sd[p + "dwc.weight"] = self.r.normal([d, 1, k, k], 0.15)
        self.sd[p + "dwc.bias"] = self.r.normal([d], 0.02)
        self.sd[p + "scale"] = self.r.normal([1, 1, C], 0.5)
        pe = pe_std * self.r.smooth(pe_hw[0], pe_hw[1], C) + self.r.normal([pe_hw[0] * pe_hw[1], C], 0.1)
        self.sd[p + "positional_encoding"] = pe[None]


def swin_plan(arch, depths, train_side, patch):
    """Per stage: (training grid, [(type, window, shift) per block]) at the training input."""
    n = len(depths)
    if arch["family"] == "flatten_swin":
        types = ref._parse_attn_types(arch["attn_type"], depths)
    else:
        types = [["S"] * d for d in depths]
    win = arch["window"]
    win = list(win) if isinstance(win, (list, tuple)) else [win] * n
    grid = train_side // patch
    plan = []
    for s in range(n):
        if s > 0:
            grid = (grid + 1) // 2
        blocks = []
        for b in range(depths[s]):
            t = types[s][b]
            target = win[s] if (t == "L" or arch["family"] == "swin") else arch["window_s"]
            window, shift = ref.swin_window_shift((grid, grid), (target, target), b % 2 == 1)
            blocks.append((t, window, shift))
        plan.append((grid, blocks))
    return plan


def swin_state(seed, arch, embed, depths, train_side, patch=4, mlp_ratio=4, qkv_std=1.1, table_std=0.6,
               kernel=5, resid=RESID_SCALE):
    """timm-layout Swin / FLatten-Swin weights "trained" at train_side (tables and positional encodings
    sized for the clamped windows at that size, as the authors' models store them). The residual
    stream (and the patch-conv output) runs at scale `resid` so that LayerNorm eps is observable."""
    B = Builder(seed)
    B.conv("patch_embed.proj", embed, 3, patch)
    B.scale("patch_embed.proj", resid)
    B.ln("patch_embed.norm", embed, resid)
    plan = swin_plan(arch, depths, train_side, patch)
    C = embed
    for s, (grid, blocks) in enumerate(plan):
        if s > 0:
            B.ln(f"layers.{s}.downsample.norm", 4 * C)
            B.lin(f"layers.{s}.downsample.reduction", 2 * C, 4 * C, resid / math.sqrt(4 * C), bias=False)
            C *= 2
        h = arch["heads"][s]
        for b, (t, window, shift) in enumerate(blocks):
            p = f"layers.{s}.blocks.{b}."
            B.ln(p + "norm1", C)
            B.lin(p + "attn.qkv", 3 * C, C, qkv_std / math.sqrt(C))
            B.lin(p + "attn.proj", C, C, 0.6 / math.sqrt(C))
            B.scale(p + "attn.proj", resid)
            if t == "S":
                rows = (2 * window[0] - 1) * (2 * window[1] - 1)
                B.sd[p + "attn.relative_position_bias_table"] = B.r.normal([rows, h], table_std)
            else:
                B.focused(p + "attn.", C, h, kernel, window)
            B.ln(p + "norm2", C)
            B.lin(p + "mlp.fc1", mlp_ratio * C, C, 1.0 / math.sqrt(C))
            B.lin(p + "mlp.fc2", C, mlp_ratio * C, 0.5 / math.sqrt(mlp_ratio * C))
            B.scale(p + "mlp.fc2", resid)
    B.ln("norm", C)
    B.lin("head.fc", CLASSES, C, 1.0 / math.sqrt(C))
    return B.sd, plan


def swin_timm_to_microsoft(sd, plan):
    """The Microsoft / FLatten layout of the same weights, in module order, with the buffers the
    authors' modules register (relative_position_index for window-attention blocks, attn_mask for
    blocks shifted at the training size)."""
    out = {}
    out.update({k: v for k, v in sd.items() if k.startswith("patch_embed.")})
    n = len(plan)
    for s, (grid, blocks) in enumerate(plan):
        for b, (t, window, shift) in enumerate(blocks):
            p = f"layers.{s}.blocks.{b}."
            if any(shift):
                lab = ref.partition_windows(ref.shift_mask_labels((grid, grid), window, shift)[None, :, :, None],
                                            window)[..., 0]
                diff = lab[:, :, None] != lab[:, None, :]
                out[p + "attn_mask"] = torch.zeros(diff.shape).masked_fill(diff, ref.SHIFT_MASK_VALUE)
            for k, v in sd.items():
                if k.startswith(p):
                    out[k] = v
                    if k.endswith("relative_position_bias_table"):
                        out[p + "attn.relative_position_index"] = ref.relative_position_index(*window)
        if s + 1 < n:
            for k, v in sd.items():
                if k.startswith(f"layers.{s + 1}.downsample."):
                    out[f"layers.{s}.downsample." + k[len(f"layers.{s + 1}.downsample."):]] = v
    out.update({k: v for k, v in sd.items() if k.startswith("norm.")})
    out.update({"head." + k[len("head.fc."):]: v for k, v in sd.items() if k.startswith("head.fc.")})
    assert len(out) >= len(sd)
    return out


def pvt_state(seed, arch, dims, depths, mlp_ratios, train_side, qkv_std=1.2, kernel=5, resid=RESID_SCALE):
    """timm-layout PVT v2 / FLatten-PVT v2 weights; residual stream, patch-conv and sr-conv outputs at
    scale `resid` (LayerNorm eps observable)."""
    B = Builder(seed)
    n = len(dims)
    linear = arch.get("linear", False)
    types = arch.get("attn_type", "S" * n)
    grid = -(-train_side // 4)
    prev = 3
    for s in range(n):
        C = dims[s]
        if s == 0:
            B.conv("patch_embed.proj", C, 3, 7)
            B.scale("patch_embed.proj", resid)
            B.ln("patch_embed.norm", C, resid)
        else:
            grid = -(-grid // 2)
            B.conv(f"stages.{s}.downsample.proj", C, prev, 3)
            B.scale(f"stages.{s}.downsample.proj", resid)
            B.ln(f"stages.{s}.downsample.norm", C, resid)
        h = arch["heads"][s]
        sr = arch["sr_ratios"][s] if types[s] == "S" else arch["la_sr_ratios"][s]
        for b in range(depths[s]):
            p = f"stages.{s}.blocks.{b}."
            B.ln(p + "norm1", C)
            B.lin(p + "attn.q", C, C, qkv_std / math.sqrt(C))
            B.lin(p + "attn.kv", 2 * C, C, qkv_std / math.sqrt(C))
            B.lin(p + "attn.proj", C, C, 0.6 / math.sqrt(C))
            B.scale(p + "attn.proj", resid)
            if linear or sr > 1:
                B.conv(p + "attn.sr", C, C, 1 if linear else sr)
                B.scale(p + "attn.sr", resid)
                B.ln(p + "attn.norm", C)
            if types[s] == "L":
                kg = (ref.PVT_LI_POOL,) * 2 if linear else (grid // sr, grid // sr)
                B.focused(p + "attn.", C, h, kernel, kg)
            B.ln(p + "norm2", C)
            hid = int(C * mlp_ratios[s])
            B.lin(p + "mlp.fc1", hid, C, 1.0 / math.sqrt(C))
            B.conv(p + "mlp.dwconv", hid, 1, 3, std=0.3)
            B.lin(p + "mlp.fc2", C, hid, 0.5 / math.sqrt(hid))
            B.scale(p + "mlp.fc2", resid)
        B.ln(f"stages.{s}.norm", C)
        prev = C
    B.lin("head", CLASSES, dims[-1], 1.0 / math.sqrt(dims[-1]))
    return B.sd


def pvt_timm_to_original(sd, n):
    """whai362 / FLatten-PVT key layout, in module order (patch_embed{i}, block{i}, norm{i}, ..., head)."""
    out = {}
    for s in range(n):
        pre = "patch_embed." if s == 0 else f"stages.{s}.downsample."
        for k, v in sd.items():
            if k.startswith(pre):
                out[f"patch_embed{s + 1}." + k[len(pre):]] = v
        pre = f"stages.{s}.blocks."
        for k, v in sd.items():
            if k.startswith(pre):
                out[f"block{s + 1}." + k[len(pre):].replace("mlp.dwconv.", "mlp.dwconv.dwconv.")] = v
        for k, v in sd.items():
            if k.startswith(f"stages.{s}.norm."):
                out[f"norm{s + 1}." + k[len(f"stages.{s}.norm."):]] = v
    out.update({k: v for k, v in sd.items() if k.startswith("head.")})
    assert len(out) == len(sd)
    return out


# --------------------------------------------------------------------------------------------
# Models and cases
# --------------------------------------------------------------------------------------------
def _models():
    """name -> (arch, timm-layout sd, {tag: (layout, container, wrapper, sd of that layout)})."""
    models = {}

    arch = {"family": "swin", "heads": [1, 2, 2, 4], "window": 4, "depths": [2, 2, 2, 1],
            "embed_dims": [16, 32, 64, 128], "patch_size": 4, "mlp_ratios": [4, 4, 4, 4],
            "num_classes": CLASSES, "img_size": 64}
    sd, plan = swin_state(101, arch, 16, arch["depths"], 64)
    ms = swin_timm_to_microsoft(sd, plan)
    models["swin_a"] = (arch, sd, {
        "": ("timm", "safetensors", None, sd),
        "ms": ("microsoft", "pth", "model", ms),
        "ms_ema": ("microsoft", "pth", "model_ema", ms),
    })

    arch = {"family": "flatten_swin", "heads": [1, 2, 2, 4], "window": 56, "window_s": 7, "attn_type": "LLSS",
            "focusing_factor": 3, "kernel_size": 5, "depths": [2, 2, 2, 1], "embed_dims": [16, 32, 64, 128],
            "patch_size": 4, "mlp_ratios": [4, 4, 4, 4], "num_classes": CLASSES, "img_size": 224}
    sd, plan = swin_state(102, arch, 16, arch["depths"], 224, kernel=5)
    ms = swin_timm_to_microsoft(sd, plan)
    models["fswin_a"] = (arch, sd, {
        "": ("microsoft", "safetensors", None, ms),
        "ms": ("microsoft", "pth", "model+args", ms),
    })

    arch = {"family": "flatten_swin", "heads": [1, 2, 2, 4], "window": 8, "window_s": 7, "attn_type": "LLSS",
            "focusing_factor": 3, "kernel_size": 3, "depths": [2, 2, 2, 1], "embed_dims": [16, 32, 64, 128],
            "patch_size": 4, "mlp_ratios": [4, 4, 4, 4], "num_classes": CLASSES, "img_size": 64}
    sd, plan = swin_state(103, arch, 16, arch["depths"], 64, kernel=3)
    ms = swin_timm_to_microsoft(sd, plan)
    models["fswin_w8"] = (arch, sd, {
        "": ("microsoft", "safetensors", None, ms),
        "ms": ("microsoft", "pth", "model", ms),
    })

    arch = {"family": "pvt_v2", "heads": [1, 2, 2, 4], "sr_ratios": [8, 4, 2, 1], "linear": False,
            "depths": [2, 2, 2, 1], "embed_dims": [16, 32, 48, 64], "mlp_ratios": [8, 8, 4, 4],
            "num_classes": CLASSES, "img_size": 128}
    sd = pvt_state(104, arch, arch["embed_dims"], arch["depths"], arch["mlp_ratios"], 128)
    orig = pvt_timm_to_original(sd, 4)
    models["pvt_a"] = (arch, sd, {
        "": ("timm", "safetensors", None, sd),
        "orig": ("original", "pth", "bare", orig),
    })

    arch = {"family": "pvt_v2", "heads": [1, 2, 2, 4], "sr_ratios": [8, 4, 2, 1], "linear": True,
            "depths": [1, 2, 1, 1], "embed_dims": [16, 32, 48, 64], "mlp_ratios": [8, 8, 4, 4],
            "num_classes": CLASSES, "img_size": 96}
    sd = pvt_state(105, arch, arch["embed_dims"], arch["depths"], arch["mlp_ratios"], 96)
    orig = pvt_timm_to_original(sd, 4)
    models["pvt_li"] = (arch, sd, {
        "": ("timm", "safetensors", None, sd),
        "orig": ("original", "pth", "model", orig),
    })

    arch = {"family": "flatten_pvt_v2", "heads": [1, 2, 2, 4], "attn_type": "LLSS", "sr_ratios": [8, 4, 2, 1],
            "la_sr_ratios": [4, 1, 1, 1], "linear": False, "focusing_factor": 3, "kernel_size": 3,
            "depths": [2, 2, 2, 1], "embed_dims": [16, 32, 48, 64], "mlp_ratios": [8, 8, 4, 4],
            "num_classes": CLASSES, "img_size": 128}
    sd = pvt_state(106, arch, arch["embed_dims"], arch["depths"], arch["mlp_ratios"], 128, kernel=3)
    orig = pvt_timm_to_original(sd, 4)
    models["fpvt_a"] = (arch, sd, {
        "": ("original", "safetensors", None, orig),
        "orig": ("original", "pth", "model+args", orig),
    })
    return models


V = ref.Variant
# name: (model, (H, W), variant[, input seed]). The first case of each model is also run on every other file of it.
CASES = [
    ("swin_64", "swin_a", (64, 64), V()),
    ("swin_nonsquare_64x96", "swin_a", (64, 96), V()),
    ("swin_padded_96", "swin_a", (96, 96), V()),
    ("swin_odd_merge_112x96", "swin_a", (112, 96), V()),
    ("swin_window8_64", "swin_a", (64, 64), V(window=8)),
    ("swin_window2_64", "swin_a", (64, 64), V(window=2)),
    ("swin_window8_nonsquare_64x96", "swin_a", (64, 96), V(window=8)),
    ("swin_linear_64", "swin_a", (64, 64), V("linear")),
    ("swin_focused_p3_64", "swin_a", (64, 64), V("focused", p=3.0)),
    ("swin_enhanced_64", "swin_a", (64, 64), V("enhanced")),
    ("fswin_224", "fswin_a", (224, 224), V()),
    ("fswin_pe_resize_96", "fswin_a", (96, 96), V()),
    ("fswin_nonsquare_64x96", "fswin_a", (64, 96), V()),
    ("fswin_softmax_96", "fswin_a", (96, 96), V("softmax")),
    ("fswin_w8_64", "fswin_w8", (64, 64), V()),
    ("pvt_128", "pvt_a", (128, 128), V()),
    ("pvt_nonsquare_112x80", "pvt_a", (112, 80), V()),
    ("pvt_linear_128", "pvt_a", (128, 128), V("linear")),
    ("pvt_focused_p3_128", "pvt_a", (128, 128), V("focused", p=3.0)),
    ("pvt_enhanced_128", "pvt_a", (128, 128), V("enhanced")),
    ("pvt_li_96", "pvt_li", (96, 96), V()),
    ("pvt_li_nonsquare_80x112", "pvt_li", (80, 112), V()),
    ("fpvt_128", "fpvt_a", (128, 128), V()),
    ("fpvt_pe_resize_96x128", "fpvt_a", (96, 128), V()),
    ("fpvt_softmax_128", "fpvt_a", (128, 128), V("softmax")),
]


def queries_for(rec):
    H, W = rec.query_grid
    qs = [(0, 0), (0, W - 1), (H - 1, 0), (H - 1, W - 1), (H // 2, W // 2)]
    if any(rec.shift):
        (wh, ww), (sh, sw) = rec.window, rec.shift
        # last row of a shifted window (the next row is across a border) / first column of one
        r = sh + wh - 1 if sh and sh + wh < H else H // 2 - 1
        c = sw + ww if sw and sw + ww < W else W // 2 - 1
        qs.append((r, c))
    out = []
    for q in qs:
        if q not in out:
            out.append(q)
    return out


# --------------------------------------------------------------------------------------------
# Writing and checking
# --------------------------------------------------------------------------------------------
def write_model_files(out_dir, mname, arch, files):
    """Write every file of one model; return {tag: entry fields}."""
    written = {}
    for tag, (layout, container, wrapper, sd) in files.items():
        sd = {k: v.clone().contiguous() for k, v in sd.items()}  # no shared storages in the pickles
        fname = mname + (f".{tag}" if tag else "") + (".safetensors" if container == "safetensors" else ".pth")
        path = os.path.join(out_dir, fname)
        key = None
        arch_json = None
        if container == "safetensors":
            safetensors_io.save_file(sd, path, metadata={"format": "pt", "attnscope_arch": json.dumps(arch)})
        else:
            if wrapper == "bare":
                obj = sd
            elif wrapper == "model+args":
                key = "model"
                obj = {"model": sd, "args": argparse.Namespace(cfg=f"cfgs/{mname}.yaml", batch_size=128,
                                                               model_ema=True, eval=False),
                       "epoch": 300, "max_accuracy": 12.5}
            else:
                key = wrapper
                obj = {wrapper: sd}
            torch.save(obj, path)
            arch_json = fname + ".arch.json"
            with open(os.path.join(out_dir, arch_json), "w") as f:
                json.dump(arch, f, indent=1)
        written[tag] = {"layout": layout, "container": container, "state_dict_key": key, "model": fname,
                        "arch_json": arch_json}
    return written


def load_model_file(out_dir, info, unwrap=ref.unwrap_checkpoint):
    """The state_dict and arch of a written model file; unwrap(obj) finds a .pth's state_dict and its key."""
    path = os.path.join(out_dir, info["model"])
    if info["container"] == "safetensors":
        sd, meta = safetensors_io.load_file(path, with_metadata=True)
        return sd, json.loads(meta["attnscope_arch"])
    sd, key = unwrap(torch.load(path))
    assert key == info["state_dict_key"], (info["model"], key)
    with open(os.path.join(out_dir, info["arch_json"])) as f:
        return sd, json.load(f)


def file_tags(files, mname, first_case):
    """The files a case is written for: every file of its model (layouts, containers) for the
    model's first case, the primary one for the others."""
    if mname in first_case:
        return [""]
    first_case.add(mname)
    return list(files[mname])


def check_same_logits(model_file, arch, build, img, variant, logits, where):
    """The same weights from another layout or container (model_file: its state_dict and arch)
    must give the same logits."""
    sd, file_arch = model_file
    assert file_arch == arch, where
    lg, _ = build(sd, file_arch, dtype=torch.float64).forward(img, variant)
    err = (lg - logits).abs().max().item()
    assert err < 1e-12, (*where, err)


def checked_row(name, L, rec, r, c):
    """Query (r, c)'s row [h, kh, kw] of record `rec` and its total mass with the padding's, after
    checking that row . V (+ padding) reproduces the layer's own attention output: the
    image-coordinate mapping of the rows is right."""
    row = rec.row(r, c)
    assert torch.isfinite(row).all(), (name, L)
    pad = rec.pad_mass(r, c)
    dbg = rec.debug
    recon = torch.einsum("hij,hijd->hd", row, dbg["v_keys"])
    if dbg["v_pad"] is not None:
        recon = recon + pad[:, None] * dbg["v_pad"]
    err = (recon - dbg["out"][:, r, c]).abs().max().item()
    assert err < 1e-9, (name, L, (r, c), "row . V != attention output", err)
    return row, row.sum(dim=(-2, -1)) + pad


def check_records(name, recs, queries_all):
    """The self-checks on the attention records of one case (float64); returns a short summary."""
    maxes, spreads = [], []
    for L, (rec, queries) in enumerate(zip(recs, queries_all)):
        for (r, c) in queries:
            row, total = checked_row(name, L, rec, r, c)
            if rec.kernel in ("softmax", "linear", "focused"):
                # focused rows sum to x / (x + 1e-6), x = q . mean(k); linear to s / (s + 1e-6)
                tol = 1e-3 if rec.kernel == "focused" else 1e-5
                assert (total - 1).abs().max().item() < tol, (name, L, (r, c), total)
            if rec.window is not None:
                inside = rec.in_window(r, c)
                assert (row[:, ~inside] == 0).all(), (name, L, "non-zero outside the window")
                if any(rec.shift) and rec.kernel == "softmax":
                    tiny = row[:, inside] < 1e-30
                    if tiny.any():  # masked entries: what softmax gives for -100 (not 0)
                        assert (row[:, inside][tiny] > 0).all(), (name, L, "masked entry is exactly 0")
            vals = row.reshape(row.shape[0], -1)
            allowed = vals > 1e-30  # masked (-100) and outside-window keys excluded
            for h in range(vals.shape[0]):
                a = vals[h][allowed[h]]
                if a.numel() >= 4:  # a 1-key shifted region is one-hot by construction
                    maxes.append(a.max().item())
                if a.numel() > 1:
                    spreads.append((a.std() / a.mean()).item())
        # a shifted softmax layer must actually mask something for its border / corner queries
        if any(rec.shift) and rec.kernel == "softmax":
            masked = sum(int((rec._window_row(*rec._locate(r, c)) < 1e-30).sum()) for r, c in queries)
            assert masked > 0, (name, L, "shift mask never active")
    mx = torch.tensor(maxes)
    assert mx.max().item() < 0.99 and mx.median().item() < 0.8, (name, "one-hot rows", mx.max().item())
    assert min(spreads) > 0.02, (name, "uniform rows", min(spreads))
    return f"row max {mx.min().item():.3f}..{mx.max().item():.3f}, min rel.spread {min(spreads):.2f}"


def enhanced_clamp_stats(model, img):
    """(fraction of enhanced rows where clamp_min(sum_j S_ij, 100) is active, closest relative distance of
    sum_j S_ij to 100). The kink is continuous, so closeness is no float32 hazard: informative only."""
    sums = []
    orig = ref.swapped_kernel

    def spy(kernel, q, k, v, heads, p, allowed=None, **kw):
        if kernel == "enhanced":
            s = torch.relu(ref._heads(q, heads)) @ torch.relu(ref._heads(k, heads)).transpose(-2, -1)
            if allowed is not None:
                s = s * allowed[:, None].to(s.dtype)
            sums.append(s.sum(-1).flatten())
        return orig(kernel, q, k, v, heads, p, allowed=allowed, **kw)

    ref.swapped_kernel = spy
    try:
        model.forward(img, ref.Variant("enhanced"))
    finally:
        ref.swapped_kernel = orig
    s = torch.cat(sums)
    dist = ((s - ref.ENHANCED_CLAMP).abs() / ref.ENHANCED_CLAMP).min().item()
    return (s < ref.ENHANCED_CLAMP).double().mean().item(), dist


def main(argv):
    usage = next(line for line in __doc__.splitlines() if line.startswith("Usage"))
    out_dir = fixture_tools.output_folder(argv, usage)
    if out_dir is None:
        return 2
    ref.KEEP_DEBUG = True
    t0 = time.time()

    models = _models()
    files = {}
    built = {}
    for mname, (arch, sd, mfiles) in models.items():
        files[mname] = write_model_files(out_dir, mname, arch, mfiles)
        # the primary file read back is what the reference runs on
        sd0, arch0 = load_model_file(out_dir, files[mname][""])
        assert arch0 == arch
        built[mname] = ref.build(sd0, arch0, dtype=torch.float64)
        internal = ref.to_internal_layout(sd0, arch["family"])
        assert set(internal) == set(sd) and all(torch.equal(internal[k], sd[k]) for k in sd), mname

    cases = []
    first_case = set()
    for ci, (name, mname, (H, W), variant, *seed) in enumerate(CASES):
        arch = models[mname][0]
        model = built[mname]
        g = torch.Generator().manual_seed(seed[0] if seed else 2000 + ci)
        img32 = torch.randn(1, 3, H, W, generator=g)
        img = img32.to(torch.float64)
        with torch.no_grad():
            logits, recs = model.forward(img, variant)
        assert torch.isfinite(logits).all(), name
        spread = (logits.max() - logits.min()).item()
        assert spread > 0.1, (name, spread)
        queries_all = [queries_for(rec) for rec in recs]
        summary = check_records(name, recs, queries_all)
        note = ""
        if variant.kernel == "enhanced":
            frac, dist = enhanced_clamp_stats(model, img)
            note = f", clamp_min(.,100) active in {100 * frac:.0f}% of rows (closest sum {dist:.1e} from 100)"

        np.save(os.path.join(out_dir, name + ".input.npy"), img32.numpy().astype(np.float32))
        np.save(os.path.join(out_dir, name + ".logits.npy"), logits.numpy().astype(np.float32))
        layers = []
        for L, (rec, queries) in enumerate(zip(recs, queries_all)):
            rows = rec.rows(queries)
            fname = f"{name}.rows_l{L}.npy"
            np.save(os.path.join(out_dir, fname), np.ascontiguousarray(rows.numpy().astype(np.float32)))
            layers.append({**rec.to_json(), "queries": [list(q) for q in queries], "rows": fname})

        tags = file_tags(files, mname, first_case)
        for tag in tags:
            info = files[mname][tag]
            if tag:
                check_same_logits(load_model_file(out_dir, info), arch, ref.build, img, variant, logits, (name, tag))
            cases.append({
                "name": name + (f"@{tag}" if tag else ""), "family": arch["family"], **info, "arch": arch,
                "variant": variant.to_dict(), "input": name + ".input.npy", "input_size": [H, W],
                "logits": name + ".logits.npy", "layers": layers,
            })
        print(f"{name:30s} {len(recs):2d} layers, logits [{logits.min():+.3f},{logits.max():+.3f}], {summary}{note}"
              f"{' files: ' + ','.join(t or 'primary' for t in tags) if len(tags) > 1 else ''}")

    return fixture_tools.write_cases(out_dir, cases, t0, f", {len(models)} models")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
