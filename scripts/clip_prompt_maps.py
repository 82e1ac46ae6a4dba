#!/usr/bin/env python3
"""Where the bundled demo CLIP finds what a prompt names: the gradient of the image-prompt logit with
respect to the patch tokens entering the last visual block, times those tokens, summed over the width
and clamped at zero (Grad-CAM's product on a ViT's tokens), one value per patch. Checks it on held-out
generated images with the pointing game (is the map's largest patch on the named thing's box?) for
"the digit N" and for "a <colour> <letter>", and draws the bundled signs' maps into a PNG.

Usage: scripts/clip_prompt_maps.py --model assets/models/clip.safetensors --held-out DIR [--png OUT.png]
(DIR from `attnscope glyphs --format npy --count 1000 --seed 1000000000000`; the bundled sign_4, sign_8,
sign_6 and sign_1 are its seeds 1, 2, 4 and 5).
"""
import argparse
import csv
import json
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import debian_torch  # noqa: F401,E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from safetensors_io import load_file  # noqa: E402
from train_demo_clip import CLIP, TokenCache, colour_name, load_images, prepare  # noqa: E402
from reference_clip_tokenizer import Tokenizer  # noqa: E402


def prompt_map(model, image, ids):
    """[grid, grid] map of one prepared image [1, 3, H, W] for one prompt's ids [1, L]."""
    kept = {}
    last = model.visual.transformer.resblocks[-1]

    def keep_input(module, inputs):
        inputs[0].retain_grad()
        kept["tokens"] = inputs[0]  # [L, N, W]

    handle = last.register_forward_pre_hook(keep_input)
    image_embedding = model.encode_image(image)
    handle.remove()
    text_embedding = model.encode_text(ids)
    image_embedding = image_embedding / image_embedding.norm(dim=-1, keepdim=True)
    text_embedding = text_embedding / text_embedding.norm(dim=-1, keepdim=True)
    logit = model.logit_scale.exp() * (image_embedding * text_embedding).sum()
    logit.backward()
    tokens = kept["tokens"]  # position 0 is the class token
    values = (tokens.grad[1:, 0, :] * tokens[1:, 0, :]).sum(-1).clamp(min=0).detach()
    grid = int(round(values.numel() ** 0.5))
    return values.reshape(grid, grid).numpy(), float(logit)


def read_scenes_with_boxes(folder):
    """Per image: its digit and the digit's box, and its letters with colour words and boxes."""
    scenes = {}
    with open(os.path.join(folder, "labels.csv")) as f:
        for row in csv.DictReader(f):
            box = tuple(int(row[k]) for k in "xywh")
            scenes[int(row["seed"])] = {"digit": int(row["label"]), "digit_box": box, "letters": []}
    with open(os.path.join(folder, "letters.csv")) as f:
        for row in csv.DictReader(f):
            scenes[int(row["seed"])]["letters"].append({
                "letter": row["letter"], "colour": colour_name(int(row["r"]), int(row["g"]), int(row["b"])),
                "box": tuple(int(row[k]) for k in "xywh")})
    return list(scenes.values())


def box_patches(box, grid, size):
    """The patches a box (x, y, w, h) touches."""
    x, y, w, h = box
    step = size / grid
    columns = range(int(x // step), min(grid, int((x + w - 1) // step) + 1))
    rows = range(int(y // step), min(grid, int((y + h - 1) // step) + 1))
    return {(r, c) for r in rows for c in columns}


def heat(value):
    """A simple dark-blue -> red -> yellow colour scale for value in [0, 1]."""
    return np.stack([np.clip(2.5 * value, 0, 1), np.clip(2.5 * value - 1.2, 0, 1), np.clip(0.5 - 2 * value, 0, 1)
                     + np.clip(3 * value - 2.4, 0, 1)], -1)


def overlay(image, values, scale):
    size = image.shape[0]
    grid = values.shape[0]
    normal = values / values.max() if values.max() > 0 else values
    up = np.kron(normal, np.ones((size // grid, size // grid)))
    mixed = 0.45 * image / 255.0 + 0.55 * heat(up)
    return np.kron(mixed, np.ones((scale, scale, 1)))


def write_png(path, rgb):
    """8-bit RGB PNG with zlib alone (no imaging library here)."""
    rgb = np.clip(rgb * 255 + 0.5, 0, 255).astype(np.uint8)
    height, width, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--held-out", required=True)
    parser.add_argument("--count", type=int, default=200, help="held-out images for the pointing game")
    parser.add_argument("--png", default="", help="draw the bundled signs' maps here")
    args = parser.parse_args()
    torch.set_num_threads(1)

    with open(os.path.splitext(args.model)[0] + "_training.json") as f:
        a = json.load(f)["architecture"]
    tokenizer = Tokenizer.from_openai_gz(os.path.join(ROOT, "assets", "clip", "bpe_simple_vocab_16e6.txt.gz"))
    tokens = TokenCache(tokenizer)
    model = CLIP(a["embed_dim"], a["image"], a["patch"], a["vision_width"], a["vision_layers"], 77,
                 len(tokenizer.encoder), a["text_width"], a["text_layers"])
    model.load_state_dict({name: tensor.float() for name, tensor in load_file(args.model).items()})
    model.eval()
    images = load_images(args.held_out)
    size = images.shape[1]
    scenes = read_scenes_with_boxes(args.held_out)
    grid = a["image"] // a["patch"]

    hits = {"digit": [0, 0], "colour letter": [0, 0]}
    for index in range(min(args.count, len(scenes))):
        scene = scenes[index]
        image = prepare(images[index:index + 1])
        values, _ = prompt_map(model, image, tokens.ids(["the digit %d" % scene["digit"]]))
        top = np.unravel_index(values.argmax(), values.shape)
        hits["digit"][0] += tuple(top) in box_patches(scene["digit_box"], grid, size)
        hits["digit"][1] += 1
        unique = [l for l in scene["letters"] if sum(o["letter"] == l["letter"] for o in scene["letters"]) == 1]
        if unique:
            letter = unique[0]
            values, _ = prompt_map(model, image, tokens.ids(["a %s %s" % (letter["colour"], letter["letter"])]))
            top = np.unravel_index(values.argmax(), values.shape)
            hits["colour letter"][0] += tuple(top) in box_patches(letter["box"], grid, size)
            hits["colour letter"][1] += 1
    uniform = np.mean([len(box_patches(s["digit_box"], grid, size)) / grid ** 2 for s in scenes[:args.count]])
    print(json.dumps({task: {"pointing": right / max(asked, 1), "images": asked} for task, (right, asked)
                      in hits.items()}), "| a random patch lands on the digit's box with p = %.2f" % uniform)

    if args.png:
        rows = []
        for index, name in ((1, "sign_4"), (2, "sign_8"), (4, "sign_6"), (5, "sign_1")):
            scene = scenes[index]
            image = prepare(images[index:index + 1])
            # Letters the prompt names unambiguously: no other letter of the same name and colour.
            letters = [l for l in scene["letters"]
                       if sum(o["letter"] == l["letter"] and o["colour"] == l["colour"] for o in scene["letters"]) == 1]
            prompts = ["the digit %d" % scene["digit"]] + ["a %s %s" % (l["colour"], l["letter"]) for l in letters[:2]]
            panels = [np.kron(images[index] / 255.0, np.ones((3, 3, 1)))]
            for prompt in prompts:
                values, logit = prompt_map(model, image, tokens.ids([prompt]))
                panels.append(overlay(images[index].astype(np.float64), values, 3))
                print("%s: %r logit %.2f" % (name, prompt, logit))
            while len(panels) < 4:  # rows of image + three prompts
                panels.append(np.ones_like(panels[0]))
            rows.append(np.concatenate([np.pad(p, ((2, 2), (2, 2), (0, 0)), constant_values=1) for p in panels], 1))
        write_png(args.png, np.concatenate(rows, 0))


if __name__ == "__main__":
    main()
