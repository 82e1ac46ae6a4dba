#!/usr/bin/python3
"""Generate attnscope's parity cases for the successors' CSwin: Agent-CSwin (agent_cswin.py) and InLine-CSwin
(inline_cswin.py) at reduced widths with random weights, saved as the authors' scripts save them ({"model":
state_dict} in a .pth) and as a folder with a config.json (the heads and stripe widths no key shows). Stage 0 mixes
a single-branch successor block over the whole grid with a two-branch softmax block of 1-wide stripes ('M...1').
The reference is reference_successor_cswin.py (float64, written from the authors' code;
check_successor_cswin_reference.py compares it with their modules).

Usage: /usr/bin/python3 tests/python/make_successor_cswin_cases.py OUTDIR

OUTDIR/<name>.pth, <name>/model.safetensors + config.json; <name>.input.npy, <name>.output.npy, <name>.rows.npy
[blocks, heads, 3, n] (the successor blocks' rows; zeros elsewhere). cases.json: list of {name, kind, model, folder,
pth_needs_config, arch (the --arch text the .pth needs), input, output, rows, queries (per block), kernels, heads}.
"""

import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import torch

import reference_successor_cswin as ref
from fixture_tools import Init, output_folder, write_authors_model, write_cases, write_parity_arrays
from make_hub_cases import smooth_image

CLASSES = 10
MODELS = [
    dict(name="agent_cswin", kind="agent", seed=4700, embed=16, depths=[2, 1, 1, 1], heads=[2, 2, 4, 4], img=64,
         split_size=[1, 2, 2, 2], la_split_size=[16, 8, 4, 2], attn_type="MABB1", agent_num=[4, 4, 4, 4]),
    dict(name="inline_cswin", kind="inline", seed=4800, embed=16, depths=[2, 1, 1, 1], heads=[2, 2, 4, 4], img=64,
         split_size=[1, 2, 2, 2], la_split_size=[16, 8, 4, 2], attn_type="MISS1"),
]


def arch_text(spec):
    heads = "/".join(str(h) for h in spec["heads"])
    split = "/".join(str(s) for s in spec["split_size"])
    la = "/".join(str(s) for s in spec["la_split_size"])
    return f"heads={heads},split_size={split},la_split_size={la}"


def main(argv):
    out = output_folder(argv, __doc__)
    if out is None:
        return 2
    started = time.time()
    cases = []
    for index, spec in enumerate(MODELS):
        name = spec["name"]
        sd = ref.make_state(Init(spec["seed"]), spec["embed"], spec["depths"], spec["heads"], spec["img"],
                            spec["split_size"], spec["la_split_size"], spec["attn_type"], spec.get("agent_num"),
                            CLASSES)
        model_args = {"num_heads": spec["heads"], "split_size": spec["split_size"],
                      "la_split_size": "-".join(str(s) for s in spec["la_split_size"]), "attn_type": spec["attn_type"],
                      "img_size": spec["img"]}
        if "agent_num" in spec:
            model_args["agent_num"] = "-".join(str(a) for a in spec["agent_num"])
        written = write_authors_model(out, name, sd, {"num_classes": CLASSES, "model_args": model_args})
        img = smooth_image(970 + index, spec["img"], spec["img"])
        logits, matrices = ref.forward(sd, img, spec["heads"], spec["split_size"], spec["la_split_size"],
                                       spec["attn_type"])
        widest = max(m.shape[-1] for m in matrices if m is not None)
        rows = torch.zeros(len(matrices), max(spec["heads"]), 3, widest, dtype=torch.float64)
        queries = []
        for b, m in enumerate(matrices):
            if m is None:
                queries.append([])
                continue
            n = m.shape[-1]
            chosen = [0, n // 2 + 1, n - 1]
            queries.append(chosen)
            rows[b, : m.shape[0], :, :n] = m[:, chosen, :]
        written.update(write_parity_arrays(out, name, img, logits, rows))
        letters = "AB" if spec["kind"] == "agent" else "IS"
        types = [t for stage in ref.block_types(spec["attn_type"], spec["depths"], letters) for t in stage]
        kernels = [{"A": "agent", "I": "inline"}.get(t, "softmax") for t in types]
        cases.append({"name": name, "kind": spec["kind"], **written,
                      "pth_needs_config": True, "arch": arch_text(spec), "queries": queries,
                      "kernels": kernels, "heads": spec["heads"]})
    return write_cases(out, cases, started)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
