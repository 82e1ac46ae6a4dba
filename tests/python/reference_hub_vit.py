"""Independent float64 reference of three hub checkpoint layouts: Hugging Face ViT / DeiT, the OpenAI CLIP
visual tower, and DINOv2 (bare torch.hub state_dict, with or without registers).

Written from the authors' code (read with the search tool), NOT from attnscope's C++ sources:
  * huggingface/transformers src/transformers/models/vit/modeling_vit.py (ViTEmbeddings.interpolate_pos_encoding,
    ViTLayer, ViTModel, ViTPooler, ViTForImageClassification) and models/deit/modeling_deit.py (DeiTEmbeddings,
    DeiTForImageClassification, DeiTForImageClassificationWithTeacher);
  * openai/CLIP clip/model.py (VisionTransformer, ResidualAttentionBlock, QuickGELU, build_model) and
    mlfoundations/open_clip src/open_clip/model.py resize_pos_embed (for inputs other than the trained size);
  * facebookresearch/dinov2 dinov2/models/vision_transformer.py (DinoVisionTransformer.interpolate_pos_encoding,
    prepare_tokens_with_masks, forward_features), dinov2/layers/{block,attention,layer_scale,mlp,patch_embed}.py
    and dinov2/hub/backbones.py (hub settings).

Every forward computes in float64 from the tensors as stored (float16 weights are upcast exactly) and returns
(output [B, out], [per-layer attention probabilities [B, heads, T, T]]), tokens ordered prefix first
(HF ViT: [cls]; DeiT: [cls, distillation]; CLIP: [class]; DINOv2: [cls, registers...]) then patches row-major.

Positional-embedding resizing, exactly as each author's code does it (all through PyTorch's bicubic kernel,
re-implemented here as explicit per-axis weight matrices and checked against F.interpolate to 1e-14):
  HF ViT/DeiT  (ViTEmbeddings/DeiTEmbeddings.interpolate_pos_encoding, current main): skip when
               num_patches == num_positions and height == width (pixels); else
               F.interpolate(grid, size=(H // p, W // p), mode="bicubic", align_corners=False) (no antialias).
               Older transformers versions used scale_factor=((h0 + 0.1) / M, (w0 + 0.1) / M) instead; this
               reference follows main (size=).
  CLIP         (open_clip resize_pos_embed): F.interpolate(grid, size=(gh, gw), mode="bicubic",
               antialias=True, align_corners=False) on the patch part; the class position is kept.
               (open_clip only resizes when the token COUNT differs; this reference resizes whenever the grid
               differs from the trained square grid.)
  DINOv2       (DinoVisionTransformer.interpolate_pos_encoding): skip when npatch == N and w == h, where
               `B, nc, w, h = x.shape` so its "w" is the image HEIGHT and "h" the WIDTH; else with
               interpolate_offset != 0: F.interpolate(grid, scale_factor=((H//p + off) / M, (W//p + off) / M),
               mode="bicubic", antialias=aa) (output size floor(M * sf), kernel coordinate scale 1 / sf, NOT
               M / (H//p)); with offset 0: size=(H//p, W//p). Hub settings (dinov2/hub/backbones.py):
               dinov2_vit*14: antialias False, offset 0.1; dinov2_vit*14_reg: antialias True, offset 0.0.
Antialiased bicubic uses a = -0.5 and renormalised, truncated support (PIL-like) even when upsampling, so it
differs from plain bicubic (a = -0.75, replicate border) also for larger inputs.
"""

import json
import math
import os

import torch

LN_EPS_CLIP = 1e-5
LN_EPS_DINOV2 = 1e-6

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# --------------------------------------------------------------------------------------------
# Bicubic resampling with PyTorch's semantics (align_corners=False), written out explicitly
# --------------------------------------------------------------------------------------------
def _cubic(t, a):
    t = abs(t)
    if t <= 1.0:
        return ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    if t < 2.0:
        return ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a
    return 0.0


def bicubic_axis_weights(n_in, n_out, scale_factor=None, antialias=False):
    """[n_out, n_in] float64 matrix of one axis of F.interpolate(mode="bicubic", align_corners=False).

    The coordinate scale is 1 / scale_factor when a scale factor is given (recompute_scale_factor unset), else
    n_in / n_out (PyTorch's area_pixel_compute_scale).
    Plain: src = scale * (i + 0.5) - 0.5, taps floor(src) - 1 .. + 2 clamped to the border, Keys a = -0.75.
    Antialias: centre = scale * (i + 0.5), support = 2 * max(scale, 1), taps [trunc(centre - support + 0.5) v 0,
    trunc(centre + support + 0.5) ^ n_in), weights cubic(a = -0.5)((j - centre + 0.5) / max(scale, 1)),
    normalised to sum 1.
    """
    scale = (1.0 / scale_factor) if (scale_factor is not None and scale_factor > 0) else n_in / n_out
    w = torch.zeros(n_out, n_in, dtype=torch.float64)
    if not antialias:
        for i in range(n_out):
            src = scale * (i + 0.5) - 0.5
            idx = min(math.floor(src), n_in - 1)
            t = min(max(src - idx, 0.0), 1.0)
            for j in range(4):
                w[i, min(max(idx - 1 + j, 0), n_in - 1)] += _cubic(t + 1.0 - j, -0.75)
    else:
        support = 2.0 * scale if scale >= 1.0 else 2.0
        inv = 1.0 / scale if scale >= 1.0 else 1.0
        for i in range(n_out):
            centre = scale * (i + 0.5)
            lo = max(int(centre - support + 0.5), 0)
            hi = min(int(centre + support + 0.5), n_in)
            ws = [_cubic((j - centre + 0.5) * inv, -0.5) for j in range(lo, hi)]
            total = sum(ws)
            for j, v in zip(range(lo, hi), ws):
                w[i, j] = v / total if total != 0.0 else v
    return w


def resize_patch_pos(patch_pos, src_hw, size=None, scale_factor=None, antialias=False):
    """Resize patch position embeddings [N, C] laid out row-major on src_hw -> [gh * gw, C].

    Either size=(gh, gw), or scale_factor=(sh, sw) (output size floor(src * s), coordinate scale 1 / s).
    """
    sh, sw = src_hw
    grid = patch_pos.to(torch.float64).reshape(sh, sw, -1)
    if size is None:
        size = (math.floor(sh * scale_factor[0]), math.floor(sw * scale_factor[1]))
        fh, fw = scale_factor
    else:
        fh = fw = None
    wh = bicubic_axis_weights(sh, size[0], fh, antialias)
    ww = bicubic_axis_weights(sw, size[1], fw, antialias)
    out = torch.einsum("oh,hwc,pw->opc", wh, grid, ww)
    return out.reshape(size[0] * size[1], -1)


# --------------------------------------------------------------------------------------------
# Shared building blocks (explicit formulas, float64)
# --------------------------------------------------------------------------------------------
def _f64(t):
    return None if t is None else t.detach().to(torch.float64)


def layer_norm(x, w, b, eps):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def quick_gelu(x):
    return x * torch.sigmoid(1.702 * x)


ACTIVATIONS = {
    "gelu": gelu_erf,
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "gelu_fast": gelu_tanh,
    "quick_gelu": quick_gelu,
    "relu": torch.relu,
}


def patch_tokens(img, weight, bias, patch):
    """Conv2d(kernel = stride = patch) as unfold + matmul: [B,3,H,W] -> ([B, gh*gw, C], gh, gw).

    Rows/columns beyond gh * p, gw * p are dropped, as the strided convolution does.
    """
    B, Cin, H, W = img.shape
    gh, gw = H // patch, W // patch
    x = img[:, :, :gh * patch, :gw * patch].reshape(B, Cin, gh, patch, gw, patch)
    x = x.permute(0, 2, 4, 1, 3, 5).reshape(B, gh * gw, Cin * patch * patch)
    y = x @ weight.reshape(weight.shape[0], -1).T
    if bias is not None:
        y = y + bias
    return y, gh, gw


def softmax(s):
    s = s - s.max(dim=-1, keepdim=True).values
    e = torch.exp(s)
    return e / e.sum(dim=-1, keepdim=True)


def attention(x, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, heads):
    """Multi-head self-attention, scale d^-0.5; returns (out [B,T,C], probs [B,h,T,T])."""
    B, T, C = x.shape
    d = C // heads

    def split(t):
        return t.reshape(B, T, heads, d).permute(0, 2, 1, 3)

    q = split(linear(x, q_w, q_b))
    k = split(linear(x, k_w, k_b))
    v = split(linear(x, v_w, v_b))
    probs = softmax((q @ k.transpose(-1, -2)) * (d ** -0.5))
    ctx = (probs @ v).permute(0, 2, 1, 3).reshape(B, T, C)
    return linear(ctx, o_w, o_b), probs


def pre_norm_block(x, p, heads, eps, act):
    """x + ls1 * attn(ln1(x)); x + ls2 * fc2(act(fc1(ln2(x)))). p: dict of float64 tensors (ls1/ls2 optional)."""
    a, probs = attention(layer_norm(x, p["ln1_w"], p["ln1_b"], eps), p["q_w"], p["q_b"], p["k_w"], p["k_b"],
                         p["v_w"], p["v_b"], p["o_w"], p["o_b"], heads)
    if p.get("ls1") is not None:
        a = a * p["ls1"]
    x = x + a
    m = linear(act(linear(layer_norm(x, p["ln2_w"], p["ln2_b"], eps), p["fc1_w"], p["fc1_b"])), p["fc2_w"], p["fc2_b"])
    if p.get("ls2") is not None:
        m = m * p["ls2"]
    return x + m, probs


def _split_qkv(w, b):
    C = w.shape[0] // 3
    qb = kb = vb = None
    if b is not None:
        qb, kb, vb = b[:C], b[C:2 * C], b[2 * C:]
    return (w[:C], qb), (w[C:2 * C], kb), (w[2 * C:], vb)


def _count_layers(sd, prefix, suffix):
    idx = set()
    for k in sd:
        if k.startswith(prefix) and k.endswith(suffix):
            idx.add(int(k[len(prefix):].split(".")[0]))
    n = len(idx)
    assert idx == set(range(n)), f"non-contiguous layers under {prefix}: {sorted(idx)}"
    return n


# --------------------------------------------------------------------------------------------
# Hugging Face ViT / DeiT (model.safetensors + config.json)
# --------------------------------------------------------------------------------------------
def hf_layout(sd):
    """(base prefix, num_prefix, head kind) from the keys.

    head kind: "classifier" (ViTForImageClassification / DeiTForImageClassification), "teacher"
    (DeiTForImageClassificationWithTeacher), "pooler" (ViTModel with pooler), "none" (ViTModel without).
    """
    if "vit.embeddings.cls_token" in sd:
        base = "vit."
    elif "deit.embeddings.cls_token" in sd:
        base = "deit."
    elif "embeddings.cls_token" in sd:
        base = ""
    else:
        raise ValueError("not a Hugging Face ViT/DeiT state dict")
    num_prefix = 2 if base + "embeddings.distillation_token" in sd else 1
    if "cls_classifier.weight" in sd and "distillation_classifier.weight" in sd:
        head = "teacher"
    elif "classifier.weight" in sd:
        head = "classifier"
    elif base + "pooler.dense.weight" in sd:
        head = "pooler"
    else:
        head = "none"
    return base, num_prefix, head


def hf_position_embeddings(pos, num_prefix, H, W, patch, antialias=False, offset=0.0):
    """ViTEmbeddings / DeiTEmbeddings.interpolate_pos_encoding (transformers main). pos: [1, P + N, C].

    antialias / offset are not the authors' (False / 0): only for checking that the fixtures tell them apart
    (offset 0.1 = older transformers: scale_factor=((H//p + 0.1) / M, (W//p + 0.1) / M)).
    """
    pos = _f64(pos)
    num_positions = pos.shape[1] - num_prefix
    num_patches = (H // patch) * (W // patch)
    if num_patches == num_positions and H == W:
        return pos
    M = int(num_positions ** 0.5)
    assert M * M == num_positions, "HF position embeddings must cover a square grid"
    if offset:
        sf = ((H // patch + offset) / M, (W // patch + offset) / M)
        patch_pos = resize_patch_pos(pos[0, num_prefix:], (M, M), scale_factor=sf, antialias=antialias)
    else:
        patch_pos = resize_patch_pos(pos[0, num_prefix:], (M, M), size=(H // patch, W // patch), antialias=antialias)
    return torch.cat([pos[:, :num_prefix], patch_pos[None]], dim=1)


def hf_forward(sd, config, img, pos_antialias=False, pos_offset=0.0):
    """Hugging Face ViT/DeiT forward with interpolate_pos_encoding=True. img: [B,3,H,W].

    pos_antialias / pos_offset: leave at the defaults (the authors'); see hf_position_embeddings.
    """
    base, P, head = hf_layout(sd)
    g = lambda k: _f64(sd[k]) if k in sd else None  # noqa: E731
    e = base + "embeddings."
    patch = int(config["patch_size"])
    heads = int(config["num_attention_heads"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    act = ACTIVATIONS[config.get("hidden_act", "gelu")]
    x = img.to(torch.float64)
    B, _, H, W = x.shape
    tok, gh, gw = patch_tokens(x, g(e + "patch_embeddings.projection.weight"),
                               g(e + "patch_embeddings.projection.bias"), patch)
    C = tok.shape[-1]
    prefix = [g(e + "cls_token").expand(B, 1, C)]
    if P == 2:
        prefix.append(g(e + "distillation_token").expand(B, 1, C))
    x = torch.cat(prefix + [tok], dim=1)
    x = x + hf_position_embeddings(sd[e + "position_embeddings"], P, H, W, patch, pos_antialias, pos_offset)
    probs_all = []
    L = _count_layers(sd, base + "encoder.layer.", ".layernorm_before.weight")
    for i in range(L):
        lp = f"{base}encoder.layer.{i}."
        a = lp + "attention.attention."
        p = {
            "ln1_w": g(lp + "layernorm_before.weight"), "ln1_b": g(lp + "layernorm_before.bias"),
            "q_w": g(a + "query.weight"), "q_b": g(a + "query.bias"),
            "k_w": g(a + "key.weight"), "k_b": g(a + "key.bias"),
            "v_w": g(a + "value.weight"), "v_b": g(a + "value.bias"),
            "o_w": g(lp + "attention.output.dense.weight"), "o_b": g(lp + "attention.output.dense.bias"),
            "ln2_w": g(lp + "layernorm_after.weight"), "ln2_b": g(lp + "layernorm_after.bias"),
            "fc1_w": g(lp + "intermediate.dense.weight"), "fc1_b": g(lp + "intermediate.dense.bias"),
            "fc2_w": g(lp + "output.dense.weight"), "fc2_b": g(lp + "output.dense.bias"),
        }
        x, probs = pre_norm_block(x, p, heads, eps, act)
        probs_all.append(probs)
    h = layer_norm(x, g(base + "layernorm.weight"), g(base + "layernorm.bias"), eps)
    if head == "teacher":
        out = (linear(h[:, 0], g("cls_classifier.weight"), g("cls_classifier.bias")) +
               linear(h[:, 1], g("distillation_classifier.weight"), g("distillation_classifier.bias"))) / 2
    elif head == "classifier":
        out = linear(h[:, 0], g("classifier.weight"), g("classifier.bias"))
    elif head == "pooler":
        out = torch.tanh(linear(h[:, 0], g(base + "pooler.dense.weight"), g(base + "pooler.dense.bias")))
    else:
        out = h[:, 0]
    return out, probs_all


def load_hf_folder(folder):
    """(state dict, config) from a transformers folder (model.safetensors + config.json)."""
    import safetensors_io  # local module (tests/python)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    return safetensors_io.load_file(os.path.join(folder, "model.safetensors")), config


# --------------------------------------------------------------------------------------------
# OpenAI CLIP visual tower
# --------------------------------------------------------------------------------------------
def clip_visual_state(sd):
    """The visual tower's tensors without the "visual." prefix (a full CLIP state dict or the tower alone)."""
    if "visual.conv1.weight" in sd:
        return {k[len("visual."):]: v for k, v in sd.items() if k.startswith("visual.")}
    if "conv1.weight" in sd:
        return dict(sd)
    raise ValueError("not an OpenAI CLIP (ViT) visual state dict")


def clip_position_embeddings(pos, gh, gw, antialias=True):
    """open_clip resize_pos_embed (bicubic, antialias=True, align_corners=False). pos: [1 + M*M, C]."""
    pos = _f64(pos)
    n = pos.shape[0] - 1
    M = int(round(n ** 0.5))
    assert M * M == n
    if (gh, gw) == (M, M):
        return pos
    patch_pos = resize_patch_pos(pos[1:], (M, M), size=(gh, gw), antialias=antialias)
    return torch.cat([pos[:1], patch_pos], dim=0)


def clip_forward(sd, img, heads=None, pos_antialias=True, act=None):
    """OpenAI CLIP VisionTransformer.forward: ln_post(x[:, 0]) @ proj. heads default width // 64 (build_model).

    pos_antialias: leave True (open_clip's default); False only to check that the fixtures tell them apart.
    act: QuickGELU (OpenAI's) by default; open_clip's towers without quick_gelu in their config run nn.GELU.
    """
    act = act or quick_gelu
    v = clip_visual_state(sd)
    g = lambda k: _f64(v[k]) if k in v else None  # noqa: E731
    conv = g("conv1.weight")
    width, patch = conv.shape[0], conv.shape[-1]
    heads = heads or width // 64
    x = img.to(torch.float64)
    B = x.shape[0]
    tok, gh, gw = patch_tokens(x, conv, None, patch)  # conv1 has no bias
    x = torch.cat([g("class_embedding").expand(B, 1, width), tok], dim=1)
    x = x + clip_position_embeddings(v["positional_embedding"], gh, gw, pos_antialias)
    x = layer_norm(x, g("ln_pre.weight"), g("ln_pre.bias"), LN_EPS_CLIP)
    probs_all = []
    L = _count_layers(v, "transformer.resblocks.", ".attn.in_proj_weight")
    for i in range(L):
        bp = f"transformer.resblocks.{i}."
        (qw, qb), (kw, kb), (vw, vb) = _split_qkv(g(bp + "attn.in_proj_weight"), g(bp + "attn.in_proj_bias"))
        p = {
            "ln1_w": g(bp + "ln_1.weight"), "ln1_b": g(bp + "ln_1.bias"),
            "q_w": qw, "q_b": qb, "k_w": kw, "k_b": kb, "v_w": vw, "v_b": vb,
            "o_w": g(bp + "attn.out_proj.weight"), "o_b": g(bp + "attn.out_proj.bias"),
            "ln2_w": g(bp + "ln_2.weight"), "ln2_b": g(bp + "ln_2.bias"),
            "fc1_w": g(bp + "mlp.c_fc.weight"), "fc1_b": g(bp + "mlp.c_fc.bias"),
            "fc2_w": g(bp + "mlp.c_proj.weight"), "fc2_b": g(bp + "mlp.c_proj.bias"),
            # open_clip's ResidualAttentionBlock: x + ls_1(attn(ln_1(x))), x + ls_2(mlp(ln_2(x)))
            "ls1": g(bp + "ls_1.gamma"), "ls2": g(bp + "ls_2.gamma"),
        }
        x, probs = pre_norm_block(x, p, heads, LN_EPS_CLIP, act)
        probs_all.append(probs)
    out = layer_norm(x[:, 0], g("ln_post.weight"), g("ln_post.bias"), LN_EPS_CLIP)
    if "proj" in v:
        out = out @ g("proj")
    return out, probs_all


# --------------------------------------------------------------------------------------------
# DINOv2 (bare torch.hub state dict)
# --------------------------------------------------------------------------------------------
def dinov2_hub_settings(sd):
    """(interpolate_antialias, interpolate_offset) of the hub constructor that matches the file."""
    if "register_tokens" in sd:
        return True, 0.0  # dinov2_vit*14_reg
    return False, 0.1  # dinov2_vit*14


def dinov2_position_embeddings(pos, H, W, patch, antialias, offset):
    """DinoVisionTransformer.interpolate_pos_encoding. pos: [1, 1 + M*M, C]; H, W: the image's rows, columns."""
    pos = _f64(pos)
    N = pos.shape[1] - 1
    rows, cols = H // patch, W // patch  # the authors' w0 (from x.shape[2]) and h0 (from x.shape[3])
    if rows * cols == N and H == W:
        return pos
    M = int(math.sqrt(N))
    assert M * M == N
    if offset:
        patch_pos = resize_patch_pos(pos[0, 1:], (M, M), scale_factor=((rows + offset) / M, (cols + offset) / M),
                                     antialias=antialias)
    else:
        patch_pos = resize_patch_pos(pos[0, 1:], (M, M), size=(rows, cols), antialias=antialias)
    assert patch_pos.shape[0] == rows * cols
    return torch.cat([pos[:, :1], patch_pos[None]], dim=1)


def dinov2_forward(sd, img, heads=None, antialias=None, offset=None):
    """DINOv2 forward (eval): norm(x)[:, 0] with x = blocks([cls + pos0, registers, patches + pos]).

    heads default C // 64 (every released DINOv2 backbone has 64-wide heads; the file does not say).
    antialias / offset default to the hub constructor's settings (see dinov2_hub_settings).
    """
    g = lambda k: _f64(sd[k]) if k in sd else None  # noqa: E731
    aa_default, off_default = dinov2_hub_settings(sd)
    antialias = aa_default if antialias is None else antialias
    offset = off_default if offset is None else offset
    w = g("patch_embed.proj.weight")
    C, patch = w.shape[0], w.shape[-1]
    heads = heads or C // 64
    x = img.to(torch.float64)
    B, _, H, W = x.shape
    assert H % patch == 0 and W % patch == 0, "DINOv2's PatchEmbed asserts H, W multiples of the patch"
    tok, gh, gw = patch_tokens(x, w, g("patch_embed.proj.bias"), patch)
    x = torch.cat([g("cls_token").expand(B, 1, C), tok], dim=1)
    x = x + dinov2_position_embeddings(sd["pos_embed"], H, W, patch, antialias, offset)
    if "register_tokens" in sd:
        reg = g("register_tokens")
        x = torch.cat([x[:, :1], reg.expand(B, reg.shape[1], C), x[:, 1:]], dim=1)
    probs_all = []
    L = _count_layers(sd, "blocks.", ".norm1.weight")
    for i in range(L):
        bp = f"blocks.{i}."
        (qw, qb), (kw, kb), (vw, vb) = _split_qkv(g(bp + "attn.qkv.weight"), g(bp + "attn.qkv.bias"))
        p = {
            "ln1_w": g(bp + "norm1.weight"), "ln1_b": g(bp + "norm1.bias"),
            "q_w": qw, "q_b": qb, "k_w": kw, "k_b": kb, "v_w": vw, "v_b": vb,
            "o_w": g(bp + "attn.proj.weight"), "o_b": g(bp + "attn.proj.bias"),
            "ls1": g(bp + "ls1.gamma"), "ls2": g(bp + "ls2.gamma"),
            "ln2_w": g(bp + "norm2.weight"), "ln2_b": g(bp + "norm2.bias"),
            "fc1_w": g(bp + "mlp.fc1.weight"), "fc1_b": g(bp + "mlp.fc1.bias"),
            "fc2_w": g(bp + "mlp.fc2.weight"), "fc2_b": g(bp + "mlp.fc2.bias"),
        }
        x, probs = pre_norm_block(x, p, heads, LN_EPS_DINOV2, gelu_erf)
        probs_all.append(probs)
    out = layer_norm(x, g("norm.weight"), g("norm.bias"), LN_EPS_DINOV2)[:, 0]
    return out, probs_all


def dinov2_num_prefix(sd):
    return 1 + (sd["register_tokens"].shape[1] if "register_tokens" in sd else 0)
