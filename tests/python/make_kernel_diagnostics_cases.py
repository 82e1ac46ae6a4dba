#!/usr/bin/python3
"""Generate attnscope's parity cases for the kernel diagnostics (analysis/kernel_diagnostics.h): a plain ViT
(2 heads of 32 channels, a 4 x 4 grid and a class token, random weights in timm's keys) run with each kernel
swapped in, and the diagnostics of its last layer computed here in float64, independently of the C++, from
the definitions in docs/analyses.md:

  p = |w| / sum |w| per row; entropy = mean_i -sum p log p; row_max = mean_i max_j w_ij; negative_mass =
  sum |w<0| / sum |w|; local_mass = mean over patch queries of sum |w| over the 3 x 3 patches around the query /
  sum |w|; kl = mean_i KL(p || s) and js = mean_i (KL(p || m) + KL(s || m)) / 2, m = (p + s) / 2, with s the
  softmax row of the same q, k; scale_shift = mean_i sum_j |w(2 q) - w(q)| / 2; lost_negative_share (ReLU
  kernels) = 1 - sum_ij sum_c relu(q_ic) relu(k_jc) / sum_ij sum_c |q_ic| |k_jc|; effective_rank =
  exp(entropy of the normalised singular values of the whole matrix).

The rows come from reference_vit.py's kernels (written from the authors' code). Usage:
/usr/bin/python3 tests/python/make_kernel_diagnostics_cases.py OUTDIR -> OUTDIR/model.safetensors,
input.npy, cases.json: list of {variant, heads: [{entropy, row_max, ...}]}.
"""

import math
import os
import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch

import reference_vit as ref
import safetensors_io
from fixture_tools import output_folder, write_cases
from make_hub_cases import smooth_image
from make_successor_cases import GRID, HEADS, PATCH, make_state

VARIANTS = ["softmax", "linear", "focused", "inline", "mlla", "pola", "agent"]
RELU_KERNELS = ("linear", "focused")
SCALE = 2.0


def kl(p, q):
    terms = p * (p.clamp_min(1e-300).log() - q.clamp_min(1e-300).log())
    return torch.where(p > 0, terms, torch.zeros_like(terms)).sum(-1)


def diagnostics(rows, scaled_rows, softmax_rows, q, k, variant):
    magnitude = rows.abs()
    p = magnitude / magnitude.sum(-1, keepdim=True)
    tokens = rows.shape[0]
    local = []
    for token in range(1, tokens):
        r, c = divmod(token - 1, GRID)
        near = [1 + rr * GRID + cc for rr in range(max(0, r - 1), min(GRID, r + 2))
                for cc in range(max(0, c - 1), min(GRID, c + 2))]
        local.append(magnitude[token, near].sum() / magnitude[token].sum())
    m = (p + softmax_rows) / 2
    s = torch.linalg.svdvals(rows)
    sn = s / s.sum()
    sn = sn[sn > 0]
    out = {"entropy": (-(torch.where(p > 0, p * p.clamp_min(1e-300).log(), torch.zeros_like(p))).sum(-1)).mean(),
           "row_max": rows.max(-1).values.mean(),
           "negative_mass": (-rows.clamp_max(0)).sum() / magnitude.sum(),
           "local_mass": torch.stack(local).mean(),
           "kl_to_softmax": kl(p, softmax_rows).mean(),
           "js_to_softmax": (0.5 * (kl(p, m) + kl(softmax_rows, m))).mean(),
           "scale_shift": (0.5 * (scaled_rows - rows).abs().sum(-1)).mean(),
           "effective_rank": torch.exp(-(sn * sn.log()).sum()),
           "lost_negative_share": None}
    if variant in RELU_KERNELS:
        kept = (torch.relu(q).sum(0) * torch.relu(k).sum(0)).sum()
        every = (q.abs().sum(0) * k.abs().sum(0)).sum()
        out["lost_negative_share"] = 1 - kept / every
    return {key: (None if value is None else float(value)) for key, value in out.items()}


def main(argv):
    out = output_folder(argv, __doc__)
    if out is None:
        return 2
    started = time.time()
    sd = make_state(4100, ["softmax", "softmax"])
    safetensors_io.save_file(sd, os.path.join(out, "model.safetensors"),
                             metadata={"format": "pt", "num_heads": str(HEADS)})
    img = smooth_image(4200, GRID * PATCH, GRID * PATCH)
    np.save(os.path.join(out, "input.npy"), img.numpy())
    model = ref.ViTReference({k: v.to(torch.float64) for k, v in sd.items()}, heads=HEADS, dtype=torch.float64)
    cases = []
    for variant in VARIANTS:
        settings = ref.Settings(variant=variant)
        x, gh, gw = model.embed(img.to(torch.float64))
        ctx = ref._Ctx()
        ctx.with_dwc_band = False
        ctx.settings, ctx.gh, ctx.gw, ctx.num_prefix, ctx.mask = settings, gh, gw, model.num_prefix, None
        for b in model.blocks[:-1]:
            a, _ = b["attn"](model._ln(x, b["n1"]), ctx)
            x = model.after_attention(x, b, a, gh, gw)
        last = model.blocks[-1]["attn"]
        q, k, v = last.qkv(model._ln(x, model.blocks[-1]["n1"]))
        kernel = getattr(last, "_" + variant)
        _, rows = kernel(q, k, v, ctx, True)
        _, scaled = kernel(q * SCALE, k, v, ctx, True)
        softmax = ((q * last.scale) @ k.transpose(-2, -1)).softmax(-1)
        heads = [diagnostics(rows[0, h], scaled[0, h], softmax[0, h], q[0, h], k[0, h], variant)
                 for h in range(HEADS)]
        cases.append({"variant": variant, "heads": heads})
    return write_cases(out, cases, started)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
