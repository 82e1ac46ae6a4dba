#!/usr/bin/python3
"""Generate attnscope's parity cases for CLIP's zero-shot scores and text-prompted maps (Chefer et al.'s CLIP
relevance, LeGrad, TextSpan): small random-weight CLIP models in OpenAI's and Hugging Face's layouts with a small
vocabulary of their own beside them, an image as a PNG, prompts, and the float64 references of
reference_clip_maps.py (written from the authors' code, independent of the C++ sources).

Usage: /usr/bin/python3 tests/python/make_clip_maps_cases.py OUTDIR

The models are built by make_clip_text_cases.py's builders (clip/model.py's module tree, fp16 as released) with
other sizes: a 96 px image of 16 px patches (a 6 x 6 grid) through 3 visual blocks, and a vocabulary of 576 ids:
the 512 byte symbols, the first 62 merges of OpenAI's bpe_simple_vocab_16e6.txt.gz and the start and end tokens
(written as vocab.json + merges.txt beside each model, which attnscope's tokenizer then reads). The prompts are
tokenized by reference_clip_tokenizer.py.

OUTDIR layout:
  openai/clip.pt, openai/clip_jit.pt  an OpenAI CLIP state_dict and its TorchScript archive (make_clip_text_cases)
  openai/vocab.json, merges.txt       the small vocabulary
  hf/                                 a Hugging Face CLIPModel folder of other weights (legacy config: argmax
                                      pooling), its preprocessor_config.json, vocab.json, merges.txt
  image.png                           96 x 96 RGB; image.npy [1, 3, 96, 96] float64: it normalised with CLIP's
                                      mean and std (the model's input: a 96 px image is neither resized nor cropped
                                      by CLIP's preprocessing)
  prompts.txt                         the prompts, one a line, with a blank line (ignored)
  <model>.ids.npy                     int64 [P, 77]
  <model>.text_embeddings.npy         [P, E]; <model>.image_embedding.npy [E]; logits.npy, probabilities.npy [P]
  <model>.chefer_raw.npy              [gh, gw]: prompt 0, start_layer -1; chefer_raw_all.npy: start_layer 0
  <model>.chefer_text.npy             [eot - 1]: the text side of prompt 0
  <model>.legrad_raw.npy              [gh, gw]; legrad_upsampled.npy [96, 96]: prompt 1
  <model>.textspan.npy                [P, gh, gw]; textspan_heat.npy: before the mean over prompts is taken
  cases.json                          {name, model, layout, prompts, ..., files, residual, magnitudes}
"""
import gzip
import json
import os
import struct
import sys
import time
import zlib

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch

import make_clip_text_cases as mct
import make_hub_cases as hub
import reference_clip_maps as rcm
import reference_clip_tokenizer as tok
import reference_hub_vit as ref
import safetensors_io
from fixture_tools import output_folder, write_cases

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED_VOCAB = os.path.join(HERE, "..", "..", "assets", "clip", "bpe_simple_vocab_16e6.txt.gz")
MERGES = 62
SIZES = dict(embed_dim=64, image_resolution=96, vision_layers=3, vision_width=128, vision_patch_size=16,
             context_length=77, vocab_size=512 + MERGES + 2, transformer_width=128, transformer_heads=2,
             transformer_layers=2)
PROMPTS = ["a photo of a sign", "the digit 4", "a purple R on the left", "red", "an empty white field"]


def small_tokenizer():
    """The byte symbols, the first MERGES merges of OpenAI's file and start/end: ids in OpenAI's order."""
    with gzip.open(BUNDLED_VOCAB) as f:
        lines = f.read().decode("utf-8").split("\n")
    merges = [tuple(line.split()) for line in lines[1:MERGES + 1]]
    order, char = tok.byte_alphabet()
    symbols = [char[b] for b in order]
    symbols = symbols + [s + "</w>" for s in symbols] + ["".join(m) for m in merges] + [tok.START, tok.END]
    return tok.Tokenizer({s: i for i, s in enumerate(symbols)}, merges, "small")


def write_png(path, rgb):
    """8-bit RGB PNG (filter 0 on every row)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def test_image(seed, size):
    """uint8 [H, W, 3] from a smooth random image, and its normalisation [1, 3, H, W] float64 (ToTensor, then
    Normalize with CLIP's mean and std)."""
    smooth = hub.smooth_image(seed, size, size)[0].permute(1, 2, 0).double()
    u8 = ((smooth - smooth.min()) / (smooth.max() - smooth.min()) * 255).round().clamp(0, 255).to(torch.uint8)
    unit = u8.double().permute(2, 0, 1)[None] / 255.0
    mean = torch.tensor(ref.CLIP_MEAN, dtype=torch.float64)[None, :, None, None]
    std = torch.tensor(ref.CLIP_STD, dtype=torch.float64)[None, :, None, None]
    return u8.numpy(), (unit - mean) / std


def build_models(out_dir):
    """The OpenAI state_dict and archive (seed 3601) and a Hugging Face folder of other weights (seed 3602)."""
    built = {}
    for name, seed in (("openai", 3601), ("hf_source", 3602)):
        folder = os.path.join(out_dir, name)
        os.makedirs(folder, exist_ok=True)
        mct.OPENAI = dict(mct.OPENAI, seed=seed, **SIZES)
        sd, _, _, _ = mct.build_openai(folder)
        built[name] = sd
    openai_dir = os.path.join(out_dir, "openai")
    os.replace(os.path.join(openai_dir, "openai_clip.pt"), os.path.join(openai_dir, "clip.pt"))
    os.replace(os.path.join(openai_dir, "openai_clip_jit.pt"), os.path.join(openai_dir, "clip_jit.pt"))
    source = built.pop("hf_source")
    for leftover in ("openai_clip.pt", "openai_clip_jit.pt"):
        os.remove(os.path.join(out_dir, "hf_source", leftover))
    os.rmdir(os.path.join(out_dir, "hf_source"))
    hf_dir = os.path.join(out_dir, "hf")
    config = mct.legacy_config(source)
    hsd = mct.write_folder(hf_dir, mct.hf_from_openai(source), config,
                           mct.clip_preprocessor(SIZES["image_resolution"], True))
    return built["openai"], (hsd, config)


def save(out_dir, name, tensor):
    np.save(os.path.join(out_dir, name), np.ascontiguousarray(tensor.detach().numpy()))
    return name


def reference_case(out_dir, prefix, V, T, image, ids):
    files = {"ids": save(out_dir, prefix + ".ids.npy", ids)}
    with torch.no_grad():
        image_embedding, _ = rcm.encode_image(V, image)
        text, _ = rcm.encode_text(T, ids)
        logits = rcm.logits_per_image(image_embedding, text, T["logit_scale"])[0]
    files["image_embedding"] = save(out_dir, prefix + ".image_embedding.npy", image_embedding[0])
    files["text_embeddings"] = save(out_dir, prefix + ".text_embeddings.npy", text)
    files["logits"] = save(out_dir, prefix + ".logits.npy", logits)
    files["probabilities"] = save(out_dir, prefix + ".probabilities.npy", logits.softmax(0))

    raw, text_scores, logit = rcm.chefer_clip(V, T, image, ids[0:1])
    raw_all, _, _ = rcm.chefer_clip(V, T, image, ids[0:1], start_layer=0)
    assert abs(logit - float(logits[0])) < 1e-9
    assert (raw_all - raw).abs().max() > 1e-3 * raw.abs().max(), "start_layer 0 must differ from the last block"
    files["chefer_raw"] = save(out_dir, prefix + ".chefer_raw.npy", raw)
    files["chefer_raw_all"] = save(out_dir, prefix + ".chefer_raw_all.npy", raw_all)
    files["chefer_text"] = save(out_dir, prefix + ".chefer_text.npy", text_scores)

    direction = text[1:2] / text[1:2].norm(dim=-1, keepdim=True)
    legrad_raw, legrad_up, sims = rcm.legrad_clip(V, direction, image)
    files["legrad_raw"] = save(out_dir, prefix + ".legrad_raw.npy", legrad_raw)
    files["legrad_upsampled"] = save(out_dir, prefix + ".legrad_upsampled.npy", legrad_up)

    maps, heat, residual = rcm.textspan(V, image, text)
    files["textspan"] = save(out_dir, prefix + ".textspan.npy", maps)
    files["textspan_heat"] = save(out_dir, prefix + ".textspan_heat.npy", heat)
    assert residual < 1e-9 * float(image_embedding.abs().max()), residual
    for label, value in (("chefer", raw), ("chefer all", raw_all), ("legrad", legrad_raw), ("textspan", maps)):
        assert torch.isfinite(value).all() and value.abs().max() > 0, label
    print(f"{prefix}: logits [{float(logits.min()):+.2f}, {float(logits.max()):+.2f}], chefer max "
          f"{float(raw.max()):.2e} (all blocks {float(raw_all.max()):.2e}), legrad cosines "
          f"{[round(s, 3) for s in sims]}, textspan |heat| {float(heat.abs().max()):.2e}, residual {residual:.1e}")
    return files, residual


def main(argv):
    out_dir = output_folder(argv, "usage: make_clip_maps_cases.py OUTDIR", threads=1)
    if out_dir is None:
        return 2
    t0 = time.time()
    tokenizer = small_tokenizer()
    sd, (hsd, config) = build_models(out_dir)
    for folder in ("openai", "hf"):
        tokenizer.save_hf_files(os.path.join(out_dir, folder, "vocab.json"),
                                os.path.join(out_dir, folder, "merges.txt"))
    u8, image = test_image(3603, SIZES["image_resolution"])
    write_png(os.path.join(out_dir, "image.png"), u8)
    np.save(os.path.join(out_dir, "image.npy"), image.numpy())
    with open(os.path.join(out_dir, "prompts.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(PROMPTS[:2]) + "\n\n" + "\n".join(PROMPTS[2:]) + "\n")
    ids = torch.tensor(tokenizer.tokenize(PROMPTS), dtype=torch.int64)
    assert int(ids.max()) == SIZES["vocab_size"] - 1

    cases = []
    common = dict(prompts=PROMPTS, image="image.png", image_array="image.npy", prompts_file="prompts.txt",
                  prompt_lines=[1, 2, 4, 5, 6], grid=[6, 6], patch=16, vision_layers=SIZES["vision_layers"],
                  vision_width=SIZES["vision_width"], vision_heads=SIZES["vision_width"] // 64,
                  text_layers=SIZES["transformer_layers"], text_width=SIZES["transformer_width"],
                  embed_dim=SIZES["embed_dim"], context_length=77)
    V, T = rcm.openai_params(sd)
    files, residual = reference_case(out_dir, "openai", V, T, image, ids)
    cases.append(dict(common, name="openai_pt", model="openai/clip.pt", layout="openai-clip", files=files,
                      residual=residual))
    cases.append(dict(common, name="openai_jit", model="openai/clip_jit.pt", layout="openai-clip", files=files,
                      residual=residual))
    V, T = rcm.hf_params({k: v for k, v in hsd.items()}, config)
    files, residual = reference_case(out_dir, "hf", V, T, image, ids)
    cases.append(dict(common, name="hf", model="hf", layout="hf-clip", files=files, residual=residual))
    # The HF folder's weights are not the OpenAI ones: the two layouts are checked apart.
    openai_map = np.load(os.path.join(out_dir, "openai.chefer_raw.npy"))
    hf_map = np.load(os.path.join(out_dir, "hf.chefer_raw.npy"))
    assert np.abs(openai_map - hf_map).max() > 1e-3 * np.abs(hf_map).max()
    assert safetensors_io is not None
    return write_cases(out_dir, cases, t0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
