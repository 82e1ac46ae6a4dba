#!/usr/bin/env python3
"""Image fixtures for tests/test_image.cpp: small images in several formats and what PIL, timm's
eval transform and torchvision's ToTensor + Normalize make of them, plus .npy files for the reader.

Usage: make_image_fixtures.py OUTDIR. Needs PIL and numpy only; timm and torchvision are
re-implemented below from their source (they may not be installed), written independently of
the C++ code under test.
"""
import json
import math
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image

BICUBIC = getattr(Image, "Resampling", Image).BICUBIC
BILINEAR = getattr(Image, "Resampling", Image).BILINEAR

# (width, height) pairs: upscaling, downscaling (antialiased), mixed and odd sizes.
RESIZE_SIZES = [(224, 224), (50, 30), (400, 250), (256, 171), (13, 301), (1, 1)]
# (height, width, crop_pct): square and non-square timm inputs; 1.15 makes CenterCrop pad.
TIMM_CONFIGS = [(224, 224, 0.875), (160, 224, 0.875), (224, 224, 1.0), (96, 96, 0.9),
                (224, 224, 1.15)]
TENSOR_CONFIG = (224, 224, 0.875)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# --- torchvision / timm, as their Python code does it -----------------------------------------

def torchvision_resize_shorter(img, size):
    """transforms.Resize(int) on a PIL image: _compute_resized_output_size, then PIL bicubic."""
    w, h = img.size
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size, int(size * long / short)
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    return img.resize((new_w, new_h), BICUBIC)


def torchvision_center_crop(img, crop_height, crop_width):
    """transforms.CenterCrop: zero-pad when too small, then crop at int(round(diff / 2.0))."""
    w, h = img.size
    if crop_width > w or crop_height > h:
        left = (crop_width - w) // 2 if crop_width > w else 0
        top = (crop_height - h) // 2 if crop_height > h else 0
        right = (crop_width - w + 1) // 2 if crop_width > w else 0
        bottom = (crop_height - h + 1) // 2 if crop_height > h else 0
        padded = np.pad(np.asarray(img), ((top, bottom), (left, right), (0, 0)))
        img = Image.fromarray(padded, "RGB")
        w, h = img.size
        if (w, h) == (crop_width, crop_height):
            return img
    top = int(round((h - crop_height) / 2.0))
    left = int(round((w - crop_width) / 2.0))
    return img.crop((left, top, left + crop_width, top + crop_height))


def timm_eval_transform(img, height, width, crop_pct):
    """timm transforms_imagenet_eval without ToTensor/Normalize (see to_tensor_normalized)."""
    if height == width:
        img = torchvision_resize_shorter(img, int(math.floor(height / crop_pct)))
    else:
        scale_h, scale_w = (int(x / crop_pct) for x in (height, width))
        img = img.resize((scale_w, scale_h), BICUBIC)
    return torchvision_center_crop(img, height, width)


def to_tensor_normalized(img):
    """ToTensor (x / 255 in float32) then Normalize ((x - mean) / std in float32): [1,3,H,W]."""
    x = np.asarray(img, dtype=np.uint8).astype(np.float32) / np.float32(255)
    x = x.transpose(2, 0, 1)
    mean = np.asarray(IMAGENET_MEAN, dtype=np.float32)[:, None, None]
    std = np.asarray(IMAGENET_STD, dtype=np.float32)[:, None, None]
    return ((x - mean) / std)[None].astype(np.float32)


# --- source images --------------------------------------------------------------------------

def write_png_rgb16(path, pixels):
    """PIL cannot write 16-bit RGB, so the PNG is assembled by hand (RFC 2083, filter 0)."""
    height, width, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].astype(">u2").tobytes() for y in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def smooth_gradient(width, height):
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    red = 255 * x / (width - 1)
    green = 255 * y / (height - 1)
    blue = 127.5 + 127.5 * np.sin(x / 17.0) * np.cos(y / 11.0)
    return np.clip(np.stack([red, green, blue], -1).round(), 0, 255).astype(np.uint8)


def write_sources(out, rng):
    """Writes each source image; returns {name: (file, expected decoded RGB uint8, how)}."""
    sources = {}

    noise = rng.integers(0, 256, size=(61, 97, 3), dtype=np.uint8)
    Image.fromarray(noise, "RGB").save(os.path.join(out, "noise.png"))
    sources["noise"] = "noise.png"

    Image.fromarray(smooth_gradient(300, 200), "RGB").save(os.path.join(out, "gradient.png"))
    sources["gradient"] = "gradient.png"

    # Portrait, so timm's Resize takes the width as the shorter side.
    gray = (smooth_gradient(70, 90)[..., 0] // 2 + rng.integers(0, 100, (90, 70))).astype(np.uint8)
    Image.fromarray(gray, "L").save(os.path.join(out, "gray.png"))
    sources["gray"] = "gray.png"

    rgba = rng.integers(0, 256, size=(48, 64, 4), dtype=np.uint8)
    Image.fromarray(rgba, "RGBA").save(os.path.join(out, "rgba.png"))
    sources["rgba"] = "rgba.png"

    palette = Image.fromarray(smooth_gradient(45, 45), "RGB").quantize(colors=16)
    palette.save(os.path.join(out, "palette.png"))
    sources["palette"] = "palette.png"

    photo = np.clip(smooth_gradient(150, 100).astype(int) +
                    rng.integers(-20, 21, (100, 150, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(photo, "RGB").save(os.path.join(out, "photo.jpg"), quality=90)
    sources["photo"] = "photo.jpg"

    decoded = {name: (file, np.asarray(Image.open(os.path.join(out, file)).convert("RGB")), "PIL")
               for name, file in sources.items()}

    # 16 bits: the expected 8-bit image is the high byte of each sample. PIL decodes 16-bit RGB
    # that way (checked here); for 16-bit gray PIL clips at 255 instead, which we do not follow.
    rgb16 = rng.integers(0, 65536, size=(30, 40, 3), dtype=np.uint16)
    rgb16[0, :8] = [[0, 255, 256], [383, 384, 32767], [32768, 65280, 65535]] + [[1, 2, 3]] * 5
    write_png_rgb16(os.path.join(out, "rgb16.png"), rgb16)
    high_bytes = (rgb16 >> 8).astype(np.uint8)
    pil_rgb16 = np.asarray(Image.open(os.path.join(out, "rgb16.png")).convert("RGB"))
    assert np.array_equal(pil_rgb16, high_bytes), "PIL no longer keeps the high byte of 16-bit RGB"
    decoded["rgb16"] = ("rgb16.png", high_bytes, "PIL (= high byte)")

    gray16 = rng.integers(0, 65536, size=(20, 33), dtype=np.uint16)
    Image.fromarray(gray16, "I;16").save(os.path.join(out, "gray16.png"))
    decoded["gray16"] = ("gray16.png",
                         np.repeat((gray16 >> 8).astype(np.uint8)[..., None], 3, axis=2),
                         "numpy high byte (PIL would clip at 255)")
    return decoded


def write_invalid_files(out, rng):
    with open(os.path.join(out, "bad.png"), "wb") as f:
        f.write(rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with open(os.path.join(out, "bad_magic.png"), "wb") as f:  # a PNG signature, then garbage
        f.write(b"\x89PNG\r\n\x1a\n" + rng.integers(0, 256, 500, dtype=np.uint8).tobytes())
    open(os.path.join(out, "empty.png"), "wb").close()
    with open(os.path.join(out, "noise.png"), "rb") as f:
        whole = f.read()
    with open(os.path.join(out, "truncated.png"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    return ["bad.png", "bad_magic.png", "empty.png", "truncated.png"]


# --- .npy files for read_npy ---------------------------------------------------------------

def write_npy_fixtures(out):
    """Arrays holding arange(n) (so the C++ side can recompute them) in each supported dtype
    and header version, and files read_npy must reject."""
    valid, invalid = [], []
    cases = [("<f4", (2, 3, 4), (1, 0)), ("<f8", (5,), (1, 0)), ("|u1", (3, 7), (1, 0)),
             ("<i8", (2, 2, 2), (1, 0)), ("<i4", (4, 3), (1, 0)), ("<f4", (3, 5), (2, 0)),
             ("<f4", (), (1, 0)), ("<f4", (0, 3), (1, 0))]
    for index, (dtype, shape, version) in enumerate(cases):
        array = np.arange(int(np.prod(shape)), dtype=np.int64).astype(dtype).reshape(shape)
        name = "npy_valid_%d.npy" % index
        with open(os.path.join(out, name), "wb") as f:
            np.lib.format.write_array(f, array, version=version)
        valid.append({"file": name, "dtype": dtype, "shape": list(shape),
                      "version": "%d.%d" % version})

    def write_invalid(name, data, why):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        invalid.append({"file": name, "why": why})

    with open(os.path.join(out, "npy_fortran.npy"), "wb") as f:
        np.save(f, np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    invalid.append({"file": "npy_fortran.npy", "why": "Fortran"})
    with open(os.path.join(out, "npy_big_endian.npy"), "wb") as f:
        np.save(f, np.arange(6, dtype=">f4"))
    invalid.append({"file": "npy_big_endian.npy", "why": "unsupported dtype"})
    with open(os.path.join(out, "npy_valid_0.npy"), "rb") as f:
        whole = f.read()
    write_invalid("npy_truncated.npy", whole[:-4], "data bytes")
    write_invalid("npy_extra.npy", whole + b"\0\0\0\0", "data bytes")
    write_invalid("npy_bad_magic.npy", b"\x93NUMPZ" + whole[6:], "bad magic")
    write_invalid("npy_short.npy", whole[:9], "truncated header")
    broken = whole.replace(b"'shape': (2, 3, 4)", b"'shape': (2, x, 4)")
    write_invalid("npy_bad_shape.npy", broken, "malformed header")
    return valid, invalid


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_image_fixtures.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20240611)

    images = []
    for name, (file, rgb, decoded_by) in write_sources(out, rng).items():
        entry = {"name": name, "file": file, "decoded_by": decoded_by,
                 "decoded": name + ".decoded.npy", "resize": [], "resize_bilinear": [], "timm": []}
        np.save(os.path.join(out, entry["decoded"]), np.ascontiguousarray(rgb, dtype=np.uint8))
        source = Image.fromarray(rgb, "RGB")
        # Also sizes that keep one side, where PIL runs only one of its two passes.
        sizes = RESIZE_SIZES + [(source.width, 37), (41, source.height)]
        for width, height in sizes:
            npy = "%s.resize_%dx%d.npy" % (name, width, height)
            np.save(os.path.join(out, npy), np.asarray(source.resize((width, height), BICUBIC)))
            entry["resize"].append({"width": width, "height": height, "npy": npy})
            # The bilinear filter checkpoints may declare (timm pretrained_cfg, HF resample=2).
            npy = "%s.resize_bilinear_%dx%d.npy" % (name, width, height)
            np.save(os.path.join(out, npy), np.asarray(source.resize((width, height), BILINEAR)))
            entry["resize_bilinear"].append({"width": width, "height": height, "npy": npy})
        for height, width, crop_pct in TIMM_CONFIGS:
            prepared = timm_eval_transform(source, height, width, crop_pct)
            npy = "%s.timm_%dx%d_%g.npy" % (name, height, width, crop_pct)
            np.save(os.path.join(out, npy), np.asarray(prepared))
            entry["timm"].append({"height": height, "width": width, "crop_pct": crop_pct,
                                  "npy": npy})
        height, width, crop_pct = TENSOR_CONFIG
        tensor = to_tensor_normalized(timm_eval_transform(source, height, width, crop_pct))
        entry["tensor"] = {"height": height, "width": width, "crop_pct": crop_pct,
                           "npy": name + ".tensor.npy"}
        np.save(os.path.join(out, entry["tensor"]["npy"]), tensor)
        images.append(entry)

    invalid_images = write_invalid_files(out, rng)
    npy_valid, npy_invalid = write_npy_fixtures(out)
    index = {"images": images, "invalid_images": invalid_images,
             "mean": IMAGENET_MEAN, "std": IMAGENET_STD,
             "npy_valid": npy_valid, "npy_invalid": npy_invalid}
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)


if __name__ == "__main__":
    main()
