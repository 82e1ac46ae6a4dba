#!/usr/bin/env python3
"""Converts a PyTorch checkpoint (.pth/.bin, any torch.save format) to safetensors for attnscope.

WARNING: this loads the input with torch.load, which unpickles it and can run arbitrary code
embedded in the file. Only run it on checkpoints you trust. attnscope itself never unpickles
code; use this script for the files it refuses (legacy formats, pickled config objects, whole
pickled models).
"""
import argparse
import json
import os
import struct
import sys
import tempfile

import torch

# The order attnscope's own loader uses (core/checkpoint.h).
CONTAINER_KEYS = ("model", "model_ema", "state_dict")

SAFETENSORS_DTYPES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}


def as_state_dict(obj, what):
    """A whole pickled nn.Module becomes its state_dict; a mapping stays as it is."""
    if isinstance(obj, torch.nn.Module):
        return obj.state_dict()
    if isinstance(obj, dict):
        return obj
    sys.exit(f"error: {what} is a {type(obj).__name__}, not a state_dict")


def select_state_dict(checkpoint, key):
    if key:
        if not isinstance(checkpoint, dict) or key not in checkpoint:
            keys = list(checkpoint) if isinstance(checkpoint, dict) else []
            sys.exit(f"error: no '{key}' entry (top-level keys: {', '.join(map(str, keys))})")
        return key, as_state_dict(checkpoint[key], f"'{key}'")
    if isinstance(checkpoint, dict):
        for candidate in CONTAINER_KEYS:
            if candidate in checkpoint:
                return candidate, as_state_dict(checkpoint[candidate], f"'{candidate}'")
    return "", as_state_dict(checkpoint, "the checkpoint")


def tensors_only(state_dict):
    tensors = {}
    for name, value in state_dict.items():
        if not torch.is_tensor(value):
            continue  # e.g. a version number stored beside the weights
        if value.dtype not in SAFETENSORS_DTYPES:
            sys.exit(f"error: tensor '{name}' has dtype {value.dtype}, which safetensors cannot hold here")
        tensors[str(name)] = value.detach().cpu().contiguous()
    if tensors and all(name.startswith("module.") for name in tensors):  # DataParallel
        tensors = {name[len("module."):]: t for name, t in tensors.items()}
    return tensors


def tensor_bytes(tensor):
    if tensor.numel() == 0:
        return b""
    return tensor.reshape(-1).view(torch.uint8).numpy().tobytes()


def write_safetensors(path, tensors, metadata):
    """Sorted names, data laid end to end, JSON header padded with spaces to 8 bytes."""
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name in sorted(tensors):
        raw = tensor_bytes(tensors[name])
        header[name] = {"dtype": SAFETENSORS_DTYPES[tensors[name].dtype],
                        "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)

    # Write next to the target and rename, so a failed run never leaves a torn file.
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for raw in blobs:
                f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, 0o666 & ~current_umask())
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def main():
    parser = argparse.ArgumentParser(
        description="Convert a PyTorch checkpoint to safetensors for attnscope. "
                    "WARNING: the input is loaded with torch.load, which unpickles it and can run "
                    "arbitrary code hidden in the file: only convert checkpoints you trust.")
    parser.add_argument("input", metavar="IN.pth", help="checkpoint written by torch.save")
    parser.add_argument("output", metavar="OUT.safetensors", help="safetensors file to write")
    parser.add_argument("--key", help="top-level entry holding the state_dict "
                                      f"(default: the first of {', '.join(CONTAINER_KEYS)} "
                                      "present, else the whole file)")
    args = parser.parse_args()

    try:
        checkpoint = torch.load(args.input, map_location="cpu")
    except (AttributeError, ImportError) as e:
        sys.exit(f"error: cannot unpickle {args.input}: {e}; the checkpoint refers to code that is "
                 "not importable here (e.g. a training config class): install or import the "
                 "package that defines it and run again")
    key, state_dict = select_state_dict(checkpoint, args.key)
    tensors = tensors_only(state_dict)
    if not tensors:
        sys.exit("error: no tensors found in " + (f"'{key}'" if key else "the checkpoint"))
    write_safetensors(args.output, tensors,
                      {"format": "pt", "source": os.path.basename(args.input)})
    where = f" from '{key}'" if key else ""
    print(f"wrote {len(tensors)} tensors{where} to {args.output}")


if __name__ == "__main__":
    main()
