#!/usr/bin/python3
"""Generate attnscope's CLIP text-tower and zero-shot parity cases: small random-weight CLIP models in the three
layouts researchers have, token ids, images, and the float64 reference outputs (reference_clip.py).

Usage: /usr/bin/python3 tests/python/make_clip_text_cases.py OUTDIR

Independent of the C++ sources: the reference is written from openai/CLIP clip/model.py and transformers'
modeling_clip.py (see reference_clip.py). The OpenAI files are written by the module tree of make_hub_cases.py
(which mirrors clip/model.py's classes, so keys and dtypes are what `model.state_dict()` gives after
clip.model.convert_weights); a float32 forward of that tree with nn.MultiheadAttention and the causal attn_mask
(clip/model.py's own code path) is a second, differently written computation every OpenAI reference is checked
against. The Hugging Face legacy folder holds the OpenAI model's weights renamed as transformers'
convert_clip_original_pytorch_to_hf.py renames them, so its reference (the Hugging Face code path) must equal the
OpenAI one. Every case also shows that plausible wrong readings (no causal mask, the other pooling rule, the other
activation, text_config instead of text_config_dict, antialiased position resizing) change the outputs. Token ids
use a small vocabulary (512 or 1000 ids) so the files stay small; as in OpenAI's tokenizer, end of text is the
largest id (vocab - 1) and start of text the one before, rows zero-padded (clip.tokenize's layout).

OUTDIR layout:
  openai_clip.pt         torch.save of a full OpenAI CLIP state_dict: fp16 conv/linear/in_proj/text_projection/proj
                         (convert_weights), fp32 embeddings, norms and logit_scale, and the 0-d int64
                         input_resolution, context_length, vocab_size the released archives carry
  openai_clip_jit.pt     a TorchScript archive of the same CLIP, traced forward(image, text) -> logits_per_image,
                         its parameters then converted to fp16 as convert_weights does (OpenAI's released archives
                         are fp16); its forward is never run by attnscope
  hf_clip_legacy/        a Hugging Face CLIPModel folder of the same weights: model.safetensors (float32), config.json
                         with a legacy text_config_dict (eos_token_id 2: argmax pooling; it replaces a text_config
                         whose hidden_act is wrong, as CLIPConfig does) and vision_config, preprocessor_config.json
  hf_clip/               a Hugging Face CLIPModel of its own weights: float16 safetensors, text width 96 with 4 heads
                         (not width / 64), MLP 256, context 64, vocabulary 1000, eos_token_id 998 (first-eos pooling;
                         some prompts hold id 999, an added token, before their end of text, so the argmax would read
                         the wrong row), gelu, LayerNorm eps 1e-6; vision width 80 with 5 heads, 48 px, patch 16
  <model>.ids.npy             int64 [P, L]: token ids (L = the model's context length)
  <model>.image.npy           float32 [1, 3, H, W]: a normalised image at the native size
  <model>.image_other.npy     float32 [1, 3, H', W']: Hugging Face cases: another size (interpolate_pos_encoding)
  <model>.text_embeddings.npy float64 [P, E]: encode_text / get_text_features (before normalisation)
  <model>.image_embedding.npy float64 [E]: encode_image / get_image_features of image.npy
  <model>.image_embedding_other.npy  float64 [E] of image_other.npy (Hugging Face cases)
  <model>.logits.npy          float64 [P]: logits_per_image of the image and each prompt
  <model>.probabilities.npy   float64 [P]: their softmax over the prompts
  <model>.pooled.npy          int64 [P]: the position each prompt's embedding is read at
  openai.attention.npy        float64 [layers, h, L, L]: the text tower's attention of prompt `grad_prompt`
  openai.attention_grad.npy   float64 [layers, h, L, L]: d logits[grad_prompt] / d attention of that prompt, the
                              image embedding held fixed (what Chefer et al.'s text-side relevance reads)
  cases.json             list of {name, model, layout, format, float16, prompts, context_length, vocab_size, width,
                         layers, heads, mlp_hidden, embed_dim, end_of_text_id, pooling, logit_scale, image_size,
                         files: {...}}; openai_pt and openai_jit share their reference files
"""

import copy
import json
import math
import os
import sys
import time
import warnings
from collections import OrderedDict

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch

import make_hub_cases as hub
import reference_clip as rc
import reference_hub_vit as ref
import safetensors_io
from fixture_tools import Init, output_folder, replaced, write_cases

OPENAI = dict(seed=3401, embed_dim=64, image_resolution=64, vision_layers=2, vision_width=128, vision_patch_size=16,
              context_length=77, vocab_size=512, transformer_width=128, transformer_heads=2, transformer_layers=3,
              logit_scale=math.log(1 / 0.07))
HF = dict(seed=3402, vocab=1000, context=64, text_width=96, text_heads=4, text_layers=2, text_mlp=256, eos=998,
          bos=997, added=999, vision_width=80, vision_heads=5, vision_layers=2, vision_mlp=200, patch=16, image=48,
          projection=48, eps=1e-6, act="gelu", logit_scale=3.2)
PROMPT_LENGTHS = [0, 5, 20, 75, 10, 2]  # tokens between start and end of text; 75 fills the 77 positions
GRAD_PROMPT = 2


# --------------------------------------------------------------------------------------------
# Token ids as clip.tokenize lays them out
# --------------------------------------------------------------------------------------------
def token_rows(r, vocab, context, lengths, bos, eot, added=None, pad=0):
    """[P, context] int64: bos, random ordinary ids, eot, then `pad`; with `added`, rows 1 and 4 hold it
    once before their end of text (an id larger than eot)."""
    rows = []
    for i, n in enumerate(lengths):
        n = min(n, context - 2)
        ordinary = (r.uniform([n], 1, bos - 1)).floor().long() if n else torch.zeros(0, dtype=torch.long)
        if added is not None and i in (1, 4) and n:
            ordinary[n // 2] = added
        row = torch.cat([torch.tensor([bos]), ordinary, torch.tensor([eot])])
        rows.append(torch.cat([row, torch.full((context - row.numel(),), pad, dtype=torch.long)]))
    return torch.stack(rows)


# --------------------------------------------------------------------------------------------
# OpenAI CLIP: make_hub_cases.py's mirror of clip/model.py with its forward (image, text)
# --------------------------------------------------------------------------------------------
class ClipWithForward(hub.CLIP):
    """clip/model.py's CLIP: encode_text with build_attention_mask and nn.MultiheadAttention (float32 mirror)."""

    def build_attention_mask(self):
        context_length = self.positional_embedding.shape[0]
        return torch.empty(context_length, context_length).fill_(float("-inf")).triu_(1)

    def encode_image(self, image):
        return self.visual(image)[0]

    def encode_text(self, text):
        x = self.token_embedding(text) + self.positional_embedding
        mask = self.build_attention_mask()
        x = x.permute(1, 0, 2)
        for blk in self.transformer.resblocks:
            h = blk.ln_1(x)
            x = x + blk.attn(h, h, h, need_weights=False, attn_mask=mask)[0]
            x = x + blk.mlp(blk.ln_2(x))
        x = self.ln_final(x.permute(1, 0, 2))
        return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

    def forward(self, image, text):
        image_features = self.encode_image(image)
        text_features = self.encode_text(text)
        image_features = image_features / image_features.norm(dim=-1, keepdim=True)
        text_features = text_features / text_features.norm(dim=-1, keepdim=True)
        return self.logit_scale.exp() * image_features @ text_features.t()


@torch.no_grad()
def build_openai(out_dir):
    c = OPENAI
    r = Init(c["seed"])
    model = ClipWithForward(c["embed_dim"], c["image_resolution"], c["vision_layers"], c["vision_width"],
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
            delattr(model, name)  # a plain attribute of the mirror; the archives hold a 0-d tensor
        model.register_buffer(name, torch.tensor(value, dtype=torch.int64))
    eager32 = copy.deepcopy(model).float().eval()  # before the fp16 rounding: only for tracing's graph
    hub.convert_weights(model)  # as clip.model.build_model leaves a loaded model
    sd = model.state_dict()
    assert sd["transformer.resblocks.0.attn.in_proj_weight"].dtype == torch.float16
    assert sd["token_embedding.weight"].dtype == torch.float32 and sd["logit_scale"].dtype == torch.float32
    torch.save(sd, os.path.join(out_dir, "openai_clip.pt"))
    loaded = torch.load(os.path.join(out_dir, "openai_clip.pt"), map_location="cpu")
    assert list(loaded) == list(sd) and all(torch.equal(loaded[k], sd[k]) for k in sd)

    # The released archives: a traced CLIP whose parameters are fp16. Tracing fp16 convolutions is not
    # possible on the CPU, so the float32 tree is traced and its parameters converted afterwards (the
    # graph is never run again).
    image = hub.smooth_image(c["seed"] + 1, c["image_resolution"], c["image_resolution"])
    ids = token_rows(r, c["vocab_size"], c["context_length"], PROMPT_LENGTHS, c["vocab_size"] - 2,
                     c["vocab_size"] - 1)
    eager32.load_state_dict({k: t.float() if t.is_floating_point() else t for k, t in sd.items()})
    with warnings.catch_warnings():  # the mirror's Python-level shape checks become constants: intended
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(eager32, (image, ids), check_trace=False)
    for name, parameter in traced.named_parameters():
        if sd[name].dtype == torch.float16:
            parameter.data = parameter.data.half()
    path_jit = os.path.join(out_dir, "openai_clip_jit.pt")
    torch.jit.save(traced, path_jit)
    archive = torch.jit.load(path_jit, map_location="cpu").state_dict()
    assert set(archive) == set(sd), sorted(set(archive) ^ set(sd))
    for k in sd:
        assert archive[k].dtype == sd[k].dtype and torch.equal(archive[k], sd[k]), k

    # The float32 mirror (clip/model.py's own code path) on the fp16-rounded weights.
    mirror = copy.deepcopy(model).float().eval()
    return loaded, mirror, ids, image


def wrong_openai_text(sd, ids):
    """Plausible misreadings of encode_text that the fixture must tell apart from it."""
    out = {}
    with replaced(rc, "causal_mask", lambda L: torch.zeros(L, L, dtype=torch.float64)):
        out["no causal mask"] = rc.openai_encode_text(sd, ids)
    with replaced(ref, "quick_gelu", ref.gelu_erf):
        out["gelu instead of QuickGELU"] = rc.openai_encode_text(sd, ids)
    out["the last position"] = rc.openai_encode_text(sd, ids, positions=torch.full((ids.shape[0],), ids.shape[1] - 1))
    return out


# --------------------------------------------------------------------------------------------
# Hugging Face CLIPModel folders
# --------------------------------------------------------------------------------------------
def hf_from_openai(sd):
    """transformers' convert_clip_original_pytorch_to_hf.py mapping: OpenAI keys -> CLIPModel keys (float32)."""
    f = lambda k: sd[k].float()  # noqa: E731
    out = OrderedDict()

    def block(prefix, src, layers):
        for i in range(layers):
            s, d = f"{src}{i}.", f"{prefix}encoder.layers.{i}."
            w, b = f(s + "attn.in_proj_weight"), f(s + "attn.in_proj_bias")
            C = w.shape[1]
            for j, name in enumerate(("q_proj", "k_proj", "v_proj")):
                out[d + f"self_attn.{name}.weight"] = w[j * C:(j + 1) * C].clone()
                out[d + f"self_attn.{name}.bias"] = b[j * C:(j + 1) * C].clone()
            for a, bname in (("attn.out_proj", "self_attn.out_proj"), ("ln_1", "layer_norm1"), ("ln_2", "layer_norm2"),
                             ("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")):
                out[d + bname + ".weight"] = f(s + a + ".weight")
                out[d + bname + ".bias"] = f(s + a + ".bias")

    out["text_model.embeddings.token_embedding.weight"] = f("token_embedding.weight")
    out["text_model.embeddings.position_embedding.weight"] = f("positional_embedding")
    block("text_model.", "transformer.resblocks.", rc.openai_text_layers(sd))
    out["text_model.final_layer_norm.weight"] = f("ln_final.weight")
    out["text_model.final_layer_norm.bias"] = f("ln_final.bias")
    out["text_projection.weight"] = f("text_projection").T.contiguous()
    out["logit_scale"] = f("logit_scale")
    out["vision_model.embeddings.class_embedding"] = f("visual.class_embedding")
    out["vision_model.embeddings.patch_embedding.weight"] = f("visual.conv1.weight")
    out["vision_model.embeddings.position_embedding.weight"] = f("visual.positional_embedding")
    out["vision_model.pre_layrnorm.weight"] = f("visual.ln_pre.weight")
    out["vision_model.pre_layrnorm.bias"] = f("visual.ln_pre.bias")
    block("vision_model.", "visual.transformer.resblocks.",
          ref._count_layers(sd, "visual.transformer.resblocks.", ".attn.in_proj_weight"))
    out["vision_model.post_layernorm.weight"] = f("visual.ln_post.weight")
    out["vision_model.post_layernorm.bias"] = f("visual.ln_post.bias")
    out["visual_projection.weight"] = f("visual.proj").T.contiguous()
    return out


def clip_preprocessor(size, new_style):
    """CLIPImageProcessor's file: resize the short side (bicubic), centre crop, OpenAI's mean and std."""
    p = OrderedDict([("crop_size", {"height": size, "width": size} if new_style else size), ("do_center_crop", True),
                     ("do_normalize", True), ("do_resize", True),
                     ("image_mean", list(ref.CLIP_MEAN)), ("image_std", list(ref.CLIP_STD)), ("resample", 3),
                     ("size", {"shortest_edge": size} if new_style else size)])
    p["image_processor_type" if new_style else "feature_extractor_type"] = \
        "CLIPImageProcessor" if new_style else "CLIPFeatureExtractor"
    return p


def write_folder(folder, tensors, config, preprocessor, dtype=None):
    os.makedirs(folder, exist_ok=True)
    safetensors_io.save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"},
                             dtype=dtype)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(folder, "preprocessor_config.json"), "w") as f:
        json.dump(preprocessor, f, indent=2)
    return safetensors_io.load_file(os.path.join(folder, "model.safetensors"))


def legacy_config(sd):
    c = OPENAI
    W = c["transformer_width"]
    text = OrderedDict([("vocab_size", c["vocab_size"]), ("hidden_size", W), ("intermediate_size", 4 * W),
                        ("num_hidden_layers", c["transformer_layers"]), ("num_attention_heads", W // 64),
                        ("max_position_embeddings", c["context_length"]), ("hidden_act", "quick_gelu"),
                        ("layer_norm_eps", 1e-5), ("bos_token_id", 0), ("eos_token_id", 2), ("pad_token_id", 1)])
    stale = OrderedDict(text)
    stale["hidden_act"] = "gelu"  # CLIPConfig lets text_config_dict replace it
    V = c["vision_width"]
    vision = OrderedDict([("hidden_size", V), ("intermediate_size", 4 * V), ("num_hidden_layers", c["vision_layers"]),
                          ("num_attention_heads", V // 64), ("image_size", c["image_resolution"]),
                          ("patch_size", c["vision_patch_size"]), ("hidden_act", "quick_gelu"),
                          ("layer_norm_eps", 1e-5)])
    return OrderedDict([("architectures", ["CLIPModel"]), ("model_type", "clip"), ("projection_dim", c["embed_dim"]),
                        ("logit_scale_init_value", 2.6592), ("text_config", stale), ("text_config_dict", text),
                        ("vision_config", vision), ("vision_config_dict", None), ("torch_dtype", "float32"),
                        ("transformers_version", "4.30.0")])


@torch.no_grad()
def hf_native_weights(r):
    """A CLIPModel state dict of its own random weights (roles scaled as make_hub_cases.randomize scales them)."""
    h = HF
    out = OrderedDict()

    def linear(name, fan_out, fan_in, gain, bias=True):
        out[name + ".weight"] = r.normal([fan_out, fan_in], gain / math.sqrt(fan_in))
        if bias:
            out[name + ".bias"] = r.normal([fan_out], 0.02)

    def norm(name, width):
        out[name + ".weight"] = r.normal([width], 0.1, 1.0)
        out[name + ".bias"] = r.normal([width], 0.05)

    def layers(prefix, width, count, mlp):
        for i in range(count):
            d = f"{prefix}encoder.layers.{i}."
            for name, gain in (("q_proj", 1.8), ("k_proj", 1.8), ("v_proj", 1.0), ("out_proj", 0.6)):
                linear(d + "self_attn." + name, width, width, gain)
            norm(d + "layer_norm1", width)
            norm(d + "layer_norm2", width)
            linear(d + "mlp.fc1", mlp, width, 1.0)
            linear(d + "mlp.fc2", width, mlp, 0.5)

    T, V = h["text_width"], h["vision_width"]
    out["text_model.embeddings.token_embedding.weight"] = r.normal([h["vocab"], T], 0.5)
    out["text_model.embeddings.position_embedding.weight"] = r.normal([h["context"], T], 0.3)
    layers("text_model.", T, h["text_layers"], h["text_mlp"])
    norm("text_model.final_layer_norm", T)
    linear("text_projection", h["projection"], T, 1.0, bias=False)
    out["logit_scale"] = torch.tensor(h["logit_scale"])
    M = h["image"] // h["patch"]
    out["vision_model.embeddings.class_embedding"] = r.normal([V], 0.5)
    out["vision_model.embeddings.patch_embedding.weight"] = r.normal([V, 3, h["patch"], h["patch"]],
                                                                     1.0 / math.sqrt(3 * h["patch"] ** 2))
    out["vision_model.embeddings.position_embedding.weight"] = hub.position_values(r, 1, M, V)
    norm("vision_model.pre_layrnorm", V)
    layers("vision_model.", V, h["vision_layers"], h["vision_mlp"])
    norm("vision_model.post_layernorm", V)
    linear("visual_projection", h["projection"], V, 1.0, bias=False)
    return out


def native_config():
    h = HF
    text = OrderedDict([("vocab_size", h["vocab"]), ("hidden_size", h["text_width"]),
                        ("intermediate_size", h["text_mlp"]), ("num_hidden_layers", h["text_layers"]),
                        ("num_attention_heads", h["text_heads"]), ("max_position_embeddings", h["context"]),
                        ("hidden_act", h["act"]), ("layer_norm_eps", h["eps"]), ("bos_token_id", h["bos"]),
                        ("eos_token_id", h["eos"]), ("pad_token_id", h["eos"]), ("model_type", "clip_text_model")])
    vision = OrderedDict([("hidden_size", h["vision_width"]), ("intermediate_size", h["vision_mlp"]),
                          ("num_hidden_layers", h["vision_layers"]), ("num_attention_heads", h["vision_heads"]),
                          ("image_size", h["image"]), ("patch_size", h["patch"]), ("hidden_act", h["act"]),
                          ("layer_norm_eps", h["eps"]), ("model_type", "clip_vision_model")])
    return OrderedDict([("architectures", ["CLIPModel"]), ("model_type", "clip"), ("projection_dim", h["projection"]),
                        ("logit_scale_init_value", 2.6592), ("text_config", text), ("vision_config", vision),
                        ("torch_dtype", "float16"), ("transformers_version", "4.46.0")])


# --------------------------------------------------------------------------------------------
def relative(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def save(out_dir, name, tensor, dtype=None):
    array = tensor.detach().numpy()
    np.save(os.path.join(out_dir, name), np.ascontiguousarray(array.astype(dtype) if dtype else array))
    return name


def reference_files(out_dir, prefix, ids, image, text, image_embedding, logit_scale, pooled, extra=None):
    logits, probabilities = rc.zero_shot(image_embedding, text, logit_scale)
    assert torch.isfinite(text).all() and torch.isfinite(logits).all()
    files = {"ids": save(out_dir, prefix + ".ids.npy", ids), "image": save(out_dir, prefix + ".image.npy", image),
             "text_embeddings": save(out_dir, prefix + ".text_embeddings.npy", text),
             "image_embedding": save(out_dir, prefix + ".image_embedding.npy", image_embedding),
             "logits": save(out_dir, prefix + ".logits.npy", logits),
             "probabilities": save(out_dir, prefix + ".probabilities.npy", probabilities),
             "pooled": save(out_dir, prefix + ".pooled.npy", pooled)}
    files.update(extra or {})
    return files, logits, probabilities


def attention_and_gradient(sd, ids, image_embedding, prompt):
    """The text tower's attention of `prompt` and d logits[prompt] / d attention, in float64."""
    probs = []
    # Weights that require grad put every probability into the graph (their retained gradient is then the
    # total derivative through the later blocks, as autograd gives it for the tower's kept probabilities).
    leaf = lambda t: None if t is None else t.detach().to(torch.float64).requires_grad_()  # noqa: E731
    with torch.enable_grad(), replaced(ref, "_f64", leaf):
        text = rc.openai_encode_text(sd, ids, probs_out=probs)
        for p in probs:
            p.retain_grad()
        logits, _ = rc.zero_shot(image_embedding, text, ref._f64(sd["logit_scale"]))
        logits[prompt].backward()
    attention = torch.stack([p[prompt].detach() for p in probs])
    gradient = torch.stack([p.grad[prompt] for p in probs])
    # the other prompts do not reach this logit
    assert all(p.grad[i].abs().max() == 0 for p in probs for i in range(ids.shape[0]) if i != prompt)
    return attention, gradient


def main(argv):
    out_dir = output_folder(argv, "usage: make_clip_text_cases.py OUTDIR", threads=1)
    if out_dir is None:
        return 2
    t0 = time.time()
    cases, margins = [], []

    # ---- OpenAI: the state_dict and the archive of the same weights
    sd, mirror, ids, image = build_openai(out_dir)
    c = OPENAI
    with torch.no_grad():
        text = rc.openai_encode_text(sd, ids)
        image_embedding = rc.openai_encode_image(sd, image)[0]
        m_text = mirror.encode_text(ids).double()
        m_image = mirror.encode_image(image)[0].double()
    pooled = ids.argmax(dim=-1)
    assert torch.equal(pooled, (ids == c["vocab_size"] - 1).int().argmax(dim=-1))
    worst_mirror = max(relative(m_text, text), relative(m_image, image_embedding))
    assert worst_mirror < 1e-5, worst_mirror
    for label, wrong in wrong_openai_text(sd, ids).items():
        margins.append((f"openai: {label}", relative(wrong, text)))
    attention, gradient = attention_and_gradient(sd, ids, image_embedding, GRAD_PROMPT)
    peak = attention[:, :, 1:].max(dim=-1).values.mean().item()
    assert 0.05 < peak < 0.95, peak
    extra = {"attention": save(out_dir, "openai.attention.npy", attention),
             "attention_grad": save(out_dir, "openai.attention_grad.npy", gradient)}
    scale = float(sd["logit_scale"])
    files, logits, probabilities = reference_files(out_dir, "openai", ids, image, text, image_embedding, scale, pooled,
                                                   extra)
    assert probabilities.max() < 0.99 and logits.max() - logits.min() > 1.0, (logits, probabilities)
    W = c["transformer_width"]
    common = dict(layout="openai-clip", float16=True, prompts=ids.shape[0], context_length=c["context_length"],
                  vocab_size=c["vocab_size"], width=W, layers=c["transformer_layers"], heads=W // 64, mlp_hidden=4 * W,
                  embed_dim=c["embed_dim"], end_of_text_id=c["vocab_size"] - 1, pooling="argmax",
                  logit_scale=scale, image_size=[c["image_resolution"]] * 2, grad_prompt=GRAD_PROMPT, files=files)
    cases.append(dict(common, name="openai_pt", model="openai_clip.pt", format="pytorch-zip"))
    cases.append(dict(common, name="openai_jit", model="openai_clip_jit.pt", format="torchscript-weights"))
    print(f"openai   P={ids.shape[0]} L={ids.shape[1]} logits [{logits.min():+.2f},{logits.max():+.2f}] "
          f"p_max {probabilities.max():.2f} attention peak {peak:.2f}; float32 mirror {worst_mirror:.1e}")

    # ---- Hugging Face, legacy config, the same weights
    folder = os.path.join(out_dir, "hf_clip_legacy")
    config = legacy_config(sd)
    hsd = write_folder(folder, hf_from_openai(sd), config, clip_preprocessor(c["image_resolution"], False))
    with torch.no_grad():
        h_text = rc.hf_encode_text(hsd, config, ids)
        h_image = rc.hf_encode_image(hsd, config, image)[0]
    cross = max(relative(h_text, text), relative(h_image, image_embedding))
    assert cross < 1e-12, cross  # two code paths, one model
    h_pooled = rc.hf_pooled_positions(config, ids)
    assert torch.equal(h_pooled, pooled)
    stale = dict(config, text_config_dict=None)
    margins.append(("hf legacy: text_config instead of text_config_dict", relative(rc.hf_encode_text(hsd, stale, ids),
                                                                                    h_text)))
    files, logits, _ = reference_files(out_dir, "hf_legacy", ids, image, h_text, h_image, scale, h_pooled)
    cases.append(dict(common, name="hf_legacy", model="hf_clip_legacy", format="safetensors", float16=False,
                      layout="hf-clip", files=files))
    print(f"hf_legacy equals the OpenAI reference to {cross:.1e}")

    # ---- Hugging Face, its own weights, float16 on disk
    h = HF
    r = Init(h["seed"])
    folder = os.path.join(out_dir, "hf_clip")
    config = native_config()
    hsd = write_folder(folder, hf_native_weights(r), config, clip_preprocessor(h["image"], True), dtype=torch.float16)
    assert hsd["text_projection.weight"].dtype == torch.float16
    ids = token_rows(r, h["vocab"], h["context"], PROMPT_LENGTHS, h["bos"], h["eos"], added=h["added"], pad=h["eos"])
    image = hub.smooth_image(h["seed"] + 1, h["image"], h["image"])
    other = hub.smooth_image(h["seed"] + 2, 64, 32)
    with torch.no_grad():
        text = rc.hf_encode_text(hsd, config, ids)
        image_embedding = rc.hf_encode_image(hsd, config, image)[0]
        other_embedding = rc.hf_encode_image(hsd, config, other)[0]
        pooled = rc.hf_pooled_positions(config, ids)
        argmax = ids.argmax(dim=-1)
        assert (pooled != argmax).sum() >= 2, (pooled, argmax)  # the added id misleads the argmax
        legacy = copy.deepcopy(config)
        legacy["text_config"]["eos_token_id"] = 2
        margins.append(("hf: argmax pooling", relative(rc.hf_encode_text(hsd, legacy, ids), text)))
        quick = copy.deepcopy(config)
        quick["text_config"]["hidden_act"] = "quick_gelu"
        margins.append(("hf: quick_gelu", relative(rc.hf_encode_text(hsd, quick, ids), text)))
        margins.append(("hf: antialiased positions",
                        relative(rc.hf_encode_image(hsd, config, other, pos_antialias=True)[0], other_embedding)))
    extra = {"image_other": save(out_dir, "hf_clip.image_other.npy", other),
             "image_embedding_other": save(out_dir, "hf_clip.image_embedding_other.npy", other_embedding)}
    scale = float(hsd["logit_scale"].double())  # as stored: float16
    files, logits, probabilities = reference_files(out_dir, "hf_clip", ids, image, text, image_embedding, scale,
                                                   pooled, extra)
    cases.append(dict(name="hf_clip", model="hf_clip", layout="hf-clip", format="safetensors", float16=True,
                      prompts=ids.shape[0], context_length=h["context"], vocab_size=h["vocab"], width=h["text_width"],
                      layers=h["text_layers"], heads=h["text_heads"], mlp_hidden=h["text_mlp"],
                      embed_dim=h["projection"], end_of_text_id=h["eos"], pooling="first end of text",
                      logit_scale=scale, image_size=[h["image"]] * 2,
                      image_other_size=[64, 32], files=files))
    print(f"hf_clip  P={ids.shape[0]} L={ids.shape[1]} logits [{logits.min():+.2f},{logits.max():+.2f}] "
          f"p_max {probabilities.max():.2f}; pooled {pooled.tolist()} vs argmax {argmax.tolist()}")

    for label, margin in margins:
        print(f"  wrong reading -> {label}: {margin:.1e}")
        assert margin > 1e-3, (label, margin)
    return write_cases(out_dir, cases, t0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
