#!/usr/bin/python3
"""Generate attnscope's parity cases for the successors' PVT (PVT v1's skeleton): Agent-PVT (agent_pvt.py, 'AABB':
agent stages and spatial-reduction softmax stages), InLine-PVT (inline_pvt.py, 'IIII') and PolaFormer-PVT
(pola_pvt.py, 'LLSS' with the first stage's keys reduced by 2) at reduced widths with random weights, as the
authors' scripts save them ({"model": state_dict} in a .pth) and as a folder with a config.json giving the heads of
the softmax stages, which no key shows. The reference is reference_successor_pvt.py (float64, written from the
authors' code; check_successor_pvt_reference.py compares it with their modules).

Usage: /usr/bin/python3 tests/python/make_successor_pvt_cases.py OUTDIR

OUTDIR/<name>.pth, <name>/model.safetensors + config.json; <name>.input.npy float32 [1,3,S,S]; <name>.output.npy
float32 [1, classes]; <name>.rows.npy float32 [blocks, heads, 3, keys] (the equivalent rows of three queries per
block); PolaFormer's also <name>.second_rows.npy. cases.json: list of {name, kind, model, folder, pth_needs_config,
input, output, rows, [second_rows], queries (per block), kernels (per block), heads}.
"""

import os
import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch

import reference_successor_pvt as ref
from fixture_tools import Init, output_folder, write_authors_model, write_cases, write_parity_arrays
from make_hub_cases import smooth_image

CLASSES = 10
MODELS = [
    dict(name="agent_pvt", kind="agent", seed=4400, dims=[16, 32, 32, 64], depths=[2, 1, 1, 1], heads=[1, 2, 2, 4],
         img=64, attn_type="AABB", sr_ratios=[8, 4, 2, 1], la_sr_ratios=[1, 1, 1, 1], agent_num=[4, 4, 4, 4]),
    dict(name="inline_pvt", kind="inline", seed=4500, dims=[16, 32, 32, 64], depths=[2, 1, 1, 1], heads=[2, 2, 4, 4],
         img=64, attn_type="IIII", sr_ratios=[8, 4, 2, 1], la_sr_ratios=[1, 1, 1, 1]),
    dict(name="pola_pvt", kind="pola", seed=4600, dims=[16, 32, 32, 64], depths=[2, 1, 1, 1], heads=[1, 2, 2, 4],
         img=64, attn_type="LLSS", sr_ratios=[8, 4, 2, 1], la_sr_ratios=[2, 1, 1, 1]),
]
KINDS = {"A": "agent", "I": "inline", "L": "pola", "B": "softmax", "S": "softmax"}


def main(argv):
    out = output_folder(argv, __doc__)
    if out is None:
        return 2
    started = time.time()
    cases = []
    for index, spec in enumerate(MODELS):
        name = spec["name"]
        sd = ref.make_state(Init(spec["seed"]), spec["dims"], spec["depths"], spec["heads"], spec["img"],
                            spec["attn_type"], spec["sr_ratios"], spec["la_sr_ratios"], spec.get("agent_num"), CLASSES)
        model_args = {"num_heads": spec["heads"], "attn_type": spec["attn_type"], "img_size": spec["img"],
                      "sr_ratios": spec["sr_ratios"], "la_sr_ratios": "".join(str(s) for s in spec["la_sr_ratios"])}
        if "agent_num" in spec:
            model_args["agent_num"] = "-".join(str(a) for a in spec["agent_num"])
        config = {"architecture": spec["kind"] + "_pvt_tiny", "num_classes": CLASSES, "model_args": model_args}
        written = write_authors_model(out, name, sd, config)
        img = smooth_image(960 + index, spec["img"], spec["img"])
        seconds = []
        logits, matrices = ref.forward(sd, img, spec["heads"], spec["attn_type"], spec["sr_ratios"],
                                       spec["la_sr_ratios"], seconds=seconds)
        widest = max(m.shape[-1] for m in matrices)
        rows = torch.zeros(len(matrices), max(spec["heads"]), 3, widest, dtype=torch.float64)
        second_rows = torch.zeros_like(rows)
        queries = []
        for b, m in enumerate(matrices):
            n = m.shape[-2]
            chosen = [0, n // 2 + 1, n - 1] if n > 2 else [0, 0, n - 1]
            queries.append(chosen)
            rows[b, : m.shape[0], :, : m.shape[-1]] = m[:, chosen, :]
        for b, m in enumerate(seconds):  # PolaFormer's blocks come first in pola_pvt's 'LLSS'
            second_rows[b, : m.shape[0], :, : m.shape[-1]] = m[:, queries[b], :]
        extra = {}
        if seconds:
            np.save(os.path.join(out, name + ".second_rows.npy"), second_rows.to(torch.float32).numpy())
            extra["second_rows"] = name + ".second_rows.npy"
            extra["second_blocks"] = len(seconds)
        written.update(write_parity_arrays(out, name, img, logits, rows))
        kernels = [KINDS[spec["attn_type"][s]] for s, depth in enumerate(spec["depths"]) for _ in range(depth)]
        cases.append({"name": name, "kind": spec["kind"], **written,
                      "pth_needs_config": any(t in "BS" for t in spec["attn_type"]),
                      "queries": queries, "kernels": kernels, "heads": spec["heads"], **extra})
    return write_cases(out, cases, started)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
