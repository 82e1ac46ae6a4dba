"""Independent float64 reference of timm's VisionTransformer and Eva classes with the switches the 2026
backbones use: DINOv3 (rotary positions 'dinov3', storage tokens, layer scale, SwiGLU), EVA-02 (axial
rotary positions rescaled to the pretraining grid, q_bias / v_bias or q_proj / k_proj / v_proj, packed or
separate SwiGLU with its inner norm), Perception Encoder (axial rotary with offset and xy order, norm_pre,
attention-pool head over every token), SigLIP (no class token, attention-pool head over the patches) and
timm's CLIP towers (their registered LayerNorm eps), BEiT (a relative position bias per block), CaiT
(talking heads, then class-attention blocks).

Written from timm's code (huggingface/pytorch-image-models, read with the search tool), NOT from
attnscope's C++ sources:
  * timm/models/eva.py: EvaAttention.forward (q_bias, zero k bias, v_bias; q_proj/k_proj/v_proj; q_norm,
    k_norm; rope on tokens past num_prefix_tokens; attn.norm before proj), EvaBlock.forward (gamma_1,
    gamma_2), Eva.__init__ (activate_fc_norm = global_pool == 'avg' unless use_fc_norm; post norm = not
    fc_norm), Eva._pos_embed, Eva.pool (the attention pool sees every token), Eva.forward_head;
  * timm/layers/attention.py AttentionRope (PE: qkv with its own bias);
  * timm/models/beit.py: gen_relative_position_index, Attention._get_rel_pos_bias (the table indexed, added
    to the scaled scores), Beit.forward_head (avg of the patches, fc_norm);
  * timm/models/vision_transformer.py: VisionTransformer.pool (the attention pool sees the patches only),
    the norm / fc_norm rules, forward_head;
  * timm/layers/pos_embed_sincos.py: freq_bands, build_fourier_pos_embed (in_pixels=False, ref_feat_shape
    rescale t / f * r, grid_indexing 'xy' swaps the shapes), build_rotary_pos_embed (repeat_interleave),
    rot / rope_rotate_half / apply_rot_embed_cat, make_coords_dinov3 and RotaryEmbeddingDinoV3 (periods
    base ** (2 i / (d / 2)), angles 2 pi c / period, tiled);
  * timm/models/cait.py: TalkingHeadAttn.forward (q scaled, proj_l over the heads' scores, softmax,
    proj_w over the probabilities, both on the permuted head axis), LayerScaleBlock (gamma_1, gamma_2),
    ClassAttn.forward (q from x[:, 0] only, k and v from every token), LayerScaleBlockClassAttn (u =
    cat(x_cls, x); only x_cls is updated), Cait.forward_features (x + pos_embed with no class slot, the
    blocks, cls_token joins at blocks_token_only, cat, norm) and forward_head (x[:, 0] or the patches' mean);
  * timm/layers/mlp.py: Mlp (norm after the activation), GluMlp (fc1 chunked, act(x1) * x2), SwiGLU
    (act(fc1_g) * fc1_x, norm, fc2); timm/layers/attention_pool.py AttentionPoolLatent (one latent, q, kv,
    softmax, proj, x + mlp(norm(x)), token 0).

Every forward computes in float64 from float64 copies of the state dict and returns (output [B, out],
[per-layer attention probabilities [B, heads, T, T]]), tokens ordered class, registers, patches row-major.
"""

import math

import torch

import reference_hub_vit as hub


def f64(sd):
    return {k: v.detach().to(torch.float64) for k, v in sd.items()}


# ------------------------------------------------------------------------------------------------
# Rotary tables, [grid_h * grid_w, 2 * head_dim]: sin then cos
# ------------------------------------------------------------------------------------------------
def axial_rope_table(grid, head_dim, temperature=10000.0, grid_offset=0.0, xy=False, ref=None):
    """timm RotaryEmbeddingCat with in_pixels=False (EVA-02, PE)."""
    num_bands = head_dim // 4
    bands = 1.0 / (temperature ** (torch.arange(num_bands, dtype=torch.float64) / num_bands))
    shape = [grid[0], grid[1]]
    ref_shape = None if ref is None else [ref[0], ref[1]]
    if xy:
        shape = [shape[1], shape[0]]
        ref_shape = None if ref_shape is None else [ref_shape[1], ref_shape[0]]
    axes = [torch.arange(s, dtype=torch.float64) + grid_offset for s in shape]
    if ref_shape is not None:
        axes = [t / s * r for t, s, r in zip(axes, shape, ref_shape)]
    grid_t = torch.stack(torch.meshgrid(axes[0], axes[1], indexing="xy" if xy else "ij"), dim=-1)
    pos = grid_t.unsqueeze(-1) * bands  # [H, W, 2, bands]
    n = grid[0] * grid[1]
    sin = pos.sin().reshape(n, -1).repeat_interleave(2, -1)
    cos = pos.cos().reshape(n, -1).repeat_interleave(2, -1)
    return torch.cat([sin, cos], -1)


def dinov3_rope_table(grid, head_dim, temperature=100.0):
    """timm RotaryEmbeddingDinoV3 ('separate' normalisation, no augmentation, tiled layout)."""
    num_bands = head_dim // 4
    periods = temperature ** (2.0 * torch.arange(num_bands, dtype=torch.float64) / (head_dim // 2))
    H, W = grid
    ch = torch.arange(0.5, H, dtype=torch.float64) / H
    cw = torch.arange(0.5, W, dtype=torch.float64) / W
    coords = torch.stack(torch.meshgrid(ch, cw, indexing="ij"), dim=-1).flatten(0, 1)
    coords = 2.0 * coords - 1.0
    angles = (2 * math.pi * coords[:, :, None] / periods[None, None, :]).flatten(1)
    angles = angles.tile(2)
    return torch.cat([angles.sin(), angles.cos()], -1)


def rotate_pairs(x):
    return torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)


def rotate_halves(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x, table, half):
    sin, cos = table.chunk(2, -1)
    return x * cos + (rotate_halves(x) if half else rotate_pairs(x)) * sin


# ------------------------------------------------------------------------------------------------
# Blocks
# ------------------------------------------------------------------------------------------------
def activation(name):
    return {"gelu": hub.gelu_erf, "gelu_tanh": hub.gelu_tanh, "quick_gelu": hub.quick_gelu,
            "silu": lambda t: t * torch.sigmoid(t)}[name]


def beit_relative_position_index(grid):
    """timm beit.py gen_relative_position_index, for a square grid: [(g*g + 1), (g*g + 1)]."""
    g = grid
    distances = (2 * g - 1) * (2 * g - 1) + 3
    coords = torch.stack(torch.meshgrid(torch.arange(g), torch.arange(g), indexing="ij")).flatten(1)
    relative = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
    relative[:, :, 0] += g - 1
    relative[:, :, 1] += g - 1
    relative[:, :, 0] *= 2 * g - 1
    index = torch.zeros((g * g + 1,) * 2, dtype=torch.long)
    index[1:, 1:] = relative.sum(-1)
    index[0, 0:] = distances - 3
    index[0:, 0] = distances - 2
    index[0, 0] = distances - 1
    return index


def attention(x, p, pre, heads, eps, rope, prefix, rope_half):
    B, T, C = x.shape
    d = C // heads
    if pre + "qkv.weight" in p:
        bias = p.get(pre + "qkv.bias")
        if pre + "q_bias" in p:
            bias = torch.cat([p[pre + "q_bias"], torch.zeros_like(p[pre + "q_bias"]), p[pre + "v_bias"]])
        qkv = hub.linear(x, p[pre + "qkv.weight"], bias)
        q, k, v = qkv.reshape(B, T, 3, heads, d).permute(2, 0, 3, 1, 4).unbind(0)
    else:
        def proj(name):
            return hub.linear(x, p[pre + name + ".weight"], p.get(pre + name + ".bias"))
        q, k, v = (proj(n).reshape(B, T, heads, d).transpose(1, 2) for n in ("q_proj", "k_proj", "v_proj"))
    if pre + "q_norm.weight" in p:
        q = hub.layer_norm(q, p[pre + "q_norm.weight"], p[pre + "q_norm.bias"], eps)
        k = hub.layer_norm(k, p[pre + "k_norm.weight"], p[pre + "k_norm.bias"], eps)
    if rope is not None:
        q = torch.cat([q[:, :, :prefix], apply_rope(q[:, :, prefix:], rope, rope_half)], dim=2)
        k = torch.cat([k[:, :, :prefix], apply_rope(k[:, :, prefix:], rope, rope_half)], dim=2)
    scores = (q * d ** -0.5) @ k.transpose(-2, -1)
    if pre + "relative_position_bias_table" in p:  # BEiT: Attention._get_rel_pos_bias
        table = p[pre + "relative_position_bias_table"]
        grid = int(round(((table.shape[0] - 3) ** 0.5 + 1) / 2))
        index = beit_relative_position_index(grid)
        scores = scores + table[index.view(-1)].view(T, T, -1).permute(2, 0, 1).unsqueeze(0)
    probs = hub.softmax(scores)
    out = (probs @ v).transpose(1, 2).reshape(B, T, C)
    if pre + "norm.weight" in p:
        out = hub.layer_norm(out, p[pre + "norm.weight"], p[pre + "norm.bias"], eps)
    return hub.linear(out, p[pre + "proj.weight"], p[pre + "proj.bias"]), probs


def mlp(x, p, pre, act, eps):
    if pre + "fc1_g.weight" in p:  # SwiGLU
        h = activation("silu")(hub.linear(x, p[pre + "fc1_g.weight"], p[pre + "fc1_g.bias"])) * \
            hub.linear(x, p[pre + "fc1_x.weight"], p[pre + "fc1_x.bias"])
    else:
        h = hub.linear(x, p[pre + "fc1.weight"], p[pre + "fc1.bias"])
        if h.shape[-1] == 2 * p[pre + "fc2.weight"].shape[1]:  # GluMlp, gate first
            x1, x2 = h.chunk(2, dim=-1)
            h = activation("silu")(x1) * x2
        else:
            h = activation(act)(h)
    if pre + "norm.weight" in p:
        h = hub.layer_norm(h, p[pre + "norm.weight"], p[pre + "norm.bias"], eps)
    return hub.linear(h, p[pre + "fc2.weight"], p[pre + "fc2.bias"])


def layer_scale(p, key):
    return p.get(key)


def attention_pool(x, p, heads, eps, act):
    """timm AttentionPoolLatent, latent_len 1, pool 'token'."""
    B, N, C = x.shape
    d = C // heads
    q = hub.linear(p["attn_pool.latent"].expand(B, -1, -1), p["attn_pool.q.weight"], p["attn_pool.q.bias"])
    q = q.reshape(B, 1, heads, d).transpose(1, 2)
    kv = hub.linear(x, p["attn_pool.kv.weight"], p["attn_pool.kv.bias"]).reshape(B, N, 2, heads, d)
    k, v = kv.permute(2, 0, 3, 1, 4).unbind(0)
    probs = hub.softmax((q * d ** -0.5) @ k.transpose(-2, -1))
    out = (probs @ v).transpose(1, 2).reshape(B, 1, C)
    out = hub.linear(out, p["attn_pool.proj.weight"], p["attn_pool.proj.bias"])
    normed = hub.layer_norm(out, p["attn_pool.norm.weight"], p["attn_pool.norm.bias"], eps)
    h = activation(act)(hub.linear(normed, p["attn_pool.mlp.fc1.weight"], p["attn_pool.mlp.fc1.bias"]))
    out = out + hub.linear(h, p["attn_pool.mlp.fc2.weight"], p["attn_pool.mlp.fc2.bias"])
    return out[:, 0], probs[:, :, 0]


# ------------------------------------------------------------------------------------------------
# The model
# ------------------------------------------------------------------------------------------------
def forward(sd, img, cfg):
    """cfg: patch, heads, eps, act, timm_class ('Eva' | 'VisionTransformer'), global_pool ('token' | 'avg' |
    'map'), pos_grid (trained pos_embed grid), rope None or {kind 'axial' | 'dinov3', temperature,
    grid_offset, xy, ref, half}, attn_pool_heads. Returns (output, probabilities per layer, pool probs)."""
    p = f64(sd)
    eps, heads, act = cfg["eps"], cfg["heads"], cfg["act"]
    x, gh, gw = hub.patch_tokens(img.to(torch.float64), p["patch_embed.proj.weight"], p.get("patch_embed.proj.bias"),
                                 cfg["patch"])
    B, _, C = x.shape
    prefix = []
    if "cls_token" in p:
        prefix.append(p["cls_token"].expand(B, -1, -1))
    if "reg_token" in p:
        prefix.append(p["reg_token"].expand(B, -1, -1))
    n_prefix = sum(t.shape[1] for t in prefix)
    if "pos_embed" in p:
        pos = p["pos_embed"][0]
        pos_prefix = pos.shape[0] - cfg["pos_grid"][0] * cfg["pos_grid"][1]
        patch_pos = pos[pos_prefix:]
        if (gh, gw) != tuple(cfg["pos_grid"]):  # timm resample_abs_pos_embed: bicubic, antialiased
            patch_pos = hub.resize_patch_pos(patch_pos, cfg["pos_grid"], size=(gh, gw), antialias=True)
        if pos_prefix == 0:
            x = torch.cat(prefix + [x + patch_pos], dim=1)
        else:
            x = torch.cat(prefix + [x], dim=1) + torch.cat([pos[:pos_prefix], patch_pos])
    else:
        x = torch.cat(prefix + [x], dim=1)
    if "norm_pre.weight" in p:
        x = hub.layer_norm(x, p["norm_pre.weight"], p["norm_pre.bias"], eps)
    rope, half = None, False
    if cfg.get("rope"):
        r = cfg["rope"]
        d = C // heads
        if r["kind"] == "dinov3":
            rope = dinov3_rope_table((gh, gw), d, r["temperature"])
        else:
            rope = axial_rope_table((gh, gw), d, r["temperature"], r["grid_offset"], r["xy"], r.get("ref"))
        half = r["half"]
    probs_all = []
    depth = 0
    while f"blocks.{depth}.norm1.weight" in p:
        depth += 1
    for i in range(depth):
        pre = f"blocks.{i}."
        a, probs = attention(hub.layer_norm(x, p[pre + "norm1.weight"], p[pre + "norm1.bias"], eps), p, pre + "attn.",
                             heads, eps, rope, n_prefix, half)
        probs_all.append(probs)
        g1 = p.get(pre + "gamma_1", p.get(pre + "ls1.gamma"))
        x = x + (a if g1 is None else g1 * a)
        m = mlp(hub.layer_norm(x, p[pre + "norm2.weight"], p[pre + "norm2.bias"], eps), p, pre + "mlp.", act, eps)
        g2 = p.get(pre + "gamma_2", p.get(pre + "ls2.gamma"))
        x = x + (m if g2 is None else g2 * m)
    if "norm.weight" in p:
        x = hub.layer_norm(x, p["norm.weight"], p["norm.bias"], eps)
    pool_probs = None
    if cfg["global_pool"] == "map":
        tokens = x if cfg["timm_class"] == "Eva" else x[:, n_prefix:]
        pool_act = "gelu" if cfg["timm_class"] == "Eva" else act
        x, pool_probs = attention_pool(tokens, p, cfg["attn_pool_heads"], eps, pool_act)
    elif cfg["global_pool"] == "avg":
        x = x[:, n_prefix:].mean(1)
    else:
        x = x[:, 0]
    if "fc_norm.weight" in p:
        x = hub.layer_norm(x, p["fc_norm.weight"], p["fc_norm.bias"], eps)
    if "head.weight" in p:
        x = hub.linear(x, p["head.weight"], p.get("head.bias"))
    return x, probs_all, pool_probs


# ------------------------------------------------------------------------------------------------
# The same models in their authors' own layouts, each written from that code
# ------------------------------------------------------------------------------------------------
def forward_hf_dinov3(sd, img, heads, eps, act="gelu", theta=100.0):
    """transformers models/dinov3_vit/modeling_dinov3_vit.py DINOv3ViTModel: pooler_output (the normed class
    token). Rope: inv_freq = 1 / theta ** arange(0, 1, 4 / head_dim), angles 2 pi c * inv_freq, tiled, halves
    rotated; q/k/v_proj (no key bias), o_proj, layer_scale{1,2}.lambda1, mlp up/down or gate/up/down."""
    p = f64(sd)
    w = p["embeddings.patch_embeddings.weight"]
    x, gh, gw = hub.patch_tokens(img.to(torch.float64), w, p.get("embeddings.patch_embeddings.bias"), w.shape[-1])
    B, _, C = x.shape
    x = torch.cat([p["embeddings.cls_token"].expand(B, -1, -1), p["embeddings.register_tokens"].expand(B, -1, -1), x],
                  dim=1)
    d = C // heads
    inv_freq = 1 / theta ** torch.arange(0, 1, 4 / d, dtype=torch.float64)
    ch = torch.arange(0.5, gh, dtype=torch.float64) / gh
    cw = torch.arange(0.5, gw, dtype=torch.float64) / gw
    coords = 2.0 * torch.stack(torch.meshgrid(ch, cw, indexing="ij"), dim=-1).flatten(0, 1) - 1.0
    angles = (2 * math.pi * coords[:, :, None] * inv_freq[None, None, :]).flatten(1, 2).tile(2)
    cos, sin = angles.cos(), angles.sin()
    n_patches = gh * gw
    probs_all = []
    i = 0
    while f"layer.{i}.norm1.weight" in p:
        pre = f"layer.{i}."
        h = hub.layer_norm(x, p[pre + "norm1.weight"], p[pre + "norm1.bias"], eps)

        def proj(name):
            return hub.linear(h, p[pre + "attention." + name + ".weight"], p.get(pre + "attention." + name + ".bias"))
        T = h.shape[1]
        q, k, v = (proj(n).view(B, T, heads, d).transpose(1, 2) for n in ("q_proj", "k_proj", "v_proj"))
        pre_n = T - n_patches
        q = torch.cat([q[:, :, :pre_n], q[:, :, pre_n:] * cos + rotate_halves(q[:, :, pre_n:]) * sin], dim=2)
        k = torch.cat([k[:, :, :pre_n], k[:, :, pre_n:] * cos + rotate_halves(k[:, :, pre_n:]) * sin], dim=2)
        probs = hub.softmax((q @ k.transpose(-1, -2)) * d ** -0.5)
        probs_all.append(probs)
        a = (probs @ v).transpose(1, 2).reshape(B, T, C)
        a = hub.linear(a, p[pre + "attention.o_proj.weight"], p[pre + "attention.o_proj.bias"])
        x = x + a * p[pre + "layer_scale1.lambda1"]
        h = hub.layer_norm(x, p[pre + "norm2.weight"], p[pre + "norm2.bias"], eps)
        if pre + "mlp.gate_proj.weight" in p:
            g = hub.linear(h, p[pre + "mlp.gate_proj.weight"], p[pre + "mlp.gate_proj.bias"])
            u = hub.linear(h, p[pre + "mlp.up_proj.weight"], p[pre + "mlp.up_proj.bias"])
            m = activation(act)(g) * u
        else:
            m = activation(act)(hub.linear(h, p[pre + "mlp.up_proj.weight"], p[pre + "mlp.up_proj.bias"]))
        m = hub.linear(m, p[pre + "mlp.down_proj.weight"], p[pre + "mlp.down_proj.bias"])
        x = x + m * p[pre + "layer_scale2.lambda1"]
        i += 1
    x = hub.layer_norm(x, p["norm.weight"], p["norm.bias"], eps)
    return x[:, 0], probs_all


def forward_hf_siglip(sd, img, heads, eps, act="gelu_tanh"):
    """transformers models/siglip/modeling_siglip.py SiglipVisionTransformer: pooler_output = head(post_layernorm(
    encoder(patch_embedding + position_embedding))); the head is nn.MultiheadAttention(probe, x, x), then
    x + mlp(layernorm(x)), token 0. No class token."""
    p = f64({k: v for k, v in sd.items() if k.startswith("vision_model.")})
    p = {k[len("vision_model."):]: v for k, v in p.items()}
    w = p["embeddings.patch_embedding.weight"]
    x, gh, gw = hub.patch_tokens(img.to(torch.float64), w, p["embeddings.patch_embedding.bias"], w.shape[-1])
    B, T, C = x.shape
    x = x + p["embeddings.position_embedding.weight"]
    d = C // heads
    probs_all = []
    i = 0
    while f"encoder.layers.{i}.layer_norm1.weight" in p:
        pre = f"encoder.layers.{i}."
        h = hub.layer_norm(x, p[pre + "layer_norm1.weight"], p[pre + "layer_norm1.bias"], eps)
        a, probs = hub.attention(h, p[pre + "self_attn.q_proj.weight"], p[pre + "self_attn.q_proj.bias"],
                                 p[pre + "self_attn.k_proj.weight"], p[pre + "self_attn.k_proj.bias"],
                                 p[pre + "self_attn.v_proj.weight"], p[pre + "self_attn.v_proj.bias"],
                                 p[pre + "self_attn.out_proj.weight"], p[pre + "self_attn.out_proj.bias"], heads)
        probs_all.append(probs)
        x = x + a
        h = hub.layer_norm(x, p[pre + "layer_norm2.weight"], p[pre + "layer_norm2.bias"], eps)
        h = activation(act)(hub.linear(h, p[pre + "mlp.fc1.weight"], p[pre + "mlp.fc1.bias"]))
        x = x + hub.linear(h, p[pre + "mlp.fc2.weight"], p[pre + "mlp.fc2.bias"])
        i += 1
    x = hub.layer_norm(x, p["post_layernorm.weight"], p["post_layernorm.bias"], eps)
    w_in, b_in = p["head.attention.in_proj_weight"], p["head.attention.in_proj_bias"]
    probe = p["head.probe"].expand(B, -1, -1)
    q = hub.linear(probe, w_in[:C], b_in[:C]).view(B, 1, heads, d).transpose(1, 2)
    k = hub.linear(x, w_in[C:2 * C], b_in[C:2 * C]).view(B, T, heads, d).transpose(1, 2)
    v = hub.linear(x, w_in[2 * C:], b_in[2 * C:]).view(B, T, heads, d).transpose(1, 2)
    pool = hub.softmax((q @ k.transpose(-1, -2)) * d ** -0.5)
    out = (pool @ v).transpose(1, 2).reshape(B, 1, C)
    out = hub.linear(out, p["head.attention.out_proj.weight"], p["head.attention.out_proj.bias"])
    h = hub.layer_norm(out, p["head.layernorm.weight"], p["head.layernorm.bias"], eps)
    h = activation(act)(hub.linear(h, p["head.mlp.fc1.weight"], p["head.mlp.fc1.bias"]))
    out = out + hub.linear(h, p["head.mlp.fc2.weight"], p["head.mlp.fc2.bias"])
    return out[:, 0], probs_all, pool[:, :, 0]


def forward_meta_dinov3(sd, img, heads, eps=1e-5):
    """facebookresearch/dinov3 DinoVisionTransformer.forward (is_training=False): head(x_norm_clstoken), head an
    Identity. RopePositionEmbedding with the loaded `periods` buffer (in the dtype the file has, computed in
    float32 as the hub's pos_embed_rope_dtype fp32), LinearKMaskedBias (bias * bias_mask), SwiGLUFFN (w1, w2, w3)
    or Mlp (fc1, fc2), LayerScale ls1/ls2.gamma."""
    p = f64({k: v for k, v in sd.items()})
    periods = p["rope_embed.periods"]
    w = p["patch_embed.proj.weight"]
    x, gh, gw = hub.patch_tokens(img.to(torch.float64), w, p["patch_embed.proj.bias"], w.shape[-1])
    B, _, C = x.shape
    x = torch.cat([p["cls_token"].expand(B, -1, -1), p["storage_tokens"].expand(B, -1, -1), x], dim=1)
    d = C // heads
    ch = torch.arange(0.5, gh, dtype=torch.float64) / gh
    cw = torch.arange(0.5, gw, dtype=torch.float64) / gw
    coords = 2.0 * torch.stack(torch.meshgrid(ch, cw, indexing="ij"), dim=-1).flatten(0, 1) - 1.0
    angles = (2 * math.pi * coords[:, :, None] / periods[None, None, :]).flatten(1, 2).tile(2)
    cos, sin = angles.cos(), angles.sin()
    probs_all = []
    i = 0
    while f"blocks.{i}.norm1.weight" in p:
        pre = f"blocks.{i}."
        h = hub.layer_norm(x, p[pre + "norm1.weight"], p[pre + "norm1.bias"], eps)
        bias = p[pre + "attn.qkv.bias"] * p[pre + "attn.qkv.bias_mask"]
        T = h.shape[1]
        q, k, v = hub.linear(h, p[pre + "attn.qkv.weight"], bias).reshape(B, T, 3, heads, d).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        n = T - gh * gw
        q = torch.cat([q[:, :, :n], q[:, :, n:] * cos + rotate_halves(q[:, :, n:]) * sin], dim=2)
        k = torch.cat([k[:, :, :n], k[:, :, n:] * cos + rotate_halves(k[:, :, n:]) * sin], dim=2)
        probs = hub.softmax((q @ k.transpose(-1, -2)) * d ** -0.5)
        probs_all.append(probs)
        a = hub.linear((probs @ v).transpose(1, 2).reshape(B, T, C), p[pre + "attn.proj.weight"],
                       p[pre + "attn.proj.bias"])
        x = x + a * p[pre + "ls1.gamma"]
        h = hub.layer_norm(x, p[pre + "norm2.weight"], p[pre + "norm2.bias"], eps)
        if pre + "mlp.w1.weight" in p:
            m = activation("silu")(hub.linear(h, p[pre + "mlp.w1.weight"], p[pre + "mlp.w1.bias"])) * \
                hub.linear(h, p[pre + "mlp.w2.weight"], p[pre + "mlp.w2.bias"])
            m = hub.linear(m, p[pre + "mlp.w3.weight"], p[pre + "mlp.w3.bias"])
        else:
            m = hub.linear(hub.gelu_erf(hub.linear(h, p[pre + "mlp.fc1.weight"], p[pre + "mlp.fc1.bias"])),
                           p[pre + "mlp.fc2.weight"], p[pre + "mlp.fc2.bias"])
        x = x + m * p[pre + "ls2.gamma"]
        i += 1
    x = hub.layer_norm(x, p["norm.weight"], p["norm.bias"], eps)
    return x[:, 0], probs_all


# ------------------------------------------------------------------------------------------------
# CaiT (timm/models/cait.py)
# ------------------------------------------------------------------------------------------------
def talking_heads_attention(x, p, pre, heads):
    B, T, C = x.shape
    d = C // heads
    qkv = hub.linear(x, p[pre + "qkv.weight"], p.get(pre + "qkv.bias")).reshape(B, T, 3, heads, d)
    qkv = qkv.permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0] * d ** -0.5, qkv[1], qkv[2]
    attn = q @ k.transpose(-2, -1)
    attn = hub.linear(attn.permute(0, 2, 3, 1), p[pre + "proj_l.weight"], p[pre + "proj_l.bias"]).permute(0, 3, 1, 2)
    attn = hub.softmax(attn)
    attn = hub.linear(attn.permute(0, 2, 3, 1), p[pre + "proj_w.weight"], p[pre + "proj_w.bias"]).permute(0, 3, 1, 2)
    out = (attn @ v).transpose(1, 2).reshape(B, T, C)
    return hub.linear(out, p[pre + "proj.weight"], p[pre + "proj.bias"]), attn


def class_attention(u, p, pre, heads):
    B, N, C = u.shape
    d = C // heads
    q = hub.linear(u[:, 0], p[pre + "q.weight"], p.get(pre + "q.bias")).reshape(B, 1, heads, d).permute(0, 2, 1, 3)
    k = hub.linear(u, p[pre + "k.weight"], p.get(pre + "k.bias")).reshape(B, N, heads, d).permute(0, 2, 1, 3)
    v = hub.linear(u, p[pre + "v.weight"], p.get(pre + "v.bias")).reshape(B, N, heads, d).permute(0, 2, 1, 3)
    attn = hub.softmax((q * d ** -0.5) @ k.transpose(-2, -1))
    out = (attn @ v).transpose(1, 2).reshape(B, 1, C)
    return hub.linear(out, p[pre + "proj.weight"], p[pre + "proj.bias"]), attn[:, :, 0]


def forward_cait(sd, img, cfg):
    """timm's Cait at its trained grid: (output, talking-heads matrices per block [B, h, N, N], the class
    token's attention per class-attention block [B, h, 1 + N])."""
    p = f64(sd)
    eps, heads, act = cfg["eps"], cfg["heads"], cfg["act"]
    x, gh, gw = hub.patch_tokens(img.to(torch.float64), p["patch_embed.proj.weight"], p.get("patch_embed.proj.bias"),
                                 cfg["patch"])
    x = x + p["pos_embed"]
    probs_all, class_probs = [], []
    i = 0
    while f"blocks.{i}.norm1.weight" in p:
        pre = f"blocks.{i}."
        a, probs = talking_heads_attention(hub.layer_norm(x, p[pre + "norm1.weight"], p[pre + "norm1.bias"], eps), p,
                                           pre + "attn.", heads)
        probs_all.append(probs)
        x = x + p[pre + "gamma_1"] * a
        m = mlp(hub.layer_norm(x, p[pre + "norm2.weight"], p[pre + "norm2.bias"], eps), p, pre + "mlp.", act, eps)
        x = x + p[pre + "gamma_2"] * m
        i += 1
    cls = p["cls_token"].expand(x.shape[0], -1, -1)
    i = 0
    while f"blocks_token_only.{i}.norm1.weight" in p:
        pre = f"blocks_token_only.{i}."
        u = torch.cat((cls, x), dim=1)
        a, probs = class_attention(hub.layer_norm(u, p[pre + "norm1.weight"], p[pre + "norm1.bias"], eps), p,
                                   pre + "attn.", heads)
        class_probs.append(probs)
        cls = cls + p[pre + "gamma_1"] * a
        m = mlp(hub.layer_norm(cls, p[pre + "norm2.weight"], p[pre + "norm2.bias"], eps), p, pre + "mlp.", act, eps)
        cls = cls + p[pre + "gamma_2"] * m
        i += 1
    x = torch.cat((cls, x), dim=1)
    x = hub.layer_norm(x, p["norm.weight"], p["norm.bias"], eps)
    x = x[:, 1:].mean(1) if cfg["global_pool"] == "avg" else x[:, 0]
    if "head.weight" in p:
        x = hub.linear(x, p["head.weight"], p.get("head.bias"))
    return x, probs_all, class_probs
