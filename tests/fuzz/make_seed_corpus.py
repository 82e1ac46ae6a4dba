#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/), small valid files of
every kind each target reads, made like the test fixtures: tiny timm/Hugging Face/CLIP/DINOv2
state_dicts, torch.save archives at every pickle protocol, images in every format, sessions, training yamls.

Usage: tests/fuzz/make_seed_corpus.py [CORPUS_DIR]  (Debian's python3-torch, PIL, numpy).
The corpus is checked in; inputs the fuzzers found are added next to these by name.
"""
import argparse
import collections
import io
import json
import os
import struct
import sys
import zipfile

import numpy as np
import torch
from PIL import Image


def tiny_vit(prefix="", dim=8, depth=2, patch=4, grid=2, classes=3, extra=None):
    """A timm-layout ViT with every tensor a few values big."""
    g = torch.Generator().manual_seed(dim * 100 + depth)
    t = lambda *shape: torch.randn(*shape, generator=g)
    sd = collections.OrderedDict()
    sd["cls_token"] = t(1, 1, dim)
    sd["pos_embed"] = t(1, 1 + grid * grid, dim)
    sd["patch_embed.proj.weight"] = t(dim, 3, patch, patch)
    sd["patch_embed.proj.bias"] = t(dim)
    for i in range(depth):
        p = "blocks.%d." % i
        for n in ("norm1", "norm2"):
            sd[p + n + ".weight"], sd[p + n + ".bias"] = t(dim), t(dim)
        sd[p + "attn.qkv.weight"], sd[p + "attn.qkv.bias"] = t(3 * dim, dim), t(3 * dim)
        sd[p + "attn.proj.weight"], sd[p + "attn.proj.bias"] = t(dim, dim), t(dim)
        sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"] = t(4 * dim, dim), t(4 * dim)
        sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"] = t(dim, 4 * dim), t(dim)
    sd["norm.weight"], sd["norm.bias"] = t(dim), t(dim)
    if classes:
        sd["head.weight"], sd["head.bias"] = t(classes, dim), t(classes)
    for name, shape in (extra or {}).items():
        sd[name] = t(*shape)
    return collections.OrderedDict((prefix + k, v) for k, v in sd.items())


def safetensors_bytes(tensors, metadata=None):
    codes = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        x = tensors[name].contiguous()
        raw = x.view(torch.uint8).numpy().tobytes() if x.numel() else b""
        header[name] = {"dtype": codes[x.dtype], "shape": list(x.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text, b"".join(blobs)


def models():
    """(name, state_dict, metadata) covering the layouts and variants attnscope reads."""
    focused = tiny_vit(extra={"blocks.%d.attn.%s" % (i, name): shape for i in range(2)
                              for name, shape in (("dwc.weight", (4, 1, 3, 3)), ("dwc.bias", (4,)),
                                                  ("scale", (1, 1, 8)))})
    enhanced = tiny_vit(extra={"blocks.0.attn.temperature": (2, 1, 1), "blocks.1.attn.temperature": (2, 1, 1)})
    deit = tiny_vit(extra={"dist_token": (1, 1, 8), "head_dist.weight": (3, 8), "head_dist.bias": (3,)})
    deit["pos_embed"] = torch.randn(1, 2 + 4, 8)
    registers = tiny_vit(extra={"reg_token": (1, 2, 8), "blocks.0.ls1.gamma": (8,), "blocks.0.ls2.gamma": (8,),
                                "blocks.1.ls1.gamma": (8,), "blocks.1.ls2.gamma": (8,)})
    registers["pos_embed"] = torch.randn(1, 4, 8)  # the patches only
    hf = collections.OrderedDict()
    hf["vit.embeddings.cls_token"] = torch.randn(1, 1, 8)
    hf["vit.embeddings.position_embeddings"] = torch.randn(1, 5, 8)
    hf["vit.embeddings.patch_embeddings.projection.weight"] = torch.randn(8, 3, 4, 4)
    hf["vit.embeddings.patch_embeddings.projection.bias"] = torch.randn(8)
    p = "vit.encoder.layer.0."
    for n in ("attention.attention.query", "attention.attention.key", "attention.attention.value",
              "attention.output.dense"):
        hf[p + n + ".weight"], hf[p + n + ".bias"] = torch.randn(8, 8), torch.randn(8)
    hf[p + "intermediate.dense.weight"], hf[p + "intermediate.dense.bias"] = torch.randn(32, 8), torch.randn(32)
    hf[p + "output.dense.weight"], hf[p + "output.dense.bias"] = torch.randn(8, 32), torch.randn(8)
    for n in ("layernorm_before", "layernorm_after"):
        hf[p + n + ".weight"], hf[p + n + ".bias"] = torch.randn(8), torch.randn(8)
    hf["vit.layernorm.weight"], hf["vit.layernorm.bias"] = torch.randn(8), torch.randn(8)
    hf["classifier.weight"], hf["classifier.bias"] = torch.randn(3, 8), torch.randn(3)
    clip = collections.OrderedDict()  # CLIP's heads are width / 64: the narrowest has 64 channels
    v, w = "visual.", 64
    clip[v + "class_embedding"] = torch.randn(w)
    clip[v + "positional_embedding"] = torch.randn(5, w)
    clip[v + "conv1.weight"] = torch.randn(w, 3, 2, 2)
    clip[v + "ln_pre.weight"], clip[v + "ln_pre.bias"] = torch.randn(w), torch.randn(w)
    r = v + "transformer.resblocks.0."
    clip[r + "attn.in_proj_weight"], clip[r + "attn.in_proj_bias"] = torch.randn(3 * w, w), torch.randn(3 * w)
    clip[r + "attn.out_proj.weight"], clip[r + "attn.out_proj.bias"] = torch.randn(w, w), torch.randn(w)
    for n in ("ln_1", "ln_2"):
        clip[r + n + ".weight"], clip[r + n + ".bias"] = torch.randn(w), torch.randn(w)
    clip[r + "mlp.c_fc.weight"], clip[r + "mlp.c_fc.bias"] = torch.randn(8, w), torch.randn(8)
    clip[r + "mlp.c_proj.weight"], clip[r + "mlp.c_proj.bias"] = torch.randn(w, 8), torch.randn(w)
    clip[v + "ln_post.weight"], clip[v + "ln_post.bias"] = torch.randn(w), torch.randn(w)
    clip[v + "proj"] = torch.randn(w, 4)
    clip = collections.OrderedDict((k, x.half()) for k, x in clip.items())
    return [
        ("vit", tiny_vit(), {"num_heads": "2", "class_names": json.dumps(["a", "b", "c"])}),
        ("vit_f16", collections.OrderedDict((k, x.half()) for k, x in tiny_vit().items()), {"num_heads": "2"}),
        ("vit_gap", tiny_vit(classes=0), {"attention": "linear", "num_heads": "4"}),
        ("focused", focused, None),
        ("enhanced", enhanced, None),
        ("deit", deit, {"num_heads": "2"}),
        ("registers", registers, {"num_heads": "2"}),
        ("hf_vit", hf, {"num_heads": "2"}),
        ("clip", clip, None),
    ]


def torch_save_bytes(obj, protocol=2):
    buffer = io.BytesIO()
    torch.save(obj, buffer, pickle_protocol=protocol)
    return buffer.getvalue()


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def images(folder):
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 256, (9, 12, 3), dtype=np.uint8), "RGB")
    saves = [
        ("rgb.png", rgb, {}), ("gray.png", rgb.convert("L"), {}), ("rgba.png", rgb.convert("RGBA"), {}),
        ("palette.png", rgb.convert("P"), {}), ("photo.jpg", rgb, {"quality": 80}),
        ("progressive.jpg", rgb, {"progressive": True}), ("rgb.bmp", rgb, {}),
        ("lossy.webp", rgb, {"quality": 50}), ("lossless.webp", rgb, {"lossless": True}),
        ("rgb.tiff", rgb, {}), ("rgb.ppm", rgb, {}), ("gray.pgm", rgb.convert("L"), {}),
        ("bits.pbm", rgb.convert("1"), {}), ("rgb.jp2", rgb, {}),
    ]
    for name, image, options in saves:
        buffer = io.BytesIO()
        extension = os.path.splitext(name)[1][1:]
        pil_format = {"jpg": "jpeg", "jp2": "jpeg2000", "pgm": "ppm", "pbm": "ppm"}.get(extension, extension)
        image.save(buffer, format=pil_format, **options)
        write(folder, name, buffer.getvalue())
    gray16 = Image.fromarray((rng.integers(0, 65536, (9, 12))).astype(np.uint16))
    buffer = io.BytesIO()
    gray16.save(buffer, format="png")
    write(folder, "gray16.png", buffer.getvalue())
    pixels = rng.random((9, 12, 3)).astype("<f4")
    write(folder, "rgb.pfm", b"PF\n12 9\n-1.0\n" + pixels[::-1].tobytes())
    ras = struct.pack(">8I", 0x59A66A95, 12, 9, 24, 12 * 9 * 3, 1, 0, 0) + rgb.tobytes()
    write(folder, "rgb.ras", ras)
    write(folder, "rgb.hdr", b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 9 +X 12\n" + bytes(4 * 12 * 9))


def sessions(folder):
    base = {"model": "model.safetensors", "image": "image.png", "variant": "focused", "p": "3", "window": "7",
            "anchors": "0", "dwc": "on", "layer": "-1", "head": "0", "query": "cls", "view": "head",
            "direction": "out", "analysis": "none", "colormap": "viridis", "opacity": "0.6"}
    write(folder, "basic.json", json.dumps(base).encode())
    write(folder, "numbers.json", json.dumps({"p": 2.5, "layer": 3, "opacity": 1, "max-pixels": 1000000}).encode())
    write(folder, "compare.json", json.dumps({"compare": "softmax,linear", "view": "heads", "query": "3,4",
                                              "box": "1,1,4,5", "analysis": "metrics"}).encode())
    write(folder, "export.json", json.dumps({"layout": "grid-heads", "format": "pdf", "dpi": "300",
                                             "variants": "softmax,focused:p=2", "layers": "0,-1",
                                             "heads": "all", "overwrite": "on"}).encode())
    write(folder, "analysis.json", json.dumps({"analysis": "gradcam", "class": "-1",
                                               "gradcam-layer": "blocks.-1.norm1", "fusion": "max",
                                               "discard": "0.9", "size": "160x224", "resize": "fit",
                                               "arch": "heads=2,eps=1e-6"}).encode())


def yamls(folder):
    """Training configs as FLatten's cfgs/*.yaml are written, and the shapes a hostile one takes:
    anchors and aliases (a small "billion laughs"), flow and block styles, quoted and plain scalars."""
    write(folder, "flatten_swin.yaml", b"""MODEL:
  TYPE: flatten_swin
  NAME: flatten_swin_tiny_patch4_224
  DROP_PATH_RATE: 0.2
  LA:
    FOCUSING_FACTOR: 3
    KERNEL_SIZE: 5
    ATTN_TYPE: LLLL
  SWIN:
    EMBED_DIM: 96
    DEPTHS: [ 2, 2, 6, 2 ]
    NUM_HEADS: [ 3, 6, 12, 24 ]
    WINDOW_SIZE: 7
DATA:
  IMG_SIZE: 224
""")
    write(folder, "flatten_pvt.yaml", b"""MODEL:
  TYPE: flatten_pvt_t
  NAME: 'flatten_pvt_t'
  DROP_PATH_RATE: 0.1
DATA: {IMG_SIZE: 224, BATCH_SIZE: 128}
TRAIN: {BASE_LR: 1e-3, EPOCHS: 300, ENABLED: true}
""")
    laughs = b'a: &a ["lol","lol","lol"]\n'
    for i in range(1, 4):
        previous = chr(ord("a") + i - 1)
        name = chr(ord("a") + i)
        laughs += ("%s: &%s [*%s,*%s,*%s]\n" % (name, name, previous, previous, previous)).encode()
    write(folder, "aliases.yaml", laughs)
    write(folder, "documents.yaml", b"--- !!map\n? MODEL\n: {TYPE: \"x\", ~: null}\n...\n--- [1, 2]\n")


def saes(folder):
    """Sparse autoencoders as their libraries write them, tiny (d_in 4, 8 features): saev's sae.pt (a
    compact JSON line, then torch.save) with each activation, and the configs of SAELens, ViT-Prisma and
    dictionary_learning on a first line (fuzz_sae reads that line as cfg.json and config.json)."""
    def saev(activation, extra=None):
        cfg = {"d_model": 4, "d_sae": 8, "activation": {"cls": activation, "params": {"key": activation.lower(),
                                                                                       "top_k": 2}},
               "normalize_w_dec": True}
        header = json.dumps({"schema": 5, "cfg": cfg, "commit": "unknown", "lib": "0.1.0"},
                            separators=(",", ":")).encode() + b"\n"
        sd = {"W_dec": torch.randn(8, 4), "b_dec": torch.zeros(4), "W_enc": torch.randn(4, 8), "b_enc": torch.zeros(8)}
        sd.update(extra or {})
        return header + torch_save_bytes(sd, 2)
    write(folder, "saev_relu.pt", saev("Relu"))
    write(folder, "saev_topk.pt", saev("TopK"))
    write(folder, "saev_batchtopk.pt", saev("BatchTopK", {"activation.threshold": torch.tensor(0.1)}))
    write(folder, "saelens_cfg.json", json.dumps({
        "d_in": 4, "d_sae": 8, "dtype": "float32", "apply_b_dec_to_input": True, "normalize_activations": "layer_norm",
        "architecture": "topk", "k": 2, "metadata": {"hook_name": "blocks.0.hook_resid_post"}}).encode())
    write(folder, "prisma_config.json", json.dumps({
        "d_in": 4, "expansion_factor": 2, "architecture": "standard", "activation_fn_str": "topk",
        "activation_fn_kwargs": {"k": 2}, "hook_point_layer": 0, "layer_subtype": "hook_mlp_out"}).encode())
    write(folder, "dictionary_learning_config.json", json.dumps({
        "trainer": {"dict_class": "AutoEncoderTopK", "activation_dim": 4, "dict_size": 8, "k": 2, "layer": 0,
                    "submodule_name": "resid_post_layer_0"}}).encode())


def prompt_files(folder):
    """Prompt files as CLIP users write them, and the line endings and encodings they come in."""
    write(folder, "digits.txt", "".join("the digit %d\n" % d for d in range(10)).encode())
    write(folder, "crlf_bom.txt", b"\xef\xbb\xbfa photo of a cat\r\na photo of a dog\r\n\r\n")
    write(folder, "mac_cr.txt", b"a red R\ra blue B\r")
    write(folder, "unicode.txt", "un chat \u00e9l\u00e9gant\n\u732b\u306e\u5199\u771f\n\u00a0\u3000\n".encode())
    write(folder, "escape.txt", b"\x1b]0;title\x07a cat\n\tindented\n")
    write(folder, "invalid.txt", b"ok\n\xff\xfe bad\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  "corpus"))
    out = parser.parse_args().corpus
    torch.manual_seed(0)
    for name, sd, metadata in models():
        header, data = safetensors_bytes(sd, metadata)
        write(os.path.join(out, "safetensors"), name + ".safetensors", header + data)
        write(os.path.join(out, "arch"), name + ".json", header[8:].rstrip(b" "))
    state = tiny_vit(dim=4, depth=1)  # storages of at most 1 KB, as fuzz_checkpoint_zip provides
    wrapped = {"model": state, "epoch": 3, "args": argparse.Namespace(lr=0.1), "flags": (True, None, 1.5)}
    for protocol in range(1, 6):
        for name, obj in (("state", state), ("wrapped", wrapped)):
            archive = torch_save_bytes(obj, protocol)
            write(os.path.join(out, "checkpoint_zip"), "%s_protocol%d.pth" % (name, protocol), archive)
            with zipfile.ZipFile(io.BytesIO(archive)) as z:
                pickle = [n for n in z.namelist() if n.endswith("data.pkl")][0]
                write(os.path.join(out, "checkpoint_zip"), "%s_protocol%d.pkl" % (name, protocol), z.read(pickle))
    images(os.path.join(out, "image"))
    sessions(os.path.join(out, "session"))
    yamls(os.path.join(out, "yaml"))
    saes(os.path.join(out, "sae"))
    prompt_files(os.path.join(out, "prompt_file"))


if __name__ == "__main__":
    sys.exit(main())
