#!/usr/bin/python3
"""Generate attnscope's parity cases for the FLatten authors' Swin successors and PolaFormer's: Agent-Swin
(agent_swin.py), InLine-Swin (inline_swin.py) and PolaFormer-Swin (pola_swin.py) at reduced widths with random weights, saved as the authors' training script saves
them ({"model": state_dict} in a .pth, buffers included) and as a safetensors file beside a config.json, with a
stage mixing a global successor block and a shifted softmax window block ('M1'). The reference is
reference_successor_swin.py (float64, written from the authors' code; check_successor_swin_reference.py compares it
with their modules).

Usage: /usr/bin/python3 tests/python/make_successor_swin_cases.py OUTDIR

OUTDIR/<name>.pth, <name>/model.safetensors + config.json; <name>.input.npy float32 [1,3,S,S]; <name>.output.npy
float32 [1, classes]; <name>.rows.npy float32 [blocks, heads, Q, n] (the global blocks' equivalent rows of the
queries; zeros for window blocks); PolaFormer's also <name>.second_rows.npy (its opposite-sign rows). cases.json: list of {name, kind, model, folder, input, output, rows, queries
(per block, token indices of its stage grid), global_blocks, kernels (per block)}.
"""

import os
import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch

import reference_successor_swin as ref
from fixture_tools import Init, output_folder, write_authors_model, write_cases, write_parity_arrays
from make_hub_cases import smooth_image

CLASSES = 10
MODELS = [
    dict(name="agent_swin", kind="agent", seed=4100, embed=16, depths=[2, 2, 2], heads=[1, 2, 4], img=112, window=28,
         attn_type="MAB1", agent_num=[16, 9, 4]),
    dict(name="inline_swin", kind="inline", seed=4200, embed=16, depths=[2, 2, 2], heads=[2, 2, 4], img=112,
         window=28, attn_type="MIS1"),
    dict(name="pola_swin", kind="pola", seed=4300, embed=16, depths=[2, 2, 2], heads=[2, 2, 4], img=112, window=28,
         attn_type="MLS1"),
]


def main(argv):
    out = output_folder(argv, __doc__)
    if out is None:
        return 2
    started = time.time()
    cases = []
    for index, spec in enumerate(MODELS):
        name = spec["name"]
        sd = ref.make_state(Init(spec["seed"]), spec["kind"], spec["embed"], spec["depths"], spec["heads"],
                            spec["img"], spec["window"], spec["attn_type"], spec.get("agent_num"), CLASSES)
        model_args = {"embed_dim": spec["embed"], "depths": spec["depths"], "num_heads": spec["heads"],
                      "window_size": spec["window"], "attn_type": spec["attn_type"], "img_size": spec["img"]}
        if "agent_num" in spec:
            model_args["agent_num"] = "-".join(str(a) for a in spec["agent_num"])
        config = {"architecture": spec["kind"] + "_swin_tiny", "num_classes": CLASSES, "model_args": model_args}
        written = write_authors_model(out, name, sd, config)
        img = smooth_image(950 + index, spec["img"], spec["img"])
        seconds = []
        logits, matrices = ref.forward(sd, img, spec["heads"], spec["window"], spec["attn_type"], seconds=seconds)
        types = [t for stage in ref.block_types(spec["attn_type"], spec["depths"]) for t in stage]
        widest = max(m.shape[-1] for m in matrices if m is not None)
        heads = max(spec["heads"])
        queries, global_blocks = [], []
        rows = torch.zeros(len(matrices), heads, 3, widest, dtype=torch.float64)
        second_rows = torch.zeros_like(rows)
        for b, m in enumerate(matrices):
            if m is None:
                queries.append([])
                continue
            n = m.shape[-1]
            chosen = [0, n // 2 + 3, n - 1]
            queries.append(chosen)
            global_blocks.append(b)
            rows[b, : m.shape[0], :, :n] = m[:, chosen, :]
            if seconds:
                opposite = seconds[len(global_blocks) - 1]
                second_rows[b, : m.shape[0], :, :n] = opposite[:, chosen, :]
        extra = {}
        if seconds:
            np.save(os.path.join(out, name + ".second_rows.npy"), second_rows.to(torch.float32).numpy())
            extra["second_rows"] = name + ".second_rows.npy"
        written.update(write_parity_arrays(out, name, img, logits, rows))
        kernels = [{"A": "agent", "I": "inline", "L": "pola"}.get(t, "softmax") for t in types]
        cases.append({"name": name, "kind": spec["kind"], **written,
                      "queries": queries, "global_blocks": global_blocks, "kernels": kernels,
                      "heads": spec["heads"], "img": spec["img"], **extra})
    return write_cases(out, cases, started)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
