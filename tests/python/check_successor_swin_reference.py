#!/usr/bin/python3
"""Checks reference_successor_swin.py against the authors' own AgentSwinTransformer, InLineSwin and
PolaSwinTransformer where their checkouts and a timm checkout are at hand (not part of the suite). Usage:
PYTHONPATH=TIMM /usr/bin/python3 tests/python/check_successor_swin_reference.py AGENT_ATTENTION INLINE POLAFORMER
(the three checkouts) builds each fixture model of make_successor_swin_cases.py, loads the reference's state dict into the authors' module
(strict: every key and buffer) and prints the largest difference over the largest output."""
import os
import sys

import debian_torch  # noqa: F401
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_successor_swin_cases as cases  # noqa: E402
import reference_successor_swin as ref  # noqa: E402
from fixture_tools import Init, module_at  # noqa: E402


AgentSwinTransformer = module_at(os.path.join(sys.argv[1], "agent_transformer/models/agent_swin.py")).AgentSwinTransformer
InLineSwin = module_at(os.path.join(sys.argv[2], "models/inline_swin.py")).InLineSwin
PolaSwinTransformer = module_at(os.path.join(sys.argv[3], "models/pola_swin.py")).PolaSwinTransformer

for spec in cases.MODELS:
    sd = ref.make_state(Init(spec["seed"]), spec["kind"], spec["embed"], spec["depths"], spec["heads"], spec["img"],
                        spec["window"], spec["attn_type"], spec.get("agent_num"), cases.CLASSES)
    common = dict(img_size=spec["img"], patch_size=4, num_classes=cases.CLASSES, embed_dim=spec["embed"],
                  depths=spec["depths"], num_heads=spec["heads"], window_size=spec["window"], drop_path_rate=0.0,
                  attn_type=spec["attn_type"])
    if spec["kind"] == "agent":
        model = AgentSwinTransformer(agent_num=spec["agent_num"], **common)
    elif spec["kind"] == "inline":
        model = InLineSwin(**common)
    else:
        model = PolaSwinTransformer(alpha=4, kernel_size=5, **common)
    model.load_state_dict(sd, strict=True)
    model = model.double().eval()
    img = torch.randn(2, 3, spec["img"], spec["img"], dtype=torch.float64)
    with torch.no_grad():
        theirs = model(img)
    ours, _ = ref.forward(sd, img, spec["heads"], spec["window"], spec["attn_type"])
    print(spec["name"], ((theirs - ours).abs().max() / theirs.abs().max()).item())
