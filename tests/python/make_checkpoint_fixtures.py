"""Writes checkpoint fixtures for tests/test_checkpoint.cpp with Debian's python3-torch.

Usage: make_checkpoint_fixtures.py OUTDIR. Besides the .pth/.safetensors files it writes
expected.json: for every file, each tensor's dtype, shape, sum and first values.
The safetensors writer here is deliberately independent of the C++ one.
"""
import argparse
import collections
import json
import os
import struct
import subprocess
import sys

import torch


class ShellCommand:
    """Unpickling this would run a shell command: the loader must refuse it without calling it."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


class CfgNode(dict):
    """Stands in for yacs.config.CfgNode: a dict subclass pickled next to the weights."""


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)
        self.norm = torch.nn.LayerNorm(3)
        self.bn = torch.nn.BatchNorm1d(3)  # adds an I64 0-dim num_batches_tracked
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(2)])


def tiny_state_dict():
    torch.manual_seed(0)
    net = TinyNet()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-1, 1)
        net.bn.num_batches_tracked.fill_(7)
    return net.state_dict()


def describe(tensor):
    flat = tensor.detach().contiguous().reshape(-1)
    return {
        "dtype": str(tensor.dtype).replace("torch.", ""),
        "shape": list(tensor.shape),
        "sum": float(flat.double().sum()) if flat.numel() else 0.0,
        "first": [float(v) for v in flat[:5].double().tolist()],
    }


def write_safetensors(path, tensors, metadata=None):
    """Minimal safetensors writer: sorted names, contiguous data, header padded to 8 bytes."""
    codes = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = bytes(t.view(torch.uint8).numpy().tobytes()) if t.numel() else b""
        header[name] = {"dtype": codes[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    expected = {}

    def record(name, tensors):
        expected[name] = {k: describe(v) for k, v in tensors.items() if torch.is_tensor(v)}

    sd = tiny_state_dict()
    torch.save(sd, os.path.join(out, "flat.pth"))
    record("flat.pth", sd)

    # A research-style checkpoint: the weights sit next to objects attnscope must not rebuild.
    # 'args' would run a shell command if it were ever called; it is not the state_dict we read.
    marker_outside = os.path.join(out, "marker_outside_state_dict")
    wrapped = {
        "model": sd,
        "model_ema": {k: v + 1 for k, v in sd.items() if v.is_floating_point()},
        "args": argparse.Namespace(lr=0.1, arch="flatten_deit_t", drop=[0.1, 0.2]),
        "config": CfgNode(MODEL=CfgNode(NAME="l2vit"), EPOCHS=300),
        "hook": ShellCommand("touch " + marker_outside),
        "optimizer": {"state": {0: {"step": 10}}, "param_groups": [{"lr": 0.1, "params": [0]}]},
        "epoch": 299, "max_accuracy": 79.5, "flags": (True, False, None),
    }
    torch.save(wrapped, os.path.join(out, "wrapped.pth"))
    record("wrapped.pth#model", sd)
    record("wrapped.pth#model_ema", wrapped["model_ema"])
    torch.save(wrapped, os.path.join(out, "wrapped_protocol4.pth"), pickle_protocol=4)

    # Weights under a key attnscope does not guess: the caller has to name it.
    torch.save({"net": sd, "args": wrapped["args"]}, os.path.join(out, "custom_key.pth"))
    record("custom_key.pth", sd)

    marker_inside = os.path.join(out, "marker_inside_state_dict")
    evil = collections.OrderedDict(sd)
    evil["blocks.0.payload"] = ShellCommand("touch " + marker_inside)
    torch.save({"model": evil}, os.path.join(out, "evil.pth"))

    # Dtypes and storages shared between tensors: tied weights, transposed and sliced views.
    torch.manual_seed(1)
    base = torch.randn(6, 8)
    half = torch.randn(5, 3).half()
    views = collections.OrderedDict([
        ("base", base),
        ("tied", base),
        ("transposed", base.t()),
        ("strided_slice", base[1:5, 2::3]),
        ("row", base[3]),
        ("half", half),
        ("half_view", half[2:, 1:]),
        ("bf16", torch.randn(4, 4).bfloat16()),
        ("f64", torch.randn(3).double()),
        ("i32", torch.arange(-3, 9, dtype=torch.int32).reshape(3, 4)),
        ("u8", torch.arange(250, 256, dtype=torch.uint8)),
        ("mask", torch.tensor([True, False, True])),
        ("scalar", torch.tensor(2.5)),
        ("empty", torch.zeros(0, 4)),
        ("param", torch.nn.Parameter(torch.linspace(-1, 1, 6))),
        ("note", "not a tensor"),
        ("step", 12),
    ])
    torch.save(views, os.path.join(out, "views.pth"))
    record("views.pth", views)
    # Every pickle protocol torch.save can write; torch.load reads 1 to 5 (protocol 0 cannot hold
    # the tuples torch uses as storage references).
    for protocol in range(6):
        name = "views_protocol%d.pth" % protocol
        torch.save(views, os.path.join(out, name), pickle_protocol=protocol)
        if protocol > 0:
            record(name, torch.load(os.path.join(out, name)))
    torch.save(wrapped, os.path.join(out, "wrapped_protocol1.pth"), pickle_protocol=1)

    prefixed = collections.OrderedDict(("module." + k, v) for k, v in sd.items())
    torch.save({"state_dict": prefixed}, os.path.join(out, "module_prefix.pth"))
    record("module_prefix.pth", sd)

    torch.save(sd, os.path.join(out, "legacy.pth"), _use_new_zipfile_serialization=False)

    torch.manual_seed(2)
    st = {
        "blocks.0.attn.qkv.weight": torch.randn(9, 3),
        "blocks.0.attn.qkv.bias": torch.randn(9),
        "half": torch.randn(2, 5).half(),
        "bf16": torch.randn(3, 2).bfloat16(),
        "ids": torch.arange(5, dtype=torch.int64),
        "empty": torch.zeros(0),
    }
    write_safetensors(os.path.join(out, "mixed.safetensors"), st,
                      {"format": "pt", "source": "make_checkpoint_fixtures.py"})
    record("mixed.safetensors", st)

    # scripts/convert_checkpoint.py end to end; the C++ test reads its output. Only inputs
    # without hostile objects: the converter unpickles for real.
    converter = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                             "convert_checkpoint.py")
    for source in ("legacy.pth", "module_prefix.pth"):
        target = source.replace(".pth", "_converted.safetensors")
        subprocess.run([sys.executable, converter, os.path.join(out, source), os.path.join(out, target)],
                       check=True, stdout=subprocess.DEVNULL)
        record(target, sd)

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
