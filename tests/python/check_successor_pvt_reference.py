#!/usr/bin/python3
"""Checks reference_successor_pvt.py against the authors' own PVT modules (agent_pvt.py, inline_pvt.py,
pola_pvt.py) where their checkouts and a timm checkout are at hand (not part of the suite). Usage:
PYTHONPATH=TIMM /usr/bin/python3 tests/python/check_successor_pvt_reference.py AGENT_ATTENTION INLINE POLAFORMER
builds each fixture model of make_successor_pvt_cases.py, loads the reference's state dict into the authors' module
(strict) and prints the largest difference over the largest output."""
import os
import sys

import debian_torch  # noqa: F401
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_successor_pvt_cases as cases  # noqa: E402
import reference_successor_pvt as ref  # noqa: E402
from fixture_tools import Init, module_at  # noqa: E402

files = {"agent": os.path.join(sys.argv[1], "agent_transformer/models/agent_pvt.py"),
         "inline": os.path.join(sys.argv[2], "models/inline_pvt.py"),
         "pola": os.path.join(sys.argv[3], "models/pola_pvt.py")}
for spec in cases.MODELS:
    sd = ref.make_state(Init(spec["seed"]), spec["dims"], spec["depths"], spec["heads"], spec["img"],
                        spec["attn_type"], spec["sr_ratios"], spec["la_sr_ratios"], spec.get("agent_num"),
                        cases.CLASSES)
    module = module_at(files[spec["kind"]])
    common = dict(img_size=spec["img"], patch_size=4, num_classes=cases.CLASSES, embed_dims=spec["dims"],
                  num_heads=spec["heads"], mlp_ratios=[2, 2, 2, 2], qkv_bias=True, depths=spec["depths"],
                  sr_ratios=spec["sr_ratios"], attn_type=spec["attn_type"],
                  norm_layer=lambda d: torch.nn.LayerNorm(d, eps=1e-6))
    la = "".join(str(s) for s in spec["la_sr_ratios"])
    if spec["kind"] == "agent":
        model = module.PyramidVisionTransformer(agent_sr_ratios=la, agent_num=spec["agent_num"], **common)
    elif spec["kind"] == "inline":
        model = module.PyramidVisionTransformer(la_sr_ratios=la, **common)
    else:
        model = module.PyramidVisionTransformer(la_sr_ratios=la, alpha=4, kernel_size=5, **common)
    model.load_state_dict(sd, strict=True)
    model = model.double().eval()
    img = torch.randn(2, 3, spec["img"], spec["img"], dtype=torch.float64)
    with torch.no_grad():
        theirs = model(img)
    ours, _ = ref.forward(sd, img, spec["heads"], spec["attn_type"], spec["sr_ratios"], spec["la_sr_ratios"])
    print(spec["name"], ((theirs - ours).abs().max() / theirs.abs().max()).item())
