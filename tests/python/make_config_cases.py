#!/usr/bin/python3
"""Generate attnscope's cases of models that open from a registered name alone: random weights at a
released size (timm's pvt_v2_b0, CARE's CARETrans_S0), each in its own folder beside a timm-hub-style
config.json that says only {"architecture": NAME, "num_classes": N}, with no attnscope metadata, and the
logits of the independent references (reference_hier.py, reference_part2.py) in float64.

Usage: /usr/bin/python3 tests/python/make_config_cases.py OUTDIR

Released sizes are copied from the authors' registered functions (timm/models/pvt_v2.py pvt_v2_b0;
zhouyuan888888/CARETrans models/CARETrans.py CARETrans_S0 with the constructor's att_head_dim
default (1, 1, 16, 32)); the loader must find them in its own table by the name.

OUTDIR/cases.json: a list of {name, folder, architecture, family, weights (in folder), input, input_size,
logits, arch (the reference's arch dict)}.
"""
import json
import os
import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch

import make_hier_cases
import make_part2_cases
import reference_hier
import reference_part2
import safetensors_io
from fixture_tools import output_folder, write_cases

CLASSES = 10

# name -> (family, reference arch dict at the released size, training side used for the weights, input side)
RELEASED = {
    "pvt_v2_b0": ("pvt_v2", {"family": "pvt_v2", "heads": [1, 2, 5, 8], "sr_ratios": [8, 4, 2, 1], "linear": False,
                             "depths": [2, 2, 2, 2], "embed_dims": [32, 64, 160, 256], "mlp_ratios": [8, 8, 4, 4],
                             "num_classes": CLASSES, "img_size": 224}, 224, 64),
    "CARETrans_S0": ("care", {"family": "care", "att_head_dim": [1, 1, 16, 32], "heads": [0, 0, 2, 2],
                              "depths": [2, 4, 8, 4], "feat_dims": [24, 48, 96, 192], "mem_dims": [8, 16, 32, 64],
                              "ratios": [[2, 2], [2, 4], [4, 4], [4, 4]], "cls_dim": 1024,
                              "num_classes": CLASSES, "img_size": 224}, 64, 64),
}


def weights_for(name, family, arch, train_side):
    if family == "pvt_v2":
        return make_hier_cases.pvt_state(401, arch, arch["embed_dims"], arch["depths"], arch["mlp_ratios"], train_side)
    return make_part2_cases._reorder_care(
        make_part2_cases.calibrate(make_part2_cases.care_state(402, arch), arch, train_side, 403))


def build(family, sd, arch):
    module = reference_hier if family == "pvt_v2" else reference_part2
    return module.build(sd, arch, dtype=torch.float64)


def main(argv):
    usage = next(line for line in __doc__.splitlines() if line.startswith("Usage"))
    out_dir = output_folder(argv, usage)
    if out_dir is None:
        return 2
    t0 = time.time()
    cases = []
    for index, (name, (family, arch, train_side, side)) in enumerate(RELEASED.items()):
        folder = os.path.join(out_dir, name)
        os.makedirs(folder, exist_ok=True)
        sd = {k: v.contiguous() for k, v in weights_for(name, family, arch, train_side).items()}
        safetensors_io.save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({"architecture": name, "num_classes": CLASSES}, f, indent=1)
        g = torch.Generator().manual_seed(5000 + index)
        img32 = torch.randn(1, 3, side, side, generator=g)
        with torch.no_grad():
            logits, _ = build(family, sd, arch).forward(img32.to(torch.float64))
        assert torch.isfinite(logits).all() and (logits.max() - logits.min()).item() > 0.1, name
        np.save(os.path.join(out_dir, name + ".input.npy"), img32.numpy())
        np.save(os.path.join(out_dir, name + ".logits.npy"), logits.numpy().astype(np.float32))
        cases.append({"name": name, "folder": name, "architecture": name, "family": family,
                      "weights": "model.safetensors", "input": name + ".input.npy", "input_size": [side, side],
                      "logits": name + ".logits.npy", "arch": arch})
        print(f"{name:16s} logits [{logits.min():+.3f},{logits.max():+.3f}]")
    return write_cases(out_dir, cases, t0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
