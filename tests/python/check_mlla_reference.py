#!/usr/bin/python3
"""Checks reference_mlla.py against the authors' own MLLA (LeapLabTHU/MLLA models/mlla.py) where a checkout and a
timm checkout are at hand (not part of the suite). Usage:
PYTHONPATH=TIMM /usr/bin/python3 tests/python/check_mlla_reference.py MLLA_CHECKOUT
loads each fixture model's state dict into the authors' module (strict) and prints the largest difference over the
largest output (their RoPE runs in float32, so about 1e-8 in float64)."""
import os
import sys

import debian_torch  # noqa: F401
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_mlla_cases as cases  # noqa: E402
import reference_mlla as ref  # noqa: E402
from fixture_tools import Init, module_at  # noqa: E402

module = module_at(os.path.join(sys.argv[1], "models/mlla.py"))
for spec in cases.MODELS:
    sd = ref.make_state(Init(spec["seed"]), spec["embed"], spec["depths"], spec["heads"], spec["img"], cases.CLASSES)
    model = module.MLLA(img_size=spec["img"], num_classes=cases.CLASSES, embed_dim=spec["embed"],
                        depths=spec["depths"], num_heads=spec["heads"], mlp_ratio=2., drop_path_rate=0.0)
    model.load_state_dict(sd, strict=True)
    model = model.double().eval()
    img = torch.randn(2, 3, spec["img"], spec["img"], dtype=torch.float64)
    with torch.no_grad():
        theirs = model(img)
    ours, _ = ref.forward(sd, img, spec["heads"])
    print(spec["name"], ((theirs - ours).abs().max() / theirs.abs().max()).item())
