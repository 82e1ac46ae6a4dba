"""What the fixture generators (make_*_cases.py) share: their command line (one OUTDIR), seeded
random values, a method replaced for the length of a check, a model written in its authors' two forms,
a case's arrays, and the end of a run: cases.json and its summary line."""

import contextlib
import importlib.util
import json
import os
import sys
import time
import types

import numpy as np
import safetensors_io
import torch


def output_folder(argv, usage, threads=2):
    """OUTDIR, the generator's one argument, made when missing, with torch on at most `threads`
    threads; None, after printing `usage`, when the arguments are not that."""
    if len(argv) != 2:
        print(usage, file=sys.stderr)
        return None
    os.makedirs(argv[1], exist_ok=True)
    torch.set_num_threads(min(threads, torch.get_num_threads()))
    return argv[1]


class Init:
    """Random values from one seeded generator, so that a case's weights depend on its seed alone."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def normal(self, shape, std, mean=0.0):
        return torch.randn(*shape, generator=self.g) * std + mean

    def uniform(self, shape, lo, hi):
        return torch.rand(*shape, generator=self.g) * (hi - lo) + lo


@contextlib.contextmanager
def replaced(owner, name, value):
    """owner.name is `value` inside the block (a spy on a reference's method, a changed constant)."""
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield saved
    finally:
        setattr(owner, name, saved)


def write_cases(out_dir, cases, started, what=""):
    """cases.json in `out_dir`, and the line that ends a generator's output; returns the exit code 0."""
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print(f"{len(cases)} cases{what} in {out_dir} ({time.time() - started:.1f} s)")
    return 0


def module_at(path):
    """The authors' file alone (their models/__init__ registers every model with an older timm). pola_swin.py
    imports einops' rearrange without calling it: a stand-in serves where einops is not installed."""
    if "einops" not in sys.modules:
        try:
            import einops  # noqa: F401
        except ImportError:
            sys.modules["einops"] = types.SimpleNamespace(rearrange=None)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_authors_model(out_dir, name, state, config):
    """`state` in the two forms the authors' models reach users: OUT/NAME.pth as their training scripts save
    it ({"model": state_dict, "epoch": 300}) and the folder OUT/NAME with model.safetensors and `config` as its
    config.json. Returns the case entries that name them."""
    torch.save({"model": {k: v.clone().contiguous() for k, v in state.items()}, "epoch": 300},
               os.path.join(out_dir, name + ".pth"))
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    safetensors_io.save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(folder, "model.safetensors"),
                             metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    return {"model": name + ".pth", "folder": name}


def write_parity_arrays(out_dir, name, image, logits, rows):
    """A case's input image, the reference's logits and its attention rows (float32) as OUT/NAME.input.npy,
    .output.npy and .rows.npy. Returns the case entries that name them."""
    np.save(os.path.join(out_dir, name + ".input.npy"), image.numpy())
    np.save(os.path.join(out_dir, name + ".output.npy"), logits.to(torch.float32).numpy())
    np.save(os.path.join(out_dir, name + ".rows.npy"), rows.to(torch.float32).numpy())
    return {"input": name + ".input.npy", "output": name + ".output.npy", "rows": name + ".rows.npy"}
