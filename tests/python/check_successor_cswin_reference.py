#!/usr/bin/python3
"""Checks reference_successor_cswin.py against the authors' own CSWinTransformer of agent_cswin.py and
inline_cswin.py where their checkouts and a timm checkout are at hand (not part of the suite). Usage:
PYTHONPATH=TIMM /usr/bin/python3 tests/python/check_successor_cswin_reference.py AGENT_ATTENTION INLINE
builds each fixture model of make_successor_cswin_cases.py, loads the reference's state dict into the authors'
module (strict) and prints the largest difference over the largest output. Their stem's einops Rearrange
('b c h w -> b (h w) c') is stood in for where einops is not installed."""
import os
import sys
import types

import debian_torch  # noqa: F401
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_successor_cswin_cases as cases  # noqa: E402
import reference_successor_cswin as ref  # noqa: E402
from fixture_tools import Init, module_at  # noqa: E402

try:
    import einops  # noqa: F401
except ImportError:
    class Rearrange(torch.nn.Module):
        def __init__(self, pattern, **sizes):
            super().__init__()
            assert pattern == "b c h w -> b (h w) c", pattern

        def forward(self, x):
            return x.flatten(2).transpose(1, 2)

    layers = types.SimpleNamespace(torch=types.SimpleNamespace(Rearrange=Rearrange))
    sys.modules.update({"einops": types.SimpleNamespace(rearrange=None, layers=layers), "einops.layers": layers,
                        "einops.layers.torch": layers.torch})

files = {"agent": os.path.join(sys.argv[1], "agent_transformer/models/agent_cswin.py"),
         "inline": os.path.join(sys.argv[2], "models/inline_cswin.py")}
for spec in cases.MODELS:
    sd = ref.make_state(Init(spec["seed"]), spec["embed"], spec["depths"], spec["heads"], spec["img"],
                        spec["split_size"], spec["la_split_size"], spec["attn_type"], spec.get("agent_num"),
                        cases.CLASSES)
    module = module_at(files[spec["kind"]])
    kw = dict(img_size=spec["img"], patch_size=4, num_classes=cases.CLASSES, embed_dim=spec["embed"],
              depth=spec["depths"], split_size=spec["split_size"],
              la_split_size="-".join(str(s) for s in spec["la_split_size"]), num_heads=spec["heads"], mlp_ratio=2.,
              attn_type=spec["attn_type"])
    if spec["kind"] == "agent":
        kw["agent_num"] = spec["agent_num"]
    model = module.CSWinTransformer(**kw)
    model.load_state_dict(sd, strict=True)
    model = model.double().eval()
    img = torch.randn(2, 3, spec["img"], spec["img"], dtype=torch.float64)
    with torch.no_grad():
        theirs = model(img)
    ours, _ = ref.forward(sd, img, spec["heads"], spec["split_size"], spec["la_split_size"], spec["attn_type"])
    print(spec["name"], ((theirs - ours).abs().max() / theirs.abs().max()).item())
