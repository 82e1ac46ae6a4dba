"""Independent float64 reference of CLIP's text tower, image tower and zero-shot logits, in OpenAI's and
Hugging Face's layouts.

Written from the authors' code (read with the search tool), NOT from attnscope's C++ sources:
  * openai/CLIP clip/model.py: CLIP.build_attention_mask (-inf above the diagonal), CLIP.encode_text (token
    embedding + positional_embedding, resblocks, ln_final, the row at text.argmax(dim=-1), @ text_projection),
    ResidualAttentionBlock (x + attn(ln_1(x), attn_mask), x + mlp(ln_2(x)), QuickGELU), build_model (heads =
    width // 64), CLIP.forward (logits_per_image = logit_scale.exp() * normalised image @ normalised text.T);
  * huggingface/transformers src/transformers/models/clip/modeling_clip.py: CLIPTextEmbeddings (positions
    [:seq_length]), eager_attention_forward (scores * head_dim^-0.5 + causal mask, softmax), CLIPEncoderLayer,
    CLIPTextTransformer.forward (pooling: the argmax of the ids when config.eos_token_id == 2, the legacy value of
    configs written before PR #24773, else the first position of eos_token_id), CLIPVisionEmbeddings (patch conv
    without bias, class embedding, interpolate_pos_encoding: bicubic to (H // p, W // p), no antialias, skipped
    when the patch count matches and H == W), CLIPVisionTransformer (pre_layrnorm, encoder, post_layernorm of the
    class token), CLIPModel.get_text_features / get_image_features (text_projection, visual_projection: Linear
    without bias) and forward (logits); configuration_clip.py (CLIPTextConfig / CLIPVisionConfig defaults, and a
    legacy text_config_dict / vision_config_dict that replaces text_config / vision_config, with the defaults for
    what it lacks, as CLIPConfig.__init__ does).

Shared building blocks (layer norm, linear, the activations, patch tokens, pre-norm block, bicubic position
resizing) come from reference_hub_vit.py, the same file's hub-layout reference.

transformers' main branch (2025) replaced the `eos_token_id == 2` test by `torch.all(input_ids.max(-1) == 49407)`;
both give the argmax for OpenAI's tokenizer output with the real vocabulary. This reference (and attnscope)
follow the `eos_token_id == 2` rule of the releases from 4.31 on.
"""

import torch

import reference_hub_vit as ref

CLIP_TEXT_DEFAULTS = dict(vocab_size=49408, hidden_size=512, intermediate_size=2048, projection_dim=512,
                          num_hidden_layers=12, num_attention_heads=8, max_position_embeddings=77,
                          hidden_act="quick_gelu", layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=49406,
                          eos_token_id=49407)
CLIP_VISION_DEFAULTS = dict(hidden_size=768, intermediate_size=3072, projection_dim=512, num_hidden_layers=12,
                            num_attention_heads=12, num_channels=3, image_size=224, patch_size=32,
                            hidden_act="quick_gelu", layer_norm_eps=1e-5)


def causal_mask(length):
    """clip/model.py build_attention_mask: -inf above the diagonal, 0 on and below (float64)."""
    return torch.full((length, length), float("-inf"), dtype=torch.float64).triu(1)


def masked_attention(x, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, heads, mask):
    """Multi-head self-attention with an additive mask: (out [B,T,C], probs [B,h,T,T]); probs weigh v."""
    B, T, C = x.shape
    d = C // heads

    def split(t):
        return t.reshape(B, T, heads, d).permute(0, 2, 1, 3)

    q = split(ref.linear(x, q_w, q_b))
    k = split(ref.linear(x, k_w, k_b))
    v = split(ref.linear(x, v_w, v_b))
    probs = ref.softmax((q @ k.transpose(-1, -2)) * (d ** -0.5) + mask)
    ctx = (probs @ v).permute(0, 2, 1, 3).reshape(B, T, C)
    return ref.linear(ctx, o_w, o_b), probs


def masked_block(x, p, heads, eps, act, mask, probs_out):
    """x + attn(ln_1(x)); x + mlp(ln_2(x)) with the mask; appends the probabilities to probs_out."""
    a, probs = masked_attention(ref.layer_norm(x, p["ln1_w"], p["ln1_b"], eps), p["q_w"], p["q_b"], p["k_w"],
                                p["k_b"], p["v_w"], p["v_b"], p["o_w"], p["o_b"], heads, mask)
    probs_out.append(probs)
    x = x + a
    h = act(ref.linear(ref.layer_norm(x, p["ln2_w"], p["ln2_b"], eps), p["fc1_w"], p["fc1_b"]))
    return x + ref.linear(h, p["fc2_w"], p["fc2_b"])


# --------------------------------------------------------------------------------------------
# OpenAI layout (a full state dict, or the parameters of a released TorchScript archive)
# --------------------------------------------------------------------------------------------
def openai_text_layers(sd):
    return ref._count_layers({k: v for k, v in sd.items() if not k.startswith("visual.")}, "transformer.resblocks.",
                             ".attn.in_proj_weight")


def openai_encode_text(sd, ids, probs_out=None, positions=None):
    """CLIP.encode_text in float64: ids [P, L] (L = context_length) -> [P, E]. probs_out: list that receives
    each block's probabilities [P, h, L, L]. positions: not the authors' (the argmax of the ids); only for
    checking that the fixtures tell another pooling apart."""
    g = lambda k: ref._f64(sd[k])  # noqa: E731
    width = sd["ln_final.weight"].shape[0]
    heads = width // 64  # build_model
    L = ids.shape[1]
    x = g("token_embedding.weight")[ids] + g("positional_embedding")[:L]
    mask = causal_mask(L)
    probs_out = [] if probs_out is None else probs_out
    for i in range(openai_text_layers(sd)):
        bp = f"transformer.resblocks.{i}."
        (qw, qb), (kw, kb), (vw, vb) = ref._split_qkv(g(bp + "attn.in_proj_weight"), g(bp + "attn.in_proj_bias"))
        p = {"ln1_w": g(bp + "ln_1.weight"), "ln1_b": g(bp + "ln_1.bias"), "q_w": qw, "q_b": qb, "k_w": kw,
             "k_b": kb, "v_w": vw, "v_b": vb, "o_w": g(bp + "attn.out_proj.weight"),
             "o_b": g(bp + "attn.out_proj.bias"), "ln2_w": g(bp + "ln_2.weight"), "ln2_b": g(bp + "ln_2.bias"),
             "fc1_w": g(bp + "mlp.c_fc.weight"), "fc1_b": g(bp + "mlp.c_fc.bias"),
             "fc2_w": g(bp + "mlp.c_proj.weight"), "fc2_b": g(bp + "mlp.c_proj.bias")}
        x = masked_block(x, p, heads, ref.LN_EPS_CLIP, ref.quick_gelu, mask, probs_out)
    x = ref.layer_norm(x, g("ln_final.weight"), g("ln_final.bias"), ref.LN_EPS_CLIP)
    pooled = x[torch.arange(x.shape[0]), ids.argmax(dim=-1) if positions is None else positions]
    return pooled @ g("text_projection")


def openai_encode_image(sd, img):
    """CLIP.encode_image (VisionTransformer.forward) in float64: [B,3,H,W] -> [B, E]."""
    out, _ = ref.clip_forward(sd, img)
    return out


# --------------------------------------------------------------------------------------------
# Hugging Face layout (CLIPModel: model.safetensors + config.json)
# --------------------------------------------------------------------------------------------
def hf_sub_config(config, name, defaults):
    """CLIPConfig's text_config / vision_config as transformers builds it: a legacy NAME_config_dict (with the
    sub-config's defaults for what it lacks) replaces NAME_config; projection_dim from the top level."""
    out = dict(defaults)
    if config.get(name + "_config_dict") is not None:
        out.update(config[name + "_config_dict"])
    else:
        out.update(config.get(name + "_config") or {})
    if "projection_dim" in config:
        out["projection_dim"] = config["projection_dim"]
    return out


def hf_encode_text(sd, config, ids, probs_out=None):
    """CLIPModel.get_text_features in float64: ids [P, L], L <= max_position_embeddings -> [P, E]."""
    c = hf_sub_config(config, "text", CLIP_TEXT_DEFAULTS)
    g = lambda k: ref._f64(sd[k])  # noqa: E731
    heads, eps, act = int(c["num_attention_heads"]), float(c["layer_norm_eps"]), ref.ACTIVATIONS[c["hidden_act"]]
    L = ids.shape[1]
    e = "text_model.embeddings."
    x = g(e + "token_embedding.weight")[ids] + g(e + "position_embedding.weight")[:L]
    mask = causal_mask(L)
    probs_out = [] if probs_out is None else probs_out
    for i in range(ref._count_layers(sd, "text_model.encoder.layers.", ".layer_norm1.weight")):
        lp = f"text_model.encoder.layers.{i}."
        a = lp + "self_attn."
        p = {"ln1_w": g(lp + "layer_norm1.weight"), "ln1_b": g(lp + "layer_norm1.bias"),
             "q_w": g(a + "q_proj.weight"), "q_b": g(a + "q_proj.bias"), "k_w": g(a + "k_proj.weight"),
             "k_b": g(a + "k_proj.bias"), "v_w": g(a + "v_proj.weight"), "v_b": g(a + "v_proj.bias"),
             "o_w": g(a + "out_proj.weight"), "o_b": g(a + "out_proj.bias"),
             "ln2_w": g(lp + "layer_norm2.weight"), "ln2_b": g(lp + "layer_norm2.bias"),
             "fc1_w": g(lp + "mlp.fc1.weight"), "fc1_b": g(lp + "mlp.fc1.bias"),
             "fc2_w": g(lp + "mlp.fc2.weight"), "fc2_b": g(lp + "mlp.fc2.bias")}
        x = masked_block(x, p, heads, eps, act, mask, probs_out)
    x = ref.layer_norm(x, g("text_model.final_layer_norm.weight"), g("text_model.final_layer_norm.bias"), eps)
    pooled = x[torch.arange(x.shape[0]), hf_pooled_positions(config, ids)]
    return ref.linear(pooled, g("text_projection.weight"))


def hf_pooled_positions(config, ids):
    """CLIPTextTransformer.forward's pooling: argmax of the ids for the legacy eos_token_id 2, else the first
    position of eos_token_id."""
    eos = hf_sub_config(config, "text", CLIP_TEXT_DEFAULTS)["eos_token_id"]
    if eos == 2:
        return ids.to(torch.int).argmax(dim=-1)
    return (ids.to(torch.int) == eos).int().argmax(dim=-1)


def hf_encode_image(sd, config, img, probs_out=None, pos_antialias=False):
    """CLIPModel.get_image_features(interpolate_pos_encoding=True) in float64: [B,3,H,W] -> [B, E].
    pos_antialias: leave False (the authors'); True only to check that the fixtures tell them apart."""
    c = hf_sub_config(config, "vision", CLIP_VISION_DEFAULTS)
    g = lambda k: ref._f64(sd[k])  # noqa: E731
    heads, eps, act = int(c["num_attention_heads"]), float(c["layer_norm_eps"]), ref.ACTIVATIONS[c["hidden_act"]]
    patch = int(c["patch_size"])
    e = "vision_model.embeddings."
    x = img.to(torch.float64)
    B, _, H, W = x.shape
    tok, gh, gw = ref.patch_tokens(x, g(e + "patch_embedding.weight"), None, patch)
    C = tok.shape[-1]
    x = torch.cat([g(e + "class_embedding").expand(B, 1, C), tok], dim=1)
    x = x + ref.hf_position_embeddings(sd[e + "position_embedding.weight"][None], 1, H, W, patch, pos_antialias)
    x = ref.layer_norm(x, g("vision_model.pre_layrnorm.weight"), g("vision_model.pre_layrnorm.bias"), eps)
    probs_out = [] if probs_out is None else probs_out
    for i in range(ref._count_layers(sd, "vision_model.encoder.layers.", ".layer_norm1.weight")):
        lp = f"vision_model.encoder.layers.{i}."
        a = lp + "self_attn."
        p = {"ln1_w": g(lp + "layer_norm1.weight"), "ln1_b": g(lp + "layer_norm1.bias"),
             "q_w": g(a + "q_proj.weight"), "q_b": g(a + "q_proj.bias"), "k_w": g(a + "k_proj.weight"),
             "k_b": g(a + "k_proj.bias"), "v_w": g(a + "v_proj.weight"), "v_b": g(a + "v_proj.bias"),
             "o_w": g(a + "out_proj.weight"), "o_b": g(a + "out_proj.bias"),
             "ln2_w": g(lp + "layer_norm2.weight"), "ln2_b": g(lp + "layer_norm2.bias"),
             "fc1_w": g(lp + "mlp.fc1.weight"), "fc1_b": g(lp + "mlp.fc1.bias"),
             "fc2_w": g(lp + "mlp.fc2.weight"), "fc2_b": g(lp + "mlp.fc2.bias")}
        x, probs = ref.pre_norm_block(x, p, heads, eps, act)
        probs_out.append(probs)
    post = "vision_model.post_layernorm."
    pooled = ref.layer_norm(x[:, 0], g(post + "weight"), g(post + "bias"), eps)
    return ref.linear(pooled, g("visual_projection.weight"))


# --------------------------------------------------------------------------------------------
# Zero-shot
# --------------------------------------------------------------------------------------------
def logits_per_image(image_embeddings, text_embeddings, logit_scale):
    """CLIP.forward / CLIPModel.forward: logit_scale.exp() * normalised image @ normalised text.T -> [B, P]."""
    image = image_embeddings / image_embeddings.norm(dim=-1, keepdim=True)
    text = text_embeddings / text_embeddings.norm(dim=-1, keepdim=True)
    return torch.as_tensor(logit_scale, dtype=torch.float64).exp() * image @ text.T


def zero_shot(image_embedding, text_embeddings, logit_scale):
    """(logits [P], probabilities [P]): one image's logits_per_image row and its softmax over the prompts."""
    logits = logits_per_image(image_embedding.reshape(1, -1), text_embeddings, logit_scale)[0]
    return logits, torch.softmax(logits, dim=0)
