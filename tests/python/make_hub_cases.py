#!/usr/bin/python3
"""Generate attnscope's hub-layout parity cases: small random Hugging Face ViT / DeiT folders, OpenAI CLIP
files and DINOv2 hub state dicts, inputs, and the float64 reference outputs (reference_hub_vit.py).

Usage: /usr/bin/python3 tests/python/make_hub_cases.py OUTDIR

Independent of the C++ sources: the reference is written from the authors' code (see reference_hub_vit.py).
The files are written in the authors' layouts by module trees that mirror the authors' classes (so key names,
key order and torch.save's OrderedDict + _metadata are what `model.state_dict()` gives); the same mirrors,
run in float32 with torch.nn.MultiheadAttention / F.interpolate / einsum, are a second, differently written
forward that every case is checked against (1e-5). Deterministic, a few seconds on one core.

OUTDIR layout:
  hf_vit/                 ViTForImageClassification: model.safetensors, config.json, preprocessor_config.json
  hf_vit_model/           ViTModel with pooler (keys without the "vit." prefix), legacy ViTFeatureExtractor json
  hf_vit_model_nopool/    ViTModel without pooler, qkv_bias false
  hf_deit/                DeiTForImageClassificationWithTeacher, DeiTImageProcessor json
  hf_deit_cls/            DeiTForImageClassification, legacy DeiTFeatureExtractor json (int size / crop_size)
  clip_full.pth           torch.save of a full OpenAI CLIP state_dict (visual.* + text tower), dtypes as
                          clip.model.convert_weights leaves them (fp16 conv/linear/in_proj/proj, fp32 rest),
                          plus the 0-d int64 keys input_resolution, context_length, vocab_size of the JIT files
  clip_visual.safetensors the same visual tower alone, float32, keys without "visual."
  dinov2_reg.pth          DINOv2 hub state dict with 4 register tokens (patch 14, pos grid 6x6)
  dinov2.pth              DINOv2 hub state dict without registers
  <case>.input.npy        float32 [1,3,H,W], already normalised
  <case>.logits.npy       float32 [1, out]: the model's output (logits or embedding)
  <case>.rows.npy         float32 [L, heads, Q, T]: attention rows of the queries, every layer and head
  cases.json              list of {name, model, input, grid, num_prefix, tokens, queries, logits, rows,
                          output_kind, heads, mean, std, family, arch, native_grid, pos_resize}
                          (model: a folder, .pth or .safetensors relative to OUTDIR; queries: token indices,
                          every prefix token then the first, middle and last patch; pos_resize: informative,
                          how the authors' code resizes the position embeddings for this input)
  layouts.json            informative: every model's keys (clip_full: key -> dtype)

Image cases (for the command-line test; the files above are unchanged by them):
  <case>.png              RGB uint8 PNG (PIL, lossless): low-frequency waves plus mild noise, spanning ~8..247
  <case>.png_logits.npy   float32 [out] (1-D): the reference output for x = (png / 255 - mean) / std (float64;
                          mean/std the model's own: HF preprocessor_config.json, CLIP's, DINOv2's ImageNet)
  <case>.png_row.npy      float32 [T] (1-D): attention probabilities of the query token over all T tokens (prefix
                          tokens first, then patches row-major) in layer `layer`, head `head`
  image_cases.json        list of {name, model, image, logits, row, layer, head, query, query_index, size, mean,
                          std, num_prefix, tokens}: query "cls" (token 0) or "regK" (register K, token 1 + K);
                          layer is the last layer's index; size [H, W] of the PNG (no resizing needed)
"""

import copy
import json
import math
import os
import sys
import time
from collections import OrderedDict

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import torch
import numpy as np
import torch.nn as nn
import torch.nn.functional as F

import reference_hub_vit as ref
import safetensors_io
from fixture_tools import Init, output_folder


# --------------------------------------------------------------------------------------------
# Random values with activations in a sane range
# --------------------------------------------------------------------------------------------
def smooth_field(r, gh, gw, channels, cycles=1.5):
    """[gh*gw, channels] low-frequency random field (unit std), row-major."""
    yy, xx = torch.meshgrid(torch.arange(gh) / gh, torch.arange(gw) / gw, indexing="ij")
    fy = r.uniform([channels, 3], -cycles, cycles)
    fx = r.uniform([channels, 3], -cycles, cycles)
    phase = r.uniform([channels, 3], 0.0, 2 * math.pi)
    amp = r.normal([channels, 3], 1.0)
    arg = 2 * math.pi * (fy[..., None, None] * yy + fx[..., None, None] * xx) + phase[..., None, None]
    field = (amp[..., None, None] * torch.cos(arg)).sum(dim=1).reshape(channels, gh * gw).T
    return field / field.std()


def smooth_image(seed, H, W):
    """float32 [1,3,H,W]: a few low-frequency waves per channel plus a little noise (like a normalised photo)."""
    r = Init(seed)
    img = smooth_field(r, H, W, 3, cycles=3.0).T.reshape(3, H, W)
    img = img + 0.15 * r.normal([3, H, W], 1.0)
    return (img / img.std()).reshape(1, 3, H, W).to(torch.float32)


def linear_gain(name):
    """Weight std * sqrt(fan_in) per role (q/k larger so attention is neither uniform nor one-hot)."""
    if name.endswith(("query", "key")):
        return 1.8
    if name.endswith("value"):
        return 1.0
    if name.endswith(("attention.output.dense", "attn.proj", "attn.out_proj")):
        return 0.6
    if name.endswith(("intermediate.dense", "mlp.fc1", "mlp.c_fc")):
        return 1.0
    if name.endswith(("output.dense", "mlp.fc2", "mlp.c_proj")):
        return 0.5
    return 1.0


@torch.no_grad()
def randomize(module, r, qk_gain=1.8):
    """Fill every Linear / Conv2d / LayerNorm / MultiheadAttention of `module` with sane random values."""
    for name, m in module.named_modules():
        if isinstance(m, nn.LayerNorm):
            m.weight.copy_(r.normal(m.weight.shape, 0.1, 1.0))
            m.bias.copy_(r.normal(m.bias.shape, 0.05))
        elif isinstance(m, nn.MultiheadAttention):
            C = m.embed_dim
            w = torch.cat([r.normal([C, C], qk_gain / math.sqrt(C)), r.normal([C, C], qk_gain / math.sqrt(C)),
                           r.normal([C, C], 1.0 / math.sqrt(C))])
            m.in_proj_weight.copy_(w)
            m.in_proj_bias.copy_(r.normal([3 * C], 0.02))
        elif isinstance(m, nn.Linear):
            if name.endswith("attn.qkv"):
                C = m.in_features
                w = torch.cat([r.normal([C, C], qk_gain / math.sqrt(C)), r.normal([C, C], qk_gain / math.sqrt(C)),
                               r.normal([C, C], 1.0 / math.sqrt(C))])
            else:
                w = r.normal(m.weight.shape, linear_gain(name) / math.sqrt(m.in_features))
            m.weight.copy_(w)
            if m.bias is not None:
                m.bias.copy_(r.normal(m.bias.shape, 0.02))
        elif isinstance(m, nn.Conv2d):
            fan_in = m.weight[0].numel()
            m.weight.copy_(r.normal(m.weight.shape, 1.0 / math.sqrt(fan_in)))
            if m.bias is not None:
                m.bias.copy_(r.normal(m.bias.shape, 0.02))


def position_values(r, n_prefix, M, C):
    """[n_prefix + M*M, C]: noise plus a smooth field over the grid for the patch part (like a trained one)."""
    pos = r.normal([n_prefix + M * M, C], 0.2)
    pos[n_prefix:] += smooth_field(r, M, M, C)
    return pos


def mha_probs(x_nld, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, heads):
    """torch's F.multi_head_attention_forward on [B,T,C] -> (out [B,T,C], probs [B,h,T,T])."""
    x = x_nld.transpose(0, 1)
    C = x.shape[-1]
    in_b = None if q_b is None else torch.cat([q_b, k_b, v_b])
    out, probs = F.multi_head_attention_forward(
        x, x, x, C, heads, None, in_b, None, None, False, 0.0, o_w, o_b, training=False, need_weights=True,
        use_separate_proj_weight=True, q_proj_weight=q_w, k_proj_weight=k_w, v_proj_weight=v_w,
        average_attn_weights=False)
    return out.transpose(0, 1), probs


# --------------------------------------------------------------------------------------------
# Mirrors of the authors' module trees (names as in their state dicts), float32 forwards
# --------------------------------------------------------------------------------------------
def _holder(**children):
    m = nn.Module()
    for k, v in children.items():
        setattr(m, k, v)
    return m


class HFLayer(nn.Module):
    """transformers ViTLayer / DeiTLayer: attention.{attention.{query,key,value}, output.dense}, intermediate.dense,
    output.dense, layernorm_before, layernorm_after."""

    def __init__(self, C, inter, eps, qkv_bias):
        super().__init__()
        self.attention = _holder(
            attention=_holder(query=nn.Linear(C, C, bias=qkv_bias), key=nn.Linear(C, C, bias=qkv_bias),
                              value=nn.Linear(C, C, bias=qkv_bias)),
            output=_holder(dense=nn.Linear(C, C)))
        self.intermediate = _holder(dense=nn.Linear(C, inter))
        self.output = _holder(dense=nn.Linear(inter, C))
        self.layernorm_before = nn.LayerNorm(C, eps=eps)
        self.layernorm_after = nn.LayerNorm(C, eps=eps)


class HFBase(nn.Module):
    """transformers ViTModel / DeiTModel: embeddings, encoder.layer.N, layernorm, pooler.dense (optional)."""

    def __init__(self, cfg, distilled, pooler):
        super().__init__()
        C, p, M = cfg["hidden_size"], cfg["patch_size"], cfg["image_size"] // cfg["patch_size"]
        emb = nn.Module()
        emb.cls_token = nn.Parameter(torch.zeros(1, 1, C))
        if distilled:
            emb.distillation_token = nn.Parameter(torch.zeros(1, 1, C))
        emb.position_embeddings = nn.Parameter(torch.zeros(1, M * M + (2 if distilled else 1), C))
        emb.patch_embeddings = _holder(projection=nn.Conv2d(cfg["num_channels"], C, p, p))
        self.embeddings = emb
        self.encoder = _holder(layer=nn.ModuleList(
            [HFLayer(C, cfg["intermediate_size"], cfg["layer_norm_eps"], cfg["qkv_bias"])
             for _ in range(cfg["num_hidden_layers"])]))
        self.layernorm = nn.LayerNorm(C, eps=cfg["layer_norm_eps"])
        if pooler:
            self.pooler = _holder(dense=nn.Linear(C, C))
        self.cfg = cfg
        self.num_prefix = 2 if distilled else 1

    def interpolate_pos_encoding(self, embeddings, height, width):
        # transformers main, ViTEmbeddings / DeiTEmbeddings.interpolate_pos_encoding
        P = self.num_prefix
        pos = self.embeddings.position_embeddings
        num_patches = embeddings.shape[1] - P
        num_positions = pos.shape[1] - P
        if num_patches == num_positions and height == width:
            return pos
        dim = embeddings.shape[-1]
        patch = self.cfg["patch_size"]
        s = int(num_positions ** 0.5)
        pp = pos[:, P:].reshape(1, s, s, dim).permute(0, 3, 1, 2)
        pp = F.interpolate(pp, size=(height // patch, width // patch), mode="bicubic", align_corners=False)
        return torch.cat((pos[:, :P], pp.permute(0, 2, 3, 1).view(1, -1, dim)), dim=1)

    def encode(self, img):
        e = self.embeddings
        B, _, H, W = img.shape
        x = e.patch_embeddings.projection(img).flatten(2).transpose(1, 2)
        pre = [e.cls_token.expand(B, -1, -1)]
        if self.num_prefix == 2:
            pre.append(e.distillation_token.expand(B, -1, -1))
        x = torch.cat(pre + [x], dim=1)
        x = x + self.interpolate_pos_encoding(x, H, W)
        heads = self.cfg["num_attention_heads"]
        probs_all = []
        for layer in self.encoder.layer:
            a = layer.attention.attention
            out, probs = mha_probs(layer.layernorm_before(x), a.query.weight, a.query.bias, a.key.weight,
                                   a.key.bias, a.value.weight, a.value.bias, layer.attention.output.dense.weight,
                                   layer.attention.output.dense.bias, heads)
            x = x + out
            h = F.gelu(layer.intermediate.dense(layer.layernorm_after(x)))
            x = x + layer.output.dense(h)
            probs_all.append(probs)
        return self.layernorm(x), probs_all


class HFViTModel(HFBase):
    def forward(self, img):
        h, probs = self.encode(img)
        out = torch.tanh(self.pooler.dense(h[:, 0])) if hasattr(self, "pooler") else h[:, 0]
        return out, probs


class HFWithHead(nn.Module):
    """ViTForImageClassification (vit.*, classifier), DeiTForImageClassification (deit.*, classifier),
    DeiTForImageClassificationWithTeacher (deit.*, cls_classifier, distillation_classifier)."""

    def __init__(self, cfg, arch):
        super().__init__()
        C, K = cfg["hidden_size"], len(cfg["id2label"])
        self.arch = arch
        if arch == "ViTForImageClassification":
            self.vit = HFBase(cfg, distilled=False, pooler=False)
        else:
            self.deit = HFBase(cfg, distilled=True, pooler=False)
        if arch == "DeiTForImageClassificationWithTeacher":
            self.cls_classifier = nn.Linear(C, K)
            self.distillation_classifier = nn.Linear(C, K)
        else:
            self.classifier = nn.Linear(C, K)

    def forward(self, img):
        base = self.vit if self.arch == "ViTForImageClassification" else self.deit
        h, probs = base.encode(img)
        if self.arch == "DeiTForImageClassificationWithTeacher":
            return (self.cls_classifier(h[:, 0]) + self.distillation_classifier(h[:, 1])) / 2, probs
        return self.classifier(h[:, 0]), probs


# ---- OpenAI CLIP (clip/model.py), visual forward extended to other grids with open_clip's resize_pos_embed
class LayerNorm(nn.LayerNorm):
    def forward(self, x):
        orig = x.dtype
        return super().forward(x.type(torch.float32)).type(orig)


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1 = LayerNorm(d_model)
        self.mlp = nn.Sequential(OrderedDict([
            ("c_fc", nn.Linear(d_model, d_model * 4)), ("gelu", QuickGELU()),
            ("c_proj", nn.Linear(d_model * 4, d_model))]))
        self.ln_2 = LayerNorm(d_model)

    def forward(self, x, probs_out):
        a, probs = self.attn(*(3 * [self.ln_1(x)]), need_weights=True, average_attn_weights=False)
        probs_out.append(probs)
        x = x + a
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width, layers, heads):
        super().__init__()
        self.width, self.layers = width, layers
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads) for _ in range(layers)])


class VisionTransformer(nn.Module):
    def __init__(self, input_resolution, patch_size, width, layers, heads, output_dim):
        super().__init__()
        self.input_resolution, self.output_dim = input_resolution, output_dim
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch_size, stride=patch_size, bias=False)
        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((input_resolution // patch_size) ** 2 + 1, width))
        self.ln_pre = LayerNorm(width)
        self.transformer = Transformer(width, layers, heads)
        self.ln_post = LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x):
        x = self.conv1(x)
        gh, gw = x.shape[-2:]
        x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
        x = torch.cat([self.class_embedding.to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1], dtype=x.dtype), x],
                      dim=1)
        x = x + self.resized_positional_embedding(gh, gw).to(x.dtype)
        x = self.ln_pre(x)
        x = x.permute(1, 0, 2)
        probs = []
        for blk in self.transformer.resblocks:
            x = blk(x, probs)
        x = x.permute(1, 0, 2)
        x = self.ln_post(x[:, 0, :])
        return x @ self.proj, probs

    def resized_positional_embedding(self, gh, gw):
        # open_clip resize_pos_embed (interpolation="bicubic", antialias=True), keyed on the grid shape
        old = self.positional_embedding
        M = int(math.sqrt(old.shape[0] - 1))
        if (gh, gw) == (M, M):
            return old
        tok, img = old[:1], old[1:]
        img = img.reshape(1, M, M, -1).permute(0, 3, 1, 2)
        img = F.interpolate(img, size=(gh, gw), mode="bicubic", antialias=True, align_corners=False)
        img = img.permute(0, 2, 3, 1).reshape(1, gh * gw, -1)[0]
        return torch.cat([tok, img], dim=0)


class CLIP(nn.Module):
    def __init__(self, embed_dim, image_resolution, vision_layers, vision_width, vision_patch_size,
                 context_length, vocab_size, transformer_width, transformer_heads, transformer_layers):
        super().__init__()
        self.context_length = context_length
        self.visual = VisionTransformer(image_resolution, vision_patch_size, vision_width, vision_layers,
                                        vision_width // 64, embed_dim)
        self.transformer = Transformer(transformer_width, transformer_layers, transformer_heads)
        self.vocab_size = vocab_size
        self.token_embedding = nn.Embedding(vocab_size, transformer_width)
        self.positional_embedding = nn.Parameter(torch.empty(context_length, transformer_width))
        self.ln_final = LayerNorm(transformer_width)
        self.text_projection = nn.Parameter(torch.empty(transformer_width, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))


def convert_weights(model):
    """clip.model.convert_weights: fp16 for conv/linear weights+biases, MHA in/q/k/v proj, text_projection, proj."""
    def _convert(m):
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Linear)):
            m.weight.data = m.weight.data.half()
            if m.bias is not None:
                m.bias.data = m.bias.data.half()
        if isinstance(m, nn.MultiheadAttention):
            for attr in [*[f"{s}_proj_weight" for s in ["in", "q", "k", "v"]], "in_proj_bias", "bias_k", "bias_v"]:
                t = getattr(m, attr)
                if t is not None:
                    t.data = t.data.half()
        for name in ["text_projection", "proj"]:
            if hasattr(m, name):
                t = getattr(m, name)
                if t is not None:
                    t.data = t.data.half()
    model.apply(_convert)


# ---- DINOv2 (dinov2/models/vision_transformer.py + dinov2/layers), eval path without masks
class PatchEmbed(nn.Module):
    def __init__(self, patch, C):
        super().__init__()
        self.patch_size = (patch, patch)
        self.proj = nn.Conv2d(3, C, kernel_size=patch, stride=patch)
        self.norm = nn.Identity()

    def forward(self, x):
        _, _, H, W = x.shape
        assert H % self.patch_size[0] == 0 and W % self.patch_size[1] == 0
        return self.norm(self.proj(x).flatten(2).transpose(1, 2))


class DinoAttention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim, bias=True)

    def forward(self, x, probs_out):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads)
        q, k, v = torch.unbind(qkv, 2)  # [B, N, h, d]
        attn = torch.einsum("bnhd,bmhd->bhnm", q * self.scale, k).softmax(dim=-1)
        probs_out.append(attn)
        x = torch.einsum("bhnm,bmhd->bnhd", attn, v).reshape(B, N, C)
        return self.proj(x)


class LayerScale(nn.Module):
    def __init__(self, dim, init_values=1.0):
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        return x * self.gamma


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class DinoBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = DinoAttention(dim, heads)
        self.ls1 = LayerScale(dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim)
        self.ls2 = LayerScale(dim)

    def forward(self, x, probs_out):
        x = x + self.ls1(self.attn(self.norm1(x), probs_out))
        return x + self.ls2(self.mlp(self.norm2(x)))


class DinoVisionTransformer(nn.Module):
    def __init__(self, img_size, patch_size, embed_dim, depth, num_heads, num_register_tokens,
                 interpolate_antialias, interpolate_offset):
        super().__init__()
        self.patch_size = patch_size
        self.num_register_tokens = num_register_tokens
        self.interpolate_antialias = interpolate_antialias
        self.interpolate_offset = interpolate_offset
        self.patch_embed = PatchEmbed(patch_size, embed_dim)
        num_patches = (img_size // patch_size) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        self.register_tokens = (nn.Parameter(torch.zeros(1, num_register_tokens, embed_dim))
                                if num_register_tokens else None)
        self.blocks = nn.ModuleList([DinoBlock(embed_dim, num_heads) for _ in range(depth)])  # block_chunks=0
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Identity()
        self.mask_token = nn.Parameter(torch.zeros(1, embed_dim))

    def interpolate_pos_encoding(self, x, w, h):
        previous_dtype = x.dtype
        npatch = x.shape[1] - 1
        N = self.pos_embed.shape[1] - 1
        if npatch == N and w == h:
            return self.pos_embed
        pos_embed = self.pos_embed.float()
        class_pos_embed = pos_embed[:, 0]
        patch_pos_embed = pos_embed[:, 1:]
        dim = x.shape[-1]
        w0 = w // self.patch_size
        h0 = h // self.patch_size
        M = int(math.sqrt(N))
        assert N == M * M
        kwargs = {}
        if self.interpolate_offset:
            sx = float(w0 + self.interpolate_offset) / M
            sy = float(h0 + self.interpolate_offset) / M
            kwargs["scale_factor"] = (sx, sy)
        else:
            kwargs["size"] = (w0, h0)
        patch_pos_embed = F.interpolate(patch_pos_embed.reshape(1, M, M, dim).permute(0, 3, 1, 2), mode="bicubic",
                                        antialias=self.interpolate_antialias, **kwargs)
        assert (w0, h0) == patch_pos_embed.shape[-2:]
        patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).view(1, -1, dim)
        return torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed), dim=1).to(previous_dtype)

    def forward(self, x):
        B, nc, w, h = x.shape
        x = self.patch_embed(x)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        x = x + self.interpolate_pos_encoding(x, w, h)
        if self.register_tokens is not None:
            x = torch.cat((x[:, :1], self.register_tokens.expand(x.shape[0], -1, -1), x[:, 1:]), dim=1)
        probs = []
        for blk in self.blocks:
            x = blk(x, probs)
        return self.norm(x)[:, 0], probs


# --------------------------------------------------------------------------------------------
# Models and cases
# --------------------------------------------------------------------------------------------
HF_MODELS = {
    # name: (arch, seed, hidden, heads, layers, intermediate, patch, image, labels, qkv_bias, preprocessor style)
    "hf_vit": ("ViTForImageClassification", 101, 64, 4, 2, 128, 16, 80, 10, True, "vit"),
    "hf_vit_model": ("ViTModel+pooler", 102, 48, 3, 2, 96, 8, 48, 0, True, "vit_legacy"),
    "hf_vit_model_nopool": ("ViTModel", 103, 64, 4, 2, 128, 16, 64, 0, False, "vit_imagenet"),
    "hf_deit": ("DeiTForImageClassificationWithTeacher", 104, 64, 4, 3, 256, 16, 96, 10, True, "deit"),
    "hf_deit_cls": ("DeiTForImageClassification", 105, 48, 3, 2, 192, 16, 64, 7, True, "deit_legacy"),
}
CLIP_CFG = dict(seed=106, embed_dim=64, image_resolution=80, vision_layers=2, vision_width=128, vision_patch_size=16,
                context_length=16, vocab_size=100, transformer_width=64, transformer_heads=1, transformer_layers=1)
DINO_MODELS = {
    # name: (seed, dim, layers, patch, pos grid, registers)
    "dinov2_reg": (107, 128, 2, 14, 6, 4),
    "dinov2": (108, 128, 2, 14, 6, 0),
}

# name, model key, (H, W)
CASES = [
    ("hf_vit_native", "hf_vit", (80, 80)),
    ("hf_vit_small", "hf_vit", (48, 48)),
    ("hf_vit_large", "hf_vit", (112, 112)),
    ("hf_vit_nonsquare", "hf_vit", (64, 112)),
    ("hf_vit_model_native", "hf_vit_model", (48, 48)),
    ("hf_vit_model_nonsquare", "hf_vit_model", (40, 56)),
    ("hf_vit_model_nopool_native", "hf_vit_model_nopool", (64, 64)),
    ("hf_vit_model_nopool_large", "hf_vit_model_nopool", (96, 80)),
    ("hf_deit_native", "hf_deit", (96, 96)),
    ("hf_deit_small", "hf_deit", (64, 64)),
    ("hf_deit_large", "hf_deit", (112, 112)),
    ("hf_deit_nonsquare", "hf_deit", (80, 112)),
    ("hf_deit_cls_native", "hf_deit_cls", (64, 64)),
    ("hf_deit_cls_nonsquare", "hf_deit_cls", (48, 80)),
    ("clip_full_native", "clip_full", (80, 80)),
    ("clip_full_small", "clip_full", (48, 48)),
    ("clip_full_large", "clip_full", (112, 112)),
    ("clip_visual_native", "clip_visual", (80, 80)),
    ("clip_visual_nonsquare", "clip_visual", (64, 96)),
    ("dinov2_reg_native", "dinov2_reg", (84, 84)),
    ("dinov2_reg_small", "dinov2_reg", (56, 56)),
    ("dinov2_reg_large", "dinov2_reg", (98, 98)),
    ("dinov2_reg_nonsquare", "dinov2_reg", (56, 98)),
    ("dinov2_native", "dinov2", (84, 84)),
    ("dinov2_small", "dinov2", (56, 56)),
    ("dinov2_large", "dinov2", (98, 98)),
    ("dinov2_nonsquare", "dinov2", (70, 112)),
]


def hf_config(name):
    arch, _, C, heads, layers, inter, patch, image, labels, qkv_bias, _ = HF_MODELS[name]
    deit = arch.startswith("DeiT")
    cfg = OrderedDict()
    cfg["architectures"] = [arch.split("+")[0]]
    cfg["attention_probs_dropout_prob"] = 0.0
    cfg["encoder_stride"] = patch
    cfg["hidden_act"] = "gelu"
    cfg["hidden_dropout_prob"] = 0.0
    cfg["hidden_size"] = C
    # a bare ViTModel's config still carries PretrainedConfig's default two labels: not a sign of a classifier
    cfg["id2label"] = {str(i): f"class_{i}" for i in range(labels)} if labels else {"0": "LABEL_0", "1": "LABEL_1"}
    cfg["image_size"] = image
    cfg["initializer_range"] = 0.02
    cfg["intermediate_size"] = inter
    cfg["label2id"] = {v: int(k) for k, v in cfg["id2label"].items()}
    cfg["layer_norm_eps"] = 1e-12
    cfg["model_type"] = "deit" if deit else "vit"
    cfg["num_attention_heads"] = heads
    cfg["num_channels"] = 3
    cfg["num_hidden_layers"] = layers
    cfg["patch_size"] = patch
    cfg["qkv_bias"] = qkv_bias
    cfg["torch_dtype"] = "float32"
    cfg["transformers_version"] = "4.46.0"
    return cfg


def hf_preprocessor(name):
    style, image = HF_MODELS[name][10], HF_MODELS[name][7]
    resize = int(round(image / 0.875))
    if style == "vit":  # ViTImageProcessor (current format)
        return OrderedDict([("do_normalize", True), ("do_rescale", True), ("do_resize", True),
                            ("image_mean", [0.5, 0.5, 0.5]), ("image_processor_type", "ViTImageProcessor"),
                            ("image_std", [0.5, 0.5, 0.5]), ("resample", 2), ("rescale_factor", 1 / 255),
                            ("size", {"height": image, "width": image})])
    if style == "vit_imagenet":
        return OrderedDict([("do_normalize", True), ("do_rescale", True), ("do_resize", True),
                            ("image_mean", list(ref.IMAGENET_MEAN)), ("image_processor_type", "ViTImageProcessor"),
                            ("image_std", list(ref.IMAGENET_STD)), ("resample", 3), ("rescale_factor", 1 / 255),
                            ("size", {"height": image, "width": image})])
    if style == "vit_legacy":  # old hub files (ViTFeatureExtractor): int size, no rescale keys
        return OrderedDict([("do_normalize", True), ("do_resize", True),
                            ("feature_extractor_type", "ViTFeatureExtractor"),
                            ("image_mean", [0.5, 0.5, 0.5]), ("image_std", [0.5, 0.5, 0.5]), ("resample", 2),
                            ("size", image)])
    if style == "deit":  # DeiTImageProcessor (current format): resize to size, then centre crop to crop_size
        return OrderedDict([("crop_size", {"height": image, "width": image}), ("do_center_crop", True),
                            ("do_normalize", True), ("do_rescale", True), ("do_resize", True),
                            ("image_mean", list(ref.IMAGENET_MEAN)), ("image_processor_type", "DeiTImageProcessor"),
                            ("image_std", list(ref.IMAGENET_STD)), ("resample", 3), ("rescale_factor", 1 / 255),
                            ("size", {"height": resize, "width": resize})])
    if style == "deit_legacy":  # old hub files (DeiTFeatureExtractor): int size / crop_size
        return OrderedDict([("crop_size", image), ("do_center_crop", True), ("do_normalize", True),
                            ("do_resize", True), ("feature_extractor_type", "DeiTFeatureExtractor"),
                            ("image_mean", list(ref.IMAGENET_MEAN)), ("image_std", list(ref.IMAGENET_STD)),
                            ("resample", 3), ("size", resize)])
    raise ValueError(style)


@torch.no_grad()
def build_hf(name, out_dir):
    arch, seed, C = HF_MODELS[name][:3]
    cfg = hf_config(name)
    r = Init(seed)
    if arch.startswith("ViTModel"):
        mirror = HFViTModel(cfg, distilled=False, pooler=arch.endswith("+pooler"))
        base = mirror
    else:
        mirror = HFWithHead(cfg, arch)
        base = mirror.vit if arch == "ViTForImageClassification" else mirror.deit
    randomize(mirror, r)
    emb = base.embeddings
    P = base.num_prefix
    M = cfg["image_size"] // cfg["patch_size"]
    emb.cls_token.copy_(r.normal(emb.cls_token.shape, 0.5))
    if P == 2:
        emb.distillation_token.copy_(r.normal(emb.distillation_token.shape, 0.5))
    emb.position_embeddings.copy_(position_values(r, P, M, C)[None])
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    sd = mirror.state_dict()
    safetensors_io.save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    pre = hf_preprocessor(name)
    with open(os.path.join(folder, "preprocessor_config.json"), "w") as f:
        json.dump(pre, f, indent=2)
    loaded, config = ref.load_hf_folder(folder)
    assert set(loaded) == set(sd) and all(torch.equal(loaded[k], sd[k]) for k in sd)
    _, P2, _ = ref.hf_layout(loaded)
    assert P2 == P
    info = dict(family="hf", arch=arch.split("+")[0] + (" (pooler)" if arch.endswith("+pooler") else ""),
                path=name, heads=cfg["num_attention_heads"], num_prefix=P, patch=cfg["patch_size"], native=(M, M),
                mean=pre["image_mean"], std=pre["image_std"],
                output_kind="embedding" if arch.startswith("ViTModel") else "logits",
                forward=lambda img, sd=loaded, c=config: ref.hf_forward(sd, c, img),
                wrong={"antialias": lambda img, sd=loaded, c=config: ref.hf_forward(sd, c, img, pos_antialias=True),
                       "offset 0.1 (old transformers)":
                           lambda img, sd=loaded, c=config: ref.hf_forward(sd, c, img, pos_offset=0.1)},
                mirror=mirror.float().eval())
    return info, sorted(sd.keys())


@torch.no_grad()
def build_clip(out_dir):
    c = CLIP_CFG
    r = Init(c["seed"])
    model = CLIP(c["embed_dim"], c["image_resolution"], c["vision_layers"], c["vision_width"], c["vision_patch_size"],
                 c["context_length"], c["vocab_size"], c["transformer_width"], c["transformer_heads"],
                 c["transformer_layers"])
    randomize(model, r)
    v = model.visual
    W, M = c["vision_width"], c["image_resolution"] // c["vision_patch_size"]
    v.class_embedding.copy_(r.normal([W], 0.5))
    v.positional_embedding.copy_(position_values(r, 1, M, W))
    v.proj.copy_(r.normal([W, c["embed_dim"]], 1.0 / math.sqrt(W)))
    model.token_embedding.weight.copy_(r.normal(model.token_embedding.weight.shape, 0.02))
    model.positional_embedding.copy_(r.normal(model.positional_embedding.shape, 0.01))
    model.text_projection.copy_(r.normal(model.text_projection.shape, c["transformer_width"] ** -0.5))
    convert_weights(model)  # as clip.model.build_model leaves a loaded model
    sd = model.state_dict()  # OrderedDict with _metadata, like torch.save(model.state_dict())
    full = OrderedDict()
    # TorchScript archives' state dicts also carry these 0-d tensors (build_model deletes them before loading)
    full["input_resolution"] = torch.tensor(c["image_resolution"], dtype=torch.int64)
    full["context_length"] = torch.tensor(c["context_length"], dtype=torch.int64)
    full["vocab_size"] = torch.tensor(c["vocab_size"], dtype=torch.int64)
    full.update(sd)
    full._metadata = sd._metadata
    path_full = os.path.join(out_dir, "clip_full.pth")
    torch.save(full, path_full)
    visual = OrderedDict((k[len("visual."):], t.float()) for k, t in sd.items() if k.startswith("visual."))
    path_vis = os.path.join(out_dir, "clip_visual.safetensors")
    safetensors_io.save_file(visual, path_vis, metadata={"format": "pt"})

    # OpenAI's released CLIP files are TorchScript archives of the whole model: one is written here
    # too (float32 copy: tracing fp16 convolutions is not possible on the CPU; the values are the
    # same fp16-rounded ones), for the loader path that reads such an archive's parameters only.
    jit_model = copy.deepcopy(model).float().eval()
    jit_model.forward = lambda image: jit_model.visual(image)
    M0 = c["image_resolution"]
    traced = torch.jit.trace(jit_model, torch.zeros(1, 3, M0, M0), check_trace=False)
    torch.jit.save(traced, os.path.join(out_dir, "clip_openai_jit.pt"))

    loaded_full = torch.load(path_full, map_location="cpu")
    assert isinstance(loaded_full, OrderedDict) and list(loaded_full) == list(full)
    loaded_vis = safetensors_io.load_file(path_vis)
    for k, t in visual.items():
        assert torch.equal(loaded_vis[k], t) and torch.equal(loaded_full["visual." + k].float(), t), k
    mirror = VisionTransformer(c["image_resolution"], c["vision_patch_size"], W, c["vision_layers"], W // 64,
                               c["embed_dim"])
    mirror.load_state_dict(visual)
    mirror = mirror.float().eval()
    common = dict(family="clip", heads=W // 64, num_prefix=1, patch=c["vision_patch_size"], native=(M, M),
                  mean=list(ref.CLIP_MEAN), std=list(ref.CLIP_STD), output_kind="embedding", mirror=mirror,
                  wrong={"no antialias": lambda img: ref.clip_forward(loaded_vis, img, pos_antialias=False)})
    infos = {
        "clip_full": dict(common, arch="OpenAI CLIP (full state_dict, visual.*)", path="clip_full.pth",
                          forward=lambda img: ref.clip_forward(loaded_full, img)),
        "clip_visual": dict(common, arch="OpenAI CLIP visual tower", path="clip_visual.safetensors",
                            forward=lambda img: ref.clip_forward(loaded_vis, img)),
    }
    dtypes = OrderedDict((k, str(t.dtype).replace("torch.", "")) for k, t in full.items())
    return infos, dtypes


@torch.no_grad()
def build_dinov2(name, out_dir):
    seed, C, layers, patch, M, reg = DINO_MODELS[name]
    r = Init(seed)
    aa, off = (True, 0.0) if reg else (False, 0.1)  # dinov2/hub/backbones.py
    model = DinoVisionTransformer(M * patch, patch, C, layers, C // 64, reg, aa, off)
    randomize(model, r)
    model.cls_token.copy_(r.normal(model.cls_token.shape, 0.5))
    model.pos_embed.copy_(position_values(r, 1, M, C)[None])
    if reg:
        model.register_tokens.copy_(r.normal(model.register_tokens.shape, 0.7))
    model.mask_token.copy_(r.normal(model.mask_token.shape, 0.1))
    for blk in model.blocks:
        blk.ls1.gamma.copy_(r.uniform([C], 0.2, 1.2))
        blk.ls2.gamma.copy_(r.uniform([C], 0.2, 1.2))
    path = os.path.join(out_dir, name + ".pth")
    sd = model.state_dict()
    torch.save(sd, path)
    loaded = torch.load(path, map_location="cpu")
    assert list(loaded) == list(sd) and all(torch.equal(loaded[k], sd[k]) for k in sd)
    assert ref.dinov2_hub_settings(loaded) == (aa, off)
    info = dict(family="dinov2", arch="DINOv2 hub state_dict" + (f" ({reg} registers)" if reg else ""),
                path=name + ".pth", heads=C // 64, num_prefix=ref.dinov2_num_prefix(loaded), patch=patch,
                native=(M, M), mean=list(ref.IMAGENET_MEAN), std=list(ref.IMAGENET_STD), output_kind="embedding",
                forward=lambda img: ref.dinov2_forward(loaded, img), mirror=model.float().eval(),
                wrong={f"antialias {not aa}": lambda img: ref.dinov2_forward(loaded, img, antialias=not aa),
                       f"offset {0.1 - off:g}": lambda img: ref.dinov2_forward(loaded, img, offset=0.1 - off)},
                antialias=aa, offset=off)
    return info, list(sd.keys())


def pos_resize_note(info, gh, gw, H, W):
    M = info["native"][0]
    fam = info["family"]
    if fam == "hf":
        applied = not (gh * gw == M * M and H == W)
        return dict(applied=applied, mode="size", antialias=False, offset=0.0)
    if fam == "clip":
        return dict(applied=(gh, gw) != (M, M), mode="size", antialias=True, offset=0.0)
    applied = not (gh * gw == M * M and H == W)
    if info["offset"]:
        return dict(applied=applied, mode="scale_factor", antialias=info["antialias"], offset=info["offset"],
                    scale_factor=[(gh + info["offset"]) / M, (gw + info["offset"]) / M])
    return dict(applied=applied, mode="size", antialias=info["antialias"], offset=0.0)


def queries_for(P, gh, gw):
    q = list(range(P))  # every prefix token (class, distillation, registers)
    q += [P, P + (gh // 2) * gw + gw // 2, P + gh * gw - 1]  # first, middle and last patch
    return q


# --------------------------------------------------------------------------------------------
# Image cases: PNG in, the reference forward on (png / 255 - mean) / std out
# --------------------------------------------------------------------------------------------
# name, model key, (H, W), query ("cls" or "regK"), head; the layer is always the last one
IMAGE_CASES = [
    ("img_hf_vit_native", "hf_vit", (80, 80), "cls", 0),
    ("img_hf_vit_nonsquare", "hf_vit", (64, 112), "cls", 0),
    ("img_hf_deit_native", "hf_deit", (96, 96), "cls", 0),
    ("img_clip_full_native", "clip_full", (80, 80), "cls", 0),
    ("img_dinov2_reg_native", "dinov2_reg", (84, 84), "cls", 0),
    ("img_dinov2_reg_nonsquare", "dinov2_reg", (56, 98), "cls", 0),
    ("img_dinov2_native", "dinov2", (84, 84), "cls", 0),
    ("img_dinov2_reg_reg2", "dinov2_reg", (84, 84), "reg2", 1),
]


def png_pixels(seed, H, W):
    """uint8 [H, W, 3]: a few low-frequency waves per channel plus mild noise, each channel stretched to 8..247."""
    r = Init(seed)
    f = smooth_field(r, H, W, 3, cycles=2.5).T.reshape(3, H, W)
    f = f + 0.08 * r.normal([3, H, W], 1.0)
    lo = f.amin(dim=(1, 2), keepdim=True)
    hi = f.amax(dim=(1, 2), keepdim=True)
    v = 8.0 + 239.0 * (f - lo) / (hi - lo)
    return np.ascontiguousarray(v.round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy())


def model_mean_std(info, out_dir):
    """The model's own normalisation: HF from its preprocessor_config.json, CLIP / DINOv2 from the constants."""
    if info["family"] == "hf":
        with open(os.path.join(out_dir, info["path"], "preprocessor_config.json")) as f:
            pre = json.load(f)
        return [float(v) for v in pre["image_mean"]], [float(v) for v in pre["image_std"]]
    if info["family"] == "clip":
        return list(ref.CLIP_MEAN), list(ref.CLIP_STD)
    return list(ref.IMAGENET_MEAN), list(ref.IMAGENET_STD)


def write_image_cases(out_dir, models):
    from PIL import Image

    cases = []
    worst_out = worst_row = 0.0
    for ci, (name, mname, (H, W), query, head) in enumerate(IMAGE_CASES):
        info = models[mname]
        p = info["patch"]
        assert H % p == 0 and W % p == 0, (name, H, W, p)
        pixels = png_pixels(9000 + ci, H, W)
        png = name + ".png"
        Image.fromarray(pixels, mode="RGB").save(os.path.join(out_dir, png), format="PNG")
        with Image.open(os.path.join(out_dir, png)) as im:
            assert im.mode == "RGB" and im.size == (W, H)
            assert np.array_equal(np.asarray(im), pixels), name  # lossless round trip
        assert pixels.min() <= 16 and pixels.max() >= 239, name

        mean, std = model_mean_std(info, out_dir)
        x = torch.from_numpy(pixels).to(torch.float64).permute(2, 0, 1)[None] / 255.0
        x = (x - torch.tensor(mean, dtype=torch.float64).view(1, 3, 1, 1)) / \
            torch.tensor(std, dtype=torch.float64).view(1, 3, 1, 1)
        with torch.no_grad():
            out, probs = info["forward"](x)
            m_out, m_probs = info["mirror"](x.to(torch.float32))
        P = info["num_prefix"]
        T = P + (H // p) * (W // p)
        layer = len(probs) - 1
        if query == "cls":
            qi = 0
        else:
            assert query.startswith("reg") and info["family"] == "dinov2"
            k = int(query[3:])
            assert 0 <= k < P - 1, (name, query, P)
            qi = 1 + k  # DINOv2 tokens: [cls, registers..., patches]
        assert 0 <= head < info["heads"]
        row = probs[layer][0, head, qi, :]
        assert row.shape == (T,) and abs(row.sum().item() - 1.0) < 1e-12, name
        assert torch.isfinite(out).all() and (out.max() - out.min()).item() > 0.1, name
        assert 2.0 / T < row.max().item() < 0.95, (name, row.max().item())
        e_out = (m_out.double() - out).abs().max().item()
        e_row = (m_probs[layer][0, head, qi].double() - row).abs().max().item()
        assert e_out < 1e-5 and e_row < 1e-5, (name, e_out, e_row)
        worst_out, worst_row = max(worst_out, e_out), max(worst_row, e_row)

        logits_file, row_file = png + "_logits.npy", png + "_row.npy"
        np.save(os.path.join(out_dir, logits_file), np.ascontiguousarray(out[0].numpy().astype(np.float32)))
        np.save(os.path.join(out_dir, row_file), np.ascontiguousarray(row.numpy().astype(np.float32)))
        cases.append(OrderedDict([
            ("name", name), ("model", info["path"]), ("image", png), ("logits", logits_file), ("row", row_file),
            ("layer", layer), ("head", head), ("query", query), ("query_index", qi), ("size", [H, W]),
            ("mean", mean), ("std", std), ("num_prefix", P), ("tokens", T),
        ]))
        print(f"{name:28s} {png:30s} {mname:10s} {H}x{W} T={T:3d} out[{out.shape[1]}] "
              f"query {query} (token {qi}) layer {layer} head {head} row max {row.max():.3f} "
              f"mirror dout {e_out:.1e} drow {e_row:.1e}")
    with open(os.path.join(out_dir, "image_cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print(f"{len(cases)} image cases in {out_dir}/image_cases.json; float32 mirrors agree to {worst_out:.1e} "
          f"(outputs), {worst_row:.1e} (rows)")


def main(argv):
    out_dir = output_folder(argv, "usage: make_hub_cases.py OUTDIR", threads=1)
    if out_dir is None:
        return 2
    t0 = time.time()

    # the explicit bicubic weights must be PyTorch's (size / scale_factor, with and without antialias)
    g = torch.Generator().manual_seed(7)
    worst = 0.0
    for M in (5, 6):
        x = torch.randn(1, 8, M, M, generator=g, dtype=torch.float64)
        for (gh, gw) in ((3, 3), (4, 7), (7, 7), (M, M), (5, 8)):
            for aa in (False, True):
                a = ref.resize_patch_pos(x[0].permute(1, 2, 0).reshape(M * M, 8), (M, M), size=(gh, gw), antialias=aa)
                b = F.interpolate(x, size=(gh, gw), mode="bicubic", align_corners=False, antialias=aa)
                worst = max(worst, (a - b[0].permute(1, 2, 0).reshape(gh * gw, 8)).abs().max().item())
                sf = ((gh + 0.1) / M, (gw + 0.1) / M)
                a = ref.resize_patch_pos(x[0].permute(1, 2, 0).reshape(M * M, 8), (M, M), scale_factor=sf, antialias=aa)
                b = F.interpolate(x, scale_factor=sf, mode="bicubic", antialias=aa)
                worst = max(worst, (a - b[0].permute(1, 2, 0).reshape(gh * gw, 8)).abs().max().item())
    assert worst < 1e-12, worst

    models, layouts = {}, {}
    for name in HF_MODELS:
        models[name], layouts[name] = build_hf(name, out_dir)
    clip_infos, layouts["clip_full"] = build_clip(out_dir)
    models.update(clip_infos)
    for name in DINO_MODELS:
        models[name], layouts[name] = build_dinov2(name, out_dir)

    cases = []
    outputs = {}
    worst_out = worst_rows = 0.0
    margins = []
    for ci, (name, mname, (H, W)) in enumerate(CASES):
        info = models[mname]
        # clip_visual_native reuses clip_full_native's image: both files hold the same visual weights
        seed = 5000 + (CASES.index(("clip_full_native", "clip_full", (80, 80))) if name == "clip_visual_native" else ci)
        img32 = smooth_image(seed, H, W)
        with torch.no_grad():
            out, probs = info["forward"](img32.to(torch.float64))
            m_out, m_probs = info["mirror"](img32)
        p = info["patch"]
        gh, gw = H // p, W // p
        P = info["num_prefix"]
        T = P + gh * gw
        q = queries_for(P, gh, gw)
        rows = torch.stack([pr[0][:, q, :] for pr in probs])  # [L, h, Q, T]
        assert rows.shape == (len(probs), info["heads"], len(q), T), (name, rows.shape)
        assert torch.isfinite(out).all() and torch.isfinite(rows).all(), name
        # the second, differently written float32 forward
        e_out = (m_out.double() - out).abs().max().item()
        e_rows = max((mp.double() - pr).abs().max().item() for mp, pr in zip(m_probs, probs))
        worst_out, worst_rows = max(worst_out, e_out), max(worst_rows, e_rows)
        assert e_out < 1e-5 and e_rows < 1e-5, (name, e_out, e_rows)
        # sanity: attention neither uniform nor one-hot, outputs spread
        peak = torch.stack([pr[0].max(dim=-1).values.mean() for pr in probs])
        assert (peak > 2.0 / T).all() and (peak < 0.9).all(), (name, peak)
        spread = (out.max() - out.min()).item()
        assert spread > 0.1, (name, spread)
        outputs[name] = out
        # the fixture must tell the authors' positional resizing from plausible wrong ones
        note = ""
        if pos_resize_note(info, gh, gw, H, W)["applied"]:
            diffs = []
            for label, fwd in info["wrong"].items():
                with torch.no_grad():
                    d = (fwd(img32.to(torch.float64))[0] - out).abs().max().item()
                diffs.append(f"{label}: {d:.1e}")
                margins.append(d)
            note = "  wrong resize -> " + ", ".join(diffs)

        np.save(os.path.join(out_dir, name + ".input.npy"), img32.numpy())
        np.save(os.path.join(out_dir, name + ".logits.npy"), out.numpy().astype(np.float32))
        np.save(os.path.join(out_dir, name + ".rows.npy"), np.ascontiguousarray(rows.numpy().astype(np.float32)))
        cases.append(OrderedDict([
            ("name", name), ("model", info["path"]), ("input", name + ".input.npy"), ("grid", [gh, gw]),
            ("num_prefix", P), ("tokens", T), ("queries", q), ("logits", name + ".logits.npy"),
            ("rows", name + ".rows.npy"), ("output_kind", info["output_kind"]), ("heads", info["heads"]),
            ("mean", info["mean"]), ("std", info["std"]), ("family", info["family"]), ("arch", info["arch"]),
            ("native_grid", list(info["native"])), ("pos_resize", pos_resize_note(info, gh, gw, H, W)),
        ]))
        print(f"{name:28s} {info['family']:6s} T={T:3d} h={info['heads']} out{list(out.shape)} "
              f"[{out.min():+.3f},{out.max():+.3f}] peak {peak.min():.2f}-{peak.max():.2f} "
              f"mirror dout {e_out:.1e} drows {e_rows:.1e}{note}")

    # the same visual weights in both CLIP files give the same output
    assert torch.equal(outputs["clip_full_native"], outputs["clip_visual_native"])
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    with open(os.path.join(out_dir, "layouts.json"), "w") as f:
        json.dump(layouts, f, indent=1)
    print(f"{len(cases)} cases in {out_dir}; float32 mirrors agree to {worst_out:.1e} (outputs), "
          f"{worst_rows:.1e} (probabilities); bicubic weights match F.interpolate to {worst:.1e} "
          f"({time.time() - t0:.1f} s)")
    print(f"wrong positional resizing would change some output by at least {min(margins):.1e}")
    assert min(margins) > 1e-3
    write_image_cases(out_dir, models)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
