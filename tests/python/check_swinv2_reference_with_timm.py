#!/usr/bin/python3
"""Checks reference_swinv2.py against timm's own SwinTransformerV2 where a timm checkout is at hand (not part of
the suite). Usage: PYTHONPATH=TIMM_CHECKOUT /usr/bin/python3 tests/python/check_swinv2_reference_with_timm.py
EVA_CASES_DIR (make_eva_cases.py's output); prints each case's largest difference over its largest output."""
import json, os, sys, torch, numpy as np, timm
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io
folder = sys.argv[1]
for name in ("swinv2_t", "swinv2_pretrained_w"):
    cfg = json.load(open(os.path.join(folder, name, "config.json")))
    m = timm.create_model(cfg["architecture"], pretrained=False, **cfg["model_args"])
    sd = safetensors_io.load_file(os.path.join(folder, name, "model.safetensors"))
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not unexpected and all(k.endswith(("k_bias", "relative_coords_table", "relative_position_index")) for k in missing), (missing, unexpected)
    m = m.double().eval()
    tag = f"{name}.128x128"
    img = torch.from_numpy(np.load(os.path.join(folder, tag + ".input.npy"))).double()
    with torch.no_grad():
        out = m(img)
    ref = torch.from_numpy(np.load(os.path.join(folder, tag + ".output.npy"))).double()
    print(name, (out - ref).abs().max().item() / ref.abs().max().item())
