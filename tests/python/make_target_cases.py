#!/usr/bin/python3
"""Generate attnscope's `--target` parity cases: Grad-CAM of a random-weight CLIP with a text target and with an
image target, in OpenAI's and Hugging Face's layouts, in float64 from the authors' semantics.

Usage: /usr/bin/python3 tests/python/make_target_cases.py OUTDIR

Independent of the C++ sources. Written from:
  * jacobgil/pytorch-grad-cam: BaseCAM.forward (the loss is the sum of target(output) over the batch, one backward;
    activations and gradients at the target layer, reshape_transform drops the class token and lays the patch
    tokens out on the grid), GradCAM.get_cam_weights (the gradients' mean over the grid), get_cam_image
    (ReLU of the weighted sum of the activations), scale_cam_image ((x - min) / (1e-7 + max)); the targets of its
    CLIP and embedding tutorials: ClipOutputTarget(category) = model_output[category] on a model returning
    logits_per_image, and SimilarityToConceptTarget(features) = torch.nn.CosineSimilarity(dim=0)(output, features)
    on a model returning the embedding;
  * openai/CLIP clip/model.py (CLIP.forward's logits_per_image = logit_scale.exp() * normalised image @ normalised
    text.T) and clip.tokenize, through reference_clip.py and reference_clip_tokenizer.py.
The hooked layer is the last block's ln_1 (attnscope's default blocks.-1.norm1), computed by a block written here
from clip/model.py's ResidualAttentionBlock, swapped in for reference_hub_vit's pre-norm block so that the forward
passes themselves are reference_clip's.

OUTDIR layout:
  openai_clip.pt     a full OpenAI state_dict (fp16 as convert_weights leaves it) with the real vocabulary size
                     (49,408 ids: the prompt is tokenized with the bundled bpe_simple_vocab_16e6.txt.gz)
  hf_clip/           a Hugging Face CLIPModel folder of the same weights (float32), with its own vocab.json and
                     merges.txt: the first 300 merges of OpenAI's file, so 814 ids; the token embedding keeps the
                     rows of those symbols
  image.png, other.png   96 x 96 RGB images at the models' input size (CLIP's preprocessing keeps them whole)
  <case>.cam.npy     float64 [gh, gw]: ReLU(sum_c w_c A_c) before scaling
  <case>.scaled.npy  float64 [gh, gw]: scale_cam_image of it
  <case>.direction.npy  float64 [E]: the normalised text (or other image's) embedding
  cases.json         list of {name, model, layout, target, prompt?, prompt_tokens?, score, logit_scale?, files}
"""

import json
import math
import os
import sys
import time
from collections import OrderedDict

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch

import make_clip_text_cases as text_cases
import make_hub_cases as hub
import reference_clip as rc
import reference_clip_tokenizer as rt
import reference_hub_vit as ref
from fixture_tools import Init, output_folder, replaced, write_cases

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED_VOCAB = os.path.join(HERE, "..", "..", "assets", "clip", "bpe_simple_vocab_16e6.txt.gz")
SIZE = dict(seed=3501, embed_dim=32, image_resolution=96, vision_layers=2, vision_width=128, vision_patch_size=16,
            context_length=77, vocab_size=49408, transformer_width=64, transformer_heads=1, transformer_layers=1,
            logit_scale=math.log(1 / 0.07))
HF_MERGES = 300
PROMPT = "a photo of a Dog, on the grass!"


@torch.no_grad()
def build_openai(out_dir):
    c = SIZE
    r = Init(c["seed"])
    model = hub.CLIP(c["embed_dim"], c["image_resolution"], c["vision_layers"], c["vision_width"],
                     c["vision_patch_size"], c["context_length"], c["vocab_size"], c["transformer_width"],
                     c["transformer_heads"], c["transformer_layers"])
    hub.randomize(model, r)
    v, W, M = model.visual, c["vision_width"], c["image_resolution"] // c["vision_patch_size"]
    v.class_embedding.copy_(r.normal([W], 0.5))
    v.positional_embedding.copy_(hub.position_values(r, 1, M, W))
    v.proj.copy_(r.normal([W, c["embed_dim"]], 1.0 / math.sqrt(W)))
    model.token_embedding.weight.copy_(r.normal(model.token_embedding.weight.shape, 0.5))
    model.positional_embedding.copy_(r.normal(model.positional_embedding.shape, 0.3))
    model.text_projection.copy_(r.normal(model.text_projection.shape, c["transformer_width"] ** -0.5))
    model.logit_scale.fill_(c["logit_scale"])
    for name, value in (("input_resolution", c["image_resolution"]), ("context_length", c["context_length"]),
                        ("vocab_size", c["vocab_size"])):
        if hasattr(model, name):
            delattr(model, name)
        model.register_buffer(name, torch.tensor(value, dtype=torch.int64))
    hub.convert_weights(model)
    sd = model.state_dict()
    torch.save(sd, os.path.join(out_dir, "openai_clip.pt"))
    return torch.load(os.path.join(out_dir, "openai_clip.pt"), map_location="cpu")


def truncated_tokenizer(full, merges):
    """OpenAI's tokenizer with its first `merges` merges: the byte symbols, their </w> forms, the merged symbols,
    start and end of text, numbered in that order (as from_openai_gz numbers the whole file)."""
    pairs = sorted(full.ranks, key=full.ranks.get)[:merges]
    order, char = rt.byte_alphabet()
    symbols = [char[b] for b in order]
    symbols = symbols + [s + "</w>" for s in symbols] + ["".join(m) for m in pairs] + [rt.START, rt.END]
    return rt.Tokenizer({s: i for i, s in enumerate(symbols)}, pairs, "hf")


def hf_folder(out_dir, sd, full, small):
    """The OpenAI weights as a CLIPModel folder, the token embedding's rows those of the small vocabulary's symbols."""
    c = SIZE
    folder = os.path.join(out_dir, "hf_clip")
    tensors = text_cases.hf_from_openai(sd)
    rows = torch.tensor([full.encoder[s] for s, _ in sorted(small.encoder.items(), key=lambda item: item[1])])
    tensors["text_model.embeddings.token_embedding.weight"] = \
        tensors["text_model.embeddings.token_embedding.weight"][rows].contiguous()
    W, V = c["transformer_width"], c["vision_width"]
    text = OrderedDict([("vocab_size", len(small.encoder)), ("hidden_size", W), ("intermediate_size", 4 * W),
                        ("num_hidden_layers", c["transformer_layers"]), ("num_attention_heads", W // 64),
                        ("max_position_embeddings", c["context_length"]), ("hidden_act", "quick_gelu"),
                        ("layer_norm_eps", 1e-5), ("bos_token_id", small.encoder[rt.START]),
                        ("eos_token_id", small.encoder[rt.END]), ("pad_token_id", 1)])
    vision = OrderedDict([("hidden_size", V), ("intermediate_size", 4 * V), ("num_hidden_layers", c["vision_layers"]),
                          ("num_attention_heads", V // 64), ("image_size", c["image_resolution"]),
                          ("patch_size", c["vision_patch_size"]), ("hidden_act", "quick_gelu"),
                          ("layer_norm_eps", 1e-5)])
    config = OrderedDict([("architectures", ["CLIPModel"]), ("model_type", "clip"), ("projection_dim", c["embed_dim"]),
                          ("logit_scale_init_value", 2.6592), ("text_config", text), ("vision_config", vision),
                          ("torch_dtype", "float32"), ("transformers_version", "4.40.0")])
    hsd = text_cases.write_folder(folder, tensors, config, text_cases.clip_preprocessor(c["image_resolution"], True))
    small.save_hf_files(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"))
    check = rt.Tokenizer.from_hf_files(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"))
    assert check.tokenize([PROMPT]) == small.tokenize([PROMPT])
    return hsd, config


class LayerHook:
    """clip/model.py's ResidualAttentionBlock (x + attn(ln_1(x)); x + mlp(ln_2(x))), keeping ln_1's output of block
    `layer` as a leaf that requires grad: what pytorch-grad-cam's hook on resblocks[layer].ln_1 sees."""

    def __init__(self, layer):
        self.layer, self.calls, self.activation = layer, 0, None

    def __call__(self, x, p, heads, eps, act):
        h = ref.layer_norm(x, p["ln1_w"], p["ln1_b"], eps)
        if self.calls == self.layer:
            h = h.detach().requires_grad_(True)
            self.activation = h
        self.calls += 1
        a, probs = ref.attention(h, p["q_w"], p["q_b"], p["k_w"], p["k_b"], p["v_w"], p["v_b"], p["o_w"], p["o_b"],
                                 heads)
        x = x + a
        m = ref.linear(act(ref.linear(ref.layer_norm(x, p["ln2_w"], p["ln2_b"], eps), p["fc1_w"], p["fc1_b"])),
                       p["fc2_w"], p["fc2_b"])
        return x + m, probs


def grad_cam(encode_image, image, target, layer, grid):
    """pytorch-grad-cam's GradCAM on the embedding model: target(embedding[0]) differentiated at the hooked ln_1."""
    hook = LayerHook(layer)
    with replaced(ref, "pre_norm_block", hook):
        embedding = encode_image(image)
    score = target(embedding[0])
    (gradient,) = torch.autograd.grad(score, hook.activation)
    gh, gw = grid
    A = hook.activation[0, 1:].detach().T.reshape(-1, gh, gw)  # reshape_transform: no class token, channels first
    G = gradient[0, 1:].T.reshape(-1, gh, gw)
    weights = G.mean(dim=(1, 2))
    cam = (weights[:, None, None] * A).sum(0)
    relu = cam.clamp_min(0)
    scaled = relu - relu.min()
    scaled = scaled / (1e-7 + scaled.max())
    return score.item(), cam, scaled, embedding[0].detach()


class ClipOutputTarget:
    """pytorch-grad-cam's CLIP tutorial target on a model returning logits_per_image: model_output[category]."""

    def __init__(self, text_embedding, logit_scale):
        self.text, self.scale = text_embedding, logit_scale

    def __call__(self, image_embedding):
        return rc.logits_per_image(image_embedding[None], self.text[None], torch.tensor(self.scale).log())[0, 0]


class SimilarityToConceptTarget:
    """pytorch-grad-cam's embedding tutorial target: CosineSimilarity(dim=0)(model_output, features)."""

    def __init__(self, features):
        self.features = features

    def __call__(self, model_output):
        return torch.nn.CosineSimilarity(dim=0)(model_output, self.features)


def png(out_dir, name, seed):
    from PIL import Image

    pixels = hub.png_pixels(seed, SIZE["image_resolution"], SIZE["image_resolution"])
    Image.fromarray(pixels, mode="RGB").save(os.path.join(out_dir, name), format="PNG")
    x = torch.from_numpy(pixels).to(torch.float64).permute(2, 0, 1)[None] / 255.0
    mean = torch.tensor(ref.CLIP_MEAN, dtype=torch.float64).view(1, 3, 1, 1)
    std = torch.tensor(ref.CLIP_STD, dtype=torch.float64).view(1, 3, 1, 1)
    return (x - mean) / std


def save(out_dir, name, tensor):
    np.save(os.path.join(out_dir, name), np.ascontiguousarray(tensor.detach().numpy()))
    return name


def main(argv):
    out_dir = output_folder(argv, "usage: make_target_cases.py OUTDIR", threads=1)
    if out_dir is None:
        return 2
    t0 = time.time()
    full = rt.Tokenizer.from_openai_gz(BUNDLED_VOCAB)
    small = truncated_tokenizer(full, HF_MERGES)
    sd = build_openai(out_dir)
    hsd, config = hf_folder(out_dir, sd, full, small)
    image = png(out_dir, "image.png", 3502)
    other = png(out_dir, "other.png", 3503)
    grid = (SIZE["image_resolution"] // SIZE["vision_patch_size"],) * 2
    last = SIZE["vision_layers"] - 1
    scale = math.exp(float(sd["logit_scale"]))
    models = {
        "openai": dict(model="openai_clip.pt", layout="openai-clip", tokenizer=full,
                       encode_image=lambda x: rc.openai_encode_image(sd, x),
                       encode_text=lambda ids: rc.openai_encode_text(sd, ids)),
        "hf": dict(model="hf_clip", layout="hf-clip", tokenizer=small,
                   encode_image=lambda x: rc.hf_encode_image(hsd, config, x),
                   encode_text=lambda ids: rc.hf_encode_text(hsd, config, ids)),
    }
    cases = []
    for key, m in models.items():
        ids = torch.tensor(m["tokenizer"].tokenize([PROMPT]), dtype=torch.int64)
        tokens = int((ids != 0).sum())
        with torch.no_grad():
            text = m["encode_text"](ids)[0]
            other_embedding = m["encode_image"](other)[0]
        for kind in ("text", "image"):
            if kind == "text":
                target, direction = ClipOutputTarget(text, scale), text / text.norm()
            else:
                target, direction = SimilarityToConceptTarget(other_embedding), other_embedding / other_embedding.norm()
            score, cam, scaled, embedding = grad_cam(m["encode_image"], image, target, last, grid)
            name = f"{key}_{kind}"
            # The target as written out must be what the score is: scale * cos, or the plain cosine.
            cosine = float(embedding @ direction / embedding.norm())
            assert abs(score - (scale if kind == "text" else 1.0) * cosine) < 1e-9, (name, score, cosine)
            assert (scaled > 0.05).sum() >= 3 and float(cam.abs().max()) > 1e-6, (name, scaled)
            case = OrderedDict([("name", name), ("model", m["model"]), ("layout", m["layout"]), ("target", kind),
                                ("spec", f"text:{PROMPT}" if kind == "text" else "image:other.png"),
                                ("score", score), ("grid", list(grid)), ("layer", f"blocks.{last}.norm1"),
                                ("cam_abs_max", float(cam.abs().max())),
                                ("files", {"cam": save(out_dir, name + ".cam.npy", cam),
                                           "scaled": save(out_dir, name + ".scaled.npy", scaled),
                                           "direction": save(out_dir, name + ".direction.npy", direction)})])
            if kind == "text":
                case.update(prompt=PROMPT, prompt_tokens=tokens, logit_scale=scale)
            cases.append(case)
            print(f"{name:12s} score {score:+.4f} tokens {tokens:2d} cam max {float(cam.abs().max()):.3e} "
                  f"scaled>0.05 {int((scaled > 0.05).sum())}/{scaled.numel()}")
    save(out_dir, "image.npy", image.to(torch.float32))
    # The prompt that does not fit: 76 words of one token each, 78 tokens with start and end.
    long_prompt = " ".join(["dog"] * 76)
    assert len(full.encode(long_prompt)) == 76
    with open(os.path.join(out_dir, "long_prompt.txt"), "w") as f:
        f.write(long_prompt)
    with open(os.path.join(out_dir, "not_an_image.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + b"truncated")
    return write_cases(out_dir, cases, t0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
