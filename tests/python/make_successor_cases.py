#!/usr/bin/python3
"""Generate attnscope's parity cases for the FLatten authors' successors in their DeiT models: agent_deit
(Agent Attention blocks then softmax blocks, as agent_deit_base's agent_layer makes them) and inline_deit
(InLine blocks with the predicted residual), at reduced widths with random weights in their authors' keys, and
the agent, inline, mlla and pola kernels swapped into a plain ViT. The reference is reference_successors.py (float64,
written from the authors' code).

Usage: /usr/bin/python3 tests/python/make_successor_cases.py OUTDIR

OUTDIR/<case>.safetensors; <case>.input.npy float32 [1,3,H,W]; <case>.output.npy float32 [1, classes];
<case>.rows.npy float32 [L, heads, Q, T] (the equivalent matrices' rows of the queries); PolaFormer's also
<case>.second_rows.npy (its opposite-sign matrices' rows). cases.json: list of {name, model, variant, agents,
alpha, input, output, rows, [second_rows], queries, heads, kernels (per block)}.
"""

import math
import os
import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch

import reference_successors as ref
import safetensors_io
from fixture_tools import Init, output_folder, write_cases
from make_hub_cases import position_values, smooth_image

WIDTH, HEADS, PATCH, GRID, CLASSES = 64, 2, 16, 4, 10


def linear(r, sd, name, fan_in, fan_out, gain=1.0):
    sd[name + ".weight"] = r.normal([fan_out, fan_in], gain / math.sqrt(fan_in))
    sd[name + ".bias"] = r.normal([fan_out], 0.02)


def norm(r, sd, name):
    sd[name + ".weight"] = r.normal([WIDTH], 0.1, 1.0)
    sd[name + ".bias"] = r.normal([WIDTH], 0.05)


def make_state(seed, kinds, agents=4):
    """A DeiT state dict in the authors' keys; kinds: 'agent', 'inline' or 'softmax' per block."""
    r = Init(seed)
    C, H = WIDTH, HEADS
    sd = {"patch_embed.proj.weight": r.normal([C, 3, PATCH, PATCH], 1.0 / math.sqrt(3 * PATCH * PATCH)),
          "patch_embed.proj.bias": r.normal([C], 0.02), "cls_token": r.normal([1, 1, C], 0.5),
          "pos_embed": position_values(r, 1, GRID, C).unsqueeze(0)}
    for i, kind in enumerate(kinds):
        b = f"blocks.{i}."
        norm(r, sd, b + "norm1")
        linear(r, sd, b + "attn.qkv", C, 3 * C, 1.8)
        linear(r, sd, b + "attn.proj", C, C, 0.6)
        if kind == "agent":
            a = b + "attn."
            sd[a + "an_bias"] = r.normal([H, agents, 7, 7], 0.5)
            sd[a + "na_bias"] = r.normal([H, agents, 7, 7], 0.5)
            sd[a + "ah_bias"] = r.normal([1, H, agents, GRID, 1], 0.3)
            sd[a + "aw_bias"] = r.normal([1, H, agents, 1, GRID], 0.3)
            sd[a + "ha_bias"] = r.normal([1, H, GRID, 1, agents], 0.3)
            sd[a + "wa_bias"] = r.normal([1, H, 1, GRID, agents], 0.3)
            sd[a + "ac_bias"] = r.normal([1, H, agents, 1], 0.3)
            sd[a + "ca_bias"] = r.normal([1, H, 1, agents], 0.3)
            sd[a + "dwc.weight"] = r.normal([C, 1, 3, 3], 0.3)
            sd[a + "dwc.bias"] = r.normal([C], 0.05)
        elif kind == "inline":
            sd[b + "attn.residual.0.weight"] = r.normal([C, C // H, 1], 1.0 / math.sqrt(C // H))
            sd[b + "attn.residual.0.bias"] = r.normal([C], 0.1)
            sd[b + "attn.residual.2.weight"] = r.normal([9 * C, C // H, 1], 0.3 / math.sqrt(C // H))
            sd[b + "attn.residual.2.bias"] = r.normal([9 * C], 0.05)
        norm(r, sd, b + "norm2")
        linear(r, sd, b + "mlp.fc1", C, 4 * C)
        linear(r, sd, b + "mlp.fc2", 4 * C, C, 0.5)
    norm(r, sd, "norm")
    linear(r, sd, "head", C, CLASSES)
    return {k: v.to(torch.float32).contiguous() for k, v in sd.items()}


CASES = [
    dict(name="agent_deit", kinds=["agent", "agent", "softmax"], variant="native", agents=0),
    dict(name="inline_deit", kinds=["inline", "inline"], variant="native", agents=0),
    dict(name="plain_agent_swap", kinds=["softmax", "softmax"], variant="agent", agents=4),
    dict(name="plain_agent_swap9", kinds=["softmax", "softmax"], variant="agent", agents=9),
    dict(name="plain_inline_swap", kinds=["softmax", "softmax"], variant="inline", agents=0),
    dict(name="plain_mlla_swap", kinds=["softmax", "softmax"], variant="mlla", agents=0),
    dict(name="plain_pola_swap", kinds=["softmax", "softmax"], variant="pola", agents=0, alpha=4.0),
    dict(name="plain_pola_swap_alpha1", kinds=["softmax", "softmax"], variant="pola", agents=0, alpha=1.5),
]


def main(argv):
    out = output_folder(argv, __doc__)
    if out is None:
        return 2
    started = time.time()
    cases = []
    for index, spec in enumerate(CASES):
        name = spec["name"]
        sd = make_state(3000 + index, spec["kinds"])
        safetensors_io.save_file(sd, os.path.join(out, name + ".safetensors"), metadata={"format": "pt", "num_heads": str(HEADS)})
        img = smooth_image(900 + index, GRID * PATCH, GRID * PATCH)
        swap = None if spec["variant"] == "native" else spec["variant"]
        alpha = spec.get("alpha", 4.0)
        seconds = []
        output, matrices = ref.forward(sd, img, HEADS, PATCH, swap=swap, agents=spec["agents"], alpha=alpha,
                                       second_matrices=seconds)
        tokens = 1 + GRID * GRID
        queries = [0, 1, 1 + GRID * GRID // 2, tokens - 1]
        rows = torch.stack([m[0][:, queries, :] for m in matrices])
        np.save(os.path.join(out, name + ".input.npy"), img.numpy())
        np.save(os.path.join(out, name + ".output.npy"), output.to(torch.float32).numpy())
        np.save(os.path.join(out, name + ".rows.npy"), rows.to(torch.float32).numpy())
        case = {}
        if seconds:
            second_rows = torch.stack([m[0][:, queries, :] for m in seconds])
            np.save(os.path.join(out, name + ".second_rows.npy"), second_rows.to(torch.float32).numpy())
            case["second_rows"] = name + ".second_rows.npy"
        kernels = [k if swap is None else swap for k in spec["kinds"]]
        cases.append({"name": name, "model": name + ".safetensors", "variant": spec["variant"],
                      "agents": spec["agents"], "input": name + ".input.npy", "output": name + ".output.npy",
                      "rows": name + ".rows.npy", "queries": queries, "heads": HEADS, "kernels": kernels,
                      "alpha": alpha, **case})
    return write_cases(out, cases, started)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
