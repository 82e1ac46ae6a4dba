"""Bad inputs for tests/test_bad_inputs.cpp, one file per kind of damage issue 16 lists: decompression
bombs, zero-byte tensors with huge shapes, pickles that amplify memory, storages larger than the
file, deep nesting, NaN weights, missing keys, unusable metadata, damaged zips and images.

Usage: make_bad_inputs.py OUTDIR. The test's table says what each file's error must name. Needs
numpy, zlib and zipfile only; every file is built byte by byte here, independently of the C++
readers.
"""
import json
import os
import struct
import sys
import zipfile
import zlib

import numpy as np

DIM, HEADS, PATCH, GRID, DEPTH, CLASSES = 64, 2, 16, 2, 3, 5


def tiny_vit(dim=DIM, depth=DEPTH):
    rng = np.random.default_rng(0)
    t = lambda *shape: (rng.standard_normal(shape) * 0.05).astype("<f4")
    sd = {"cls_token": t(1, 1, dim), "pos_embed": t(1, 1 + GRID * GRID, dim),
          "patch_embed.proj.weight": t(dim, 3, PATCH, PATCH), "patch_embed.proj.bias": t(dim),
          "norm.weight": t(dim), "norm.bias": t(dim), "head.weight": t(CLASSES, dim), "head.bias": t(CLASSES)}
    for i in range(depth):
        p = "blocks.%d." % i
        for name, shape in (("norm1", (dim,)), ("norm2", (dim,)), ("attn.qkv", (3 * dim, dim)),
                            ("attn.proj", (dim, dim)), ("mlp.fc1", (4 * dim, dim)), ("mlp.fc2", (dim, 4 * dim))):
            sd[p + name + ".weight"] = t(*shape)
            sd[p + name + ".bias"] = t(shape[0])
    return sd


def weights(shapes, seed=0):
    """name -> small random float32 weights of the given shapes (a family's state_dict)."""
    rng = np.random.default_rng(seed)
    tensors = {name: (rng.standard_normal(shape) * 0.05).astype("<f4") for name, shape in shapes.items()}
    for name in tensors:
        if name.endswith("running_var"):  # a variance: positive
            tensors[name] = np.abs(tensors[name]) + np.float32(1)
    return tensors


def linear(name, out, inp, bias=True):
    return {name + ".weight": (out, inp), **({name + ".bias": (out,)} if bias else {})}


def conv(name, out, inp, kh, kw=None):
    return {name + ".weight": (out, inp, kh, kw or kh), name + ".bias": (out,)}


def norm(name, dim, batch=False):
    """LayerNorm, or BatchNorm with its running statistics (num_batches_tracked is optional)."""
    stats = {name + ".running_mean": (dim,), name + ".running_var": (dim,)} if batch else {}
    return {name + ".weight": (dim,), name + ".bias": (dim,), **stats}


def mlp(prefix, dim, hidden):
    return {**linear(prefix + "mlp.fc1", hidden, dim), **linear(prefix + "mlp.fc2", dim, hidden)}


def tiny_swin(microsoft=False):
    """timm's Swin layout, or Microsoft's (merging at the end of stages, `head`): 2 stages, windows of 2."""
    shapes = {**conv("patch_embed.proj", 8, 3, 4), **norm("patch_embed.norm", 8), **norm("norm", 16)}
    for stage, (dim, heads) in enumerate(((8, 1), (16, 2))):
        p = "layers.%d.blocks.0." % stage
        shapes.update({**norm(p + "norm1", dim), **linear(p + "attn.qkv", 3 * dim, dim),
                       **linear(p + "attn.proj", dim, dim), p + "attn.relative_position_bias_table": (9, heads),
                       **norm(p + "norm2", dim), **mlp(p, dim, 2 * dim)})
    merge = "layers.%d.downsample." % (0 if microsoft else 1)
    shapes.update({**norm(merge + "norm", 32), **linear(merge + "reduction", 16, 32, bias=False)})
    shapes.update(linear("head" if microsoft else "head.fc", CLASSES, 16))
    return weights(shapes)


def tiny_pvt():
    """PVT v2 in timm's layout: 2 stages without spatial reduction."""
    shapes = {**conv("patch_embed.proj", 8, 3, 7), **norm("patch_embed.norm", 8), **linear("head", CLASSES, 16)}
    for stage, dim in enumerate((8, 16)):
        s = "stages.%d." % stage
        p = s + "blocks.0."
        shapes.update({**norm(p + "norm1", dim), **linear(p + "attn.q", dim, dim), **linear(p + "attn.kv", 2 * dim, dim),
                       **linear(p + "attn.proj", dim, dim), **norm(p + "norm2", dim), **mlp(p, dim, 2 * dim),
                       **conv(p + "mlp.dwconv", 2 * dim, 1, 3), **norm(s + "norm", dim)})
        if stage:
            shapes.update({**conv(s + "downsample.proj", dim, 8, 3), **norm(s + "downsample.norm", dim)})
    return weights(shapes)


def tiny_cswin():
    """FLatten-CSwin's keys: 2 stages of one softmax block over the whole grid."""
    shapes = {**conv("stage1_conv_embed.0", 8, 3, 7), **norm("stage1_conv_embed.2", 8), **norm("norm", 16),
              **conv("merge1.conv", 16, 8, 3), **norm("merge1.norm", 16), **linear("head", CLASSES, 16)}
    for stage, dim in enumerate((8, 16)):
        p = "stage%d.0." % (stage + 1)
        shapes.update({**linear(p + "qkv", 3 * dim, dim), **linear(p + "proj", dim, dim), **norm(p + "norm1", dim),
                       **norm(p + "norm2", dim), **mlp(p, dim, 2 * dim), **conv(p + "attns.0.get_v", dim, 1, 3)})
    return weights(shapes)


def tiny_l2vit():
    """L2ViT's keys: the conv stem, a local and a global block, a second stage with a local block."""
    stem = "downsample_layers.0."
    shapes = {**conv(stem + "proj.proj.0", 4, 3, 3), **norm(stem + "proj.proj.1", 4, batch=True),
              **conv(stem + "proj.proj.3", 8, 4, 3), **norm(stem + "proj.proj.4", 8, batch=True),
              **norm(stem + "norm", 8), **norm("downsample_layers.1.norm", 8),
              **conv("downsample_layers.1.proj", 16, 8, 2), **norm("norm", 16), **linear("head", CLASSES, 16)}
    for p, dim, is_global in (("stages.0.0.", 8, False), ("stages.0.1.", 8, True), ("stages.1.0.", 16, False)):
        shapes.update({**conv(p + "cpe.0.proj", dim, 1, 3), **norm(p + "norm1", dim), **norm(p + "norm2", dim),
                       **linear(p + "attn.qkv", 3 * dim, dim), **linear(p + "attn.proj", dim, dim),
                       **mlp(p, dim, 2 * dim)})
        if is_global:
            shapes.update({p + "attn.temperature": (1, 1, 1), **norm(p + "norm3", dim),
                           **conv(p + "local_mp.conv1", dim, 1, 7), **norm(p + "local_mp.bn", dim, batch=True),
                           **conv(p + "local_mp.conv2", dim, 1, 7)})
        else:
            shapes.update(conv(p + "cpe.1.proj", dim, 1, 3))
    return weights(shapes)


def tiny_care():
    """CARE's keys: a strip-conv stage and an attention stage whose (last) block outputs 32 channels."""
    shapes = {**conv("stem.0", 8, 3, 4), **norm("stem.1", 8, batch=True), **norm("stages.1.downsample.0", 8, batch=True),
              **conv("stages.1.downsample.1", 16, 8, 2)}
    for head in ("head", "dist_head"):
        shapes.update({**norm(head + ".norm", 32), **linear(head + ".fc", CLASSES, 32)})
    for stage, (dim, part, last) in enumerate(((8, 2, False), (16, 4, True))):
        p = "stages.%d.blocks.0." % stage
        mixer, inter = p + "token_mixer.", p + "inter_layer."
        shapes.update({**conv(mixer + "dwconv1", part, 1, 3), **conv(mixer + "dwconv2", part, 1, 7),
                       **norm(inter + "inter1_norm", 3 * part, batch=True), **conv(inter + "inter1_fc1", 6 * part, 3 * part, 1),
                       **conv(inter + "inter1_conv", 6 * part, 1, 3), **conv(inter + "inter1_fc2", 3 * part, 6 * part, 1),
                       **norm(inter + "inter2_norm", dim, batch=True), **conv(inter + "inter2_fc1", 2 * dim, dim, 1),
                       **conv(inter + "inter2_conv", 2 * dim, 1, 3)})
        if last:
            shapes.update(conv(mixer + "qk", 2 * part, part, 1))
        else:
            shapes.update({p + "gamma": (dim,), **conv(inter + "inter2_fc2", dim, 2 * dim, 1),
                           **conv(mixer + "dwconvatt_1", part, 1, 11, 1), **conv(mixer + "dwconvatt_2", part, 1, 1, 11)})
    return weights(shapes)


# Each family's undamaged file, and the keys whose zero-byte forms must be refused with their name:
# an MLP hidden size of 5e7 (CARE's 1x1 conv holds it as [5e7, 0, 1, 1]) and a head of 1e8 classes.
FAMILIES = {
    "swin": (tiny_swin, "layers.0.blocks.0.mlp.fc1.weight", "head.fc.weight"),
    "swin_microsoft": (lambda: tiny_swin(microsoft=True), "layers.0.blocks.0.mlp.fc1.weight", "head.weight"),
    "pvt_v2": (tiny_pvt, "stages.0.blocks.0.mlp.fc1.weight", "head.weight"),
    "cswin": (tiny_cswin, "stage1.0.mlp.fc1.weight", "head.weight"),
    "l2vit": (tiny_l2vit, "stages.0.0.mlp.fc1.weight", "head.weight"),
    "care": (tiny_care, "stages.0.blocks.0.inter_layer.inter1_fc1.weight", "head.fc.weight"),
}


def safetensors(path, tensors, metadata=None, shapes=None):
    """tensors: name -> float32 array; shapes: name -> a shape for a tensor without data (0 bytes)."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    entries = dict(tensors)
    entries.update({name: None for name in (shapes or {})})
    for name in sorted(entries):
        raw = b"" if entries[name] is None else entries[name].tobytes()
        shape = list(shapes[name]) if entries[name] is None else list(entries[name].shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def raw_safetensors(path, header_text, data=b""):
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_text)) + header_text + data)


def pickle_state_dict(tensors):
    """A protocol-2 pickle of {name: FloatTensor} as torch.save writes it; tensors: (name, key, numel, declared)."""
    def string(text):
        data = text.encode()
        return b"X" + struct.pack("<I", len(data)) + data

    def long1(value):
        return b"\x8a\x08" + struct.pack("<q", value)

    out = b"\x80\x02}("
    for name, key, numel, declared in tensors:
        out += string(name) + b"ctorch._utils\n_rebuild_tensor_v2\n("
        out += b"(" + string("storage") + b"ctorch\nFloatStorage\n" + string(key) + string("cpu") + long1(declared) + b"tQ"
        out += long1(0) + b"(" + long1(numel) + b"t(" + long1(1) + b"t\x89ccollections\nOrderedDict\n)RtR"
    return out + b"u."


def raw_deflate_of_zeros(count, chunk=1 << 24):
    """A raw deflate stream of `count` zero bytes, made without compressing them all: after a full
    flush the compressor starts afresh, so every whole chunk compresses to the same bytes."""
    whole, rest = divmod(count, chunk)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(bytes(chunk)) + compressor.flush(zlib.Z_FULL_FLUSH) if whole else b""
    return block * whole + compressor.compress(bytes(rest)) + compressor.flush(zlib.Z_FINISH)


def crc32_of_zeros(count):
    """zlib.crc32(bytes(count)) without the bytes: appending a zero bit is a linear map over GF(2),
    squared for each bit of `count` (zlib's crc32_combine)."""
    def times(matrix, vector):
        total, row = 0, 0
        while vector:
            if vector & 1:
                total ^= matrix[row]
            vector >>= 1
            row += 1
        return total

    def square(matrix):
        return [times(matrix, matrix[row]) for row in range(32)]

    operator = square(square(square([0xEDB88320] + [1 << row for row in range(31)])))  # one zero byte
    crc = 0xFFFFFFFF
    while count:
        if count & 1:
            crc = times(operator, crc)
        count >>= 1
        operator = square(operator)
    return crc ^ 0xFFFFFFFF


def zip_of_zeros(path, name, count, others):
    """A zip whose record `name` deflates `count` zero bytes (sizes and CRC true), then `others`
    (name -> bytes, stored), written by hand: zipfile would compress every byte."""
    records = [(name, 8, raw_deflate_of_zeros(count), count, crc32_of_zeros(count))]
    records += [(other, 0, data, len(data), zlib.crc32(data)) for other, data in others.items()]
    local, central = b"", b""
    for record_name, method, data, size, crc in records:
        encoded = record_name.encode()
        fields = struct.pack("<HHHHHIIIHH", 20, 0, method, 0, 0x21, crc, len(data), size, len(encoded), 0)
        central += (b"PK\x01\x02" + struct.pack("<H", 20) + fields + struct.pack("<HHHII", 0, 0, 0, 0, len(local)) +
                    encoded)
        local += b"PK\x03\x04" + fields + encoded + data
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, len(records), len(records), len(central), len(local), 0)
    with open(path, "wb") as f:
        f.write(local + central + end)


def torch_zip(path, pickle, storages=None):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("archive/data.pkl"), pickle)
        for key, data in (storages or {}).items():
            z.writestr("archive/data/" + key, data)
        z.writestr("archive/version", "3\n")


def png(path, width, height):
    """An 8-bit gray PNG of zeros (a bomb stays a small file, and is made in a moment)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    count = height * (width + 1)  # a filter byte, then the row
    adler = ((count % 65521) << 16) | 1  # zeros leave the first sum at 1 and add 1 to the second per byte
    body = b"\x78\xda" + raw_deflate_of_zeros(count) + struct.pack(">I", adler)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
                chunk(b"IDAT", body) + chunk(b"IEND", b""))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    def path(name):
        return os.path.join(out, name)

    meta = {"num_heads": str(HEADS)}
    good = tiny_vit()
    safetensors(os.path.join(out, "good.safetensors"), good, meta)

    # Images: pixels in the header far beyond what the file holds.
    png(path("bomb_20000x20000.png"), 20000, 20000)
    png(path("strip_100000x1.png"), 100000, 1)
    png(path("strip_1000000x1.png"), 1000000, 1)
    with open(path("text.png"), "w") as f:
        f.write("this is text\n" * 10)

    # Architecture from shapes: zero-byte tensors.
    def zero_size(name, key, shape):
        tensors = {k: v for k, v in good.items() if k != key}
        safetensors(path(name), tensors, meta, {key: shape})

    zero_size("fc1_5e7x0.safetensors", "blocks.0.mlp.fc1.weight", (50000000, 0))
    zero_size("fc1_3e9x0.safetensors", "blocks.0.mlp.fc1.weight", (3000000000, 0))
    zero_size("head_1e8x0.safetensors", "head.weight", (100000000, 0))
    zero_size("pos_embed_huge.safetensors", "pos_embed", (1, 1 + 40000 * 40000, 0))
    zero_size("patch_0.safetensors", "patch_embed.proj.weight", (DIM, 3, 0, 0))
    zero_size("width_0.safetensors", "patch_embed.proj.weight", (0, 3, PATCH, PATCH))

    # The same zero-byte sizes in every other family's file.
    for family, (build, hidden_key, head_key) in FAMILIES.items():
        tensors = build()
        safetensors(path(family + ".safetensors"), tensors)
        for name, key, size in (("hidden_5e7x0", hidden_key, 50000000), ("head_1e8x0", head_key, 100000000)):
            shape = (size, 0) + tuple(1 for _ in tensors[key].shape[2:])
            safetensors(path("%s_%s.safetensors" % (family, name)), {k: v for k, v in tensors.items() if k != key},
                        shapes={key: shape})

    # Deep nesting in a header and in metadata.
    deep = b"[" * 70000 + b"]" * 70000
    raw_safetensors(path("deep_shape.safetensors"),
                    b'{"w":{"dtype":"F32","shape":' + deep + b',"data_offsets":[0,0]}}')

    # NaN weights.
    nan = dict(good)
    nan["blocks.1.mlp.fc1.weight"] = good["blocks.1.mlp.fc1.weight"].copy()
    nan["blocks.1.mlp.fc1.weight"][2, 3] = np.nan
    safetensors(path("nan_weights.safetensors"), nan, meta)

    # Missing keys and unusable metadata.
    safetensors(path("missing_head_weight.safetensors"),
                {k: v for k, v in good.items() if k != "head.weight"}, meta)
    safetensors(path("missing_block_norm.safetensors"),
                {k: v for k, v in good.items() if k != "blocks.2.norm1.weight"}, meta)
    safetensors(path("num_heads_huge.safetensors"), good, {"num_heads": "99999999999"})
    even = dict(good)
    for i in range(DEPTH):
        even["blocks.%d.attn.dwc.weight" % i] = np.zeros((DIM // HEADS, 1, 4, 4), "<f4")
        even["blocks.%d.attn.dwc.bias" % i] = np.zeros((DIM // HEADS,), "<f4")
    safetensors(path("even_dwc_kernel.safetensors"), even, meta)

    # torch.save zips: pickles that amplify memory, storages beyond the file, damage.
    zip_of_zeros(path("pickle_inflates_to_2gb.pth"), "archive/data.pkl", 1 << 31, {"archive/version": b"3\n"})
    torch_zip(path("pickle_52mb.pth"), b"\x80\x02" + b"]" * (52 << 20) + b".")
    torch_zip(path("lists_10m_deep.pth"), b"\x80\x02" + b"]" * 10000000 + b"a" * 9999999 + b".")
    torch_zip(path("storage_4gb_in_6mb.pth"),
              pickle_state_dict([("w", "0", 6, 1000000000)]), {"0": b"\x00" * (6 << 20)})
    torch_zip(path("protocol0.pth"),
              b"(dp0\nVw\np1\nctorch._utils\n_rebuild_tensor_v2\n(P('storage', 'x')\nI0\n(I6\nt(I1\ntI00\n"
              b"ccollections\nOrderedDict\n(tRtRp2\ns.")
    with zipfile.ZipFile(path("no_version.pth"), "w") as z:
        z.writestr("archive/data.pkl", pickle_state_dict([("w", "0", 6, 6)]))
        z.writestr("archive/data/0", b"\x00" * 24)
    with zipfile.ZipFile(path("bad_version.pth"), "w") as z:
        z.writestr("archive/data.pkl", pickle_state_dict([("w", "0", 6, 6)]))
        z.writestr("archive/version", "abc\n")
    with open(path("empty_zip.pth"), "wb") as f:
        f.write(b"PK\x05\x06" + b"\x00" * 18)
    with open(os.path.join(out, "storage_4gb_in_6mb.pth"), "rb") as f:
        whole = f.read()
    with open(path("truncated_zip.pth"), "wb") as f:
        f.write(whole[: len(whole) - 100])
    with open(path("text_model.safetensors"), "w") as f:
        f.write("just some text, not weights\n" * 20)


if __name__ == "__main__":
    main()
