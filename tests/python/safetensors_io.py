"""Minimal safetensors reader/writer for attnscope's Python reference and benchmark.

Independent of the `safetensors` package (not available here). File layout:
8-byte little-endian header length n, then n bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}
(padded with spaces to a multiple of 8), then the raw little-endian tensor bytes;
data_offsets are relative to the first byte after the header.

Supported dtypes: F32, F16, BF16, I64 (required), plus F64, I32, I16, I8, U8, BOOL on read/write.
"""

import json
import struct

import numpy as np
import torch

_TORCH_BY_NAME = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
_NAME_BY_TORCH = {v: k for k, v in _TORCH_BY_NAME.items()}
_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def _to_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        # numpy has no bfloat16: reinterpret the 16-bit patterns.
        arr = t.view(torch.int16).numpy()
    else:
        arr = t.numpy()
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes(order="C")


def save_file(tensors, path, metadata=None, dtype=None):
    """Write `tensors` ({name: torch.Tensor or np.ndarray}) to `path`.

    dtype: optional torch floating dtype to which every *floating* tensor is cast
    (e.g. torch.float16 or torch.bfloat16); integer tensors are left as they are.
    """
    prepared = {}
    for name, t in tensors.items():
        if isinstance(t, np.ndarray):
            t = torch.from_numpy(np.ascontiguousarray(t))
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        if t.dtype not in _NAME_BY_TORCH:
            raise ValueError(f"{name}: unsupported dtype {t.dtype}")
        prepared[name] = t
    # Like the official writer: larger items first, then by name, so every tensor's data is aligned
    # to its item size (the header is padded to 8 bytes).
    order = sorted(prepared, key=lambda n: (-_ITEMSIZE[_NAME_BY_TORCH[prepared[n].dtype]], n))
    header = {}
    blobs = []
    offset = 0
    for name in order:
        t = prepared[name]
        data = _to_bytes(t)
        header[name] = {
            "dtype": _NAME_BY_TORCH[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def load_file(path, with_metadata=False):
    """Read a safetensors file into {name: torch.Tensor} (dtypes as stored).

    With with_metadata=True returns (tensors, metadata_dict).
    """
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} exceeds file size")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    base = 8 + n
    metadata = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        dt = info["dtype"]
        if dt not in _TORCH_BY_NAME:
            raise ValueError(f"{name}: unsupported dtype {dt}")
        shape = [int(s) for s in info["shape"]]
        begin, end = (int(o) for o in info["data_offsets"])
        count = 1
        for s in shape:
            count *= s
        if end - begin != count * _ITEMSIZE[dt] or base + end > len(raw):
            raise ValueError(f"{name}: bad data_offsets {begin},{end} for {dt}{shape}")
        buf = raw[base + begin:base + end]
        if dt == "BF16":
            arr = np.frombuffer(buf, dtype="<i2").copy()
            t = torch.from_numpy(arr).view(torch.bfloat16)
        else:
            npdt = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
                    "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}[dt]
            arr = np.frombuffer(buf, dtype=npdt).astype(np.dtype(npdt).newbyteorder("="))
            t = torch.from_numpy(arr)
        out[name] = t.reshape(shape)
    if with_metadata:
        return out, metadata
    return out
