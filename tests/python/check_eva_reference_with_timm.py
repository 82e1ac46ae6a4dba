#!/usr/bin/python3
"""Checks reference_eva.py against timm's own modules, where a timm checkout is at hand (not part of the
suite: no package index reaches this machine's CI, and timm needs torchvision).

Usage: PYTHONPATH=TIMM_CHECKOUT /usr/bin/python3 tests/python/check_eva_reference_with_timm.py EVA_CASES_DIR

EVA_CASES_DIR is make_eva_cases.py's output. Every case's weights go into timm.create_model(architecture,
**model_args) (dynamic_img_size where the input is not the registered size), which runs in float64 on
the same input; the largest difference from the reference's output is printed as a share of the largest
output value.
"""

import json
import os
import sys
from functools import partial

import debian_torch  # noqa: F401
import numpy as np
import torch
import timm
from timm.layers import LayerNorm

import safetensors_io


def main(folder):
    worst = 0.0
    for c in json.load(open(os.path.join(folder, "cases.json"))):
        config_path = os.path.join(folder, c["model"], "config.json")
        if os.path.exists(config_path):
            config = json.load(open(config_path))
            architecture, args = config["architecture"], dict(config["model_args"])
        else:  # the bare DINOv3 file: what its keys show, with timm's default eps
            architecture = "vit_small_patch16_dinov3"
            args = dict(embed_dim=64, depth=2, num_heads=1, num_classes=0, norm_layer=partial(LayerNorm, eps=1e-6))
        image = torch.from_numpy(np.load(os.path.join(folder, c["input"])))
        height, width = image.shape[-2:]
        extra = {}
        if "img_size" not in args or (height, width) != (args["img_size"], args["img_size"]):
            extra["dynamic_img_size"] = True
        model = timm.create_model(architecture, pretrained=False, **args, **extra)
        weights = safetensors_io.load_file(os.path.join(folder, c["model"], "model.safetensors"))
        # BEiT's index is a buffer timm rebuilds (non-persistent): it is in the file as the original writes it.
        weights = {k: v for k, v in weights.items() if not k.endswith("relative_position_index")}
        missing, unexpected = model.load_state_dict(weights, strict=False)
        assert not unexpected and all(name.endswith(("k_bias", "relative_position_index")) for name in missing), \
            (missing, unexpected)
        model = model.double().eval()
        with torch.no_grad():
            output = model(image.double())
        reference = torch.from_numpy(np.load(os.path.join(folder, c["output"]))).double()
        error = (output - reference).abs().max().item() / reference.abs().max().item()
        worst = max(worst, error)
        print(f"{c['name']:28s} timm against the reference: {error:.2e} of the largest value")
    print(f"worst {worst:.2e}")
    return 0 if worst < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
