#!/usr/bin/python3
"""Generate attnscope's parity cases for MLLA (LeapLabTHU/MLLA models/mlla.py) at reduced widths with random
weights (BatchNorm statistics and the RoPE buffers included), saved as the authors' script saves them ({"model":
state_dict} in a .pth) and as a folder with a config.json (the heads no key shows). The reference is
reference_mlla.py (float64, written from the authors' code; check_mlla_reference.py compares it with their module).

Usage: /usr/bin/python3 tests/python/make_mlla_cases.py OUTDIR

OUTDIR/<name>.pth, <name>/model.safetensors + config.json; <name>.input.npy, <name>.output.npy, <name>.rows.npy
[blocks, heads, 3, n]. cases.json: list of {name, kind, model, folder, pth_needs_config, input, output, rows,
queries (per block), kernels, heads}.
"""

import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import torch

import reference_mlla as ref
from fixture_tools import Init, output_folder, write_authors_model, write_cases, write_parity_arrays
from make_hub_cases import smooth_image

CLASSES = 10
MODELS = [dict(name="mlla", seed=4900, embed=16, depths=[1, 2, 1], heads=[1, 2, 4], img=64)]


def main(argv):
    out = output_folder(argv, __doc__)
    if out is None:
        return 2
    started = time.time()
    cases = []
    for index, spec in enumerate(MODELS):
        name = spec["name"]
        sd = ref.make_state(Init(spec["seed"]), spec["embed"], spec["depths"], spec["heads"], spec["img"], CLASSES)
        written = write_authors_model(out, name, sd, {
            "architecture": "mlla_tiny", "num_classes": CLASSES,
            "model_args": {"num_heads": spec["heads"], "embed_dim": spec["embed"], "depths": spec["depths"],
                           "img_size": spec["img"]}})
        img = smooth_image(990 + index, spec["img"], spec["img"])
        logits, matrices = ref.forward(sd, img, spec["heads"])
        widest = max(m.shape[-1] for m in matrices)
        rows = torch.zeros(len(matrices), max(spec["heads"]), 3, widest, dtype=torch.float64)
        queries = []
        for b, m in enumerate(matrices):
            n = m.shape[-1]
            chosen = [0, n // 2 + 1, n - 1]
            queries.append(chosen)
            rows[b, : m.shape[0], :, :n] = m[:, chosen, :]
        written.update(write_parity_arrays(out, name, img, logits, rows))
        cases.append({"name": name, "kind": "mlla", **written, "pth_needs_config": True, "queries": queries,
                      "kernels": ["mlla"] * len(matrices), "heads": spec["heads"]})
    return write_cases(out, cases, started)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
