"""Independent float64 references of three text-prompted CLIP maps, each written from its authors' code:

- chefer_clip: interpret() of hila-chefer/Transformer-MM-Explainability's CLIP_explainability.ipynb. The image-
  prompt entry of logits_per_image is differentiated with respect to every block's attention probabilities
  (attn_probs); from start_layer on, cam = clamp(grad * attn_probs, 0).mean over heads and R = R + cam @ R from the
  identity; image_relevance = R[0, 1:]; on the text side the same from start_layer_text with R_text[eot, 1:eot]
  divided by its sum (show_heatmap_on_text).
- legrad_clip: LeWrapper.compute_legrad_clip of WalBouss/LeGrad (legrad/wrapper.py, hooked_resblock_forward and
  hooked_attention_forward of legrad/utils.py): for each block from starting_depth (layer_index -2: the last two),
  feat_post_mlp.mean over all tokens, ln_post, @ proj, F.normalize; sim = text_embedding @ feat; the gradient of
  the sum with respect to that block's attention_map, clamp(min=0), mean over heads, mean over query rows, [1:];
  F.interpolate(scale_factor=patch, bilinear) per block, accumulated, then min_max.
- textspan: PRSLogger of yossigandelsman/clip_text_span (prs_hook.py; the hooks of utils/transformer.py's
  MultiheadAttention.forward_per_head "out.post" and LayerNorm "mean" / "sqrt_var") and compute_segmentations.py:
  each block's attention output at the class query as per-(key token, head) terms einsum("bnmhc,dhc->bnmhd") plus
  out_proj.bias / (n h); the MLPs' c_proj outputs and ln_pre's output at the class token; ln_post linearised with
  the logged mean and sqrt(var + eps) (var = E[x^2] - mean^2), its mean and bias spread over the 2 L + 1
  intermediates (and n h inside an attention); @ proj; divided by the representation's norm (finalize); then
  attentions[:, :, 1:].sum over layers and heads @ the normalised text embeddings, minus their mean over prompts.

The towers are written here in float64 with autograd from one parameter layout, read either from an OpenAI CLIP
state_dict (clip/model.py's names) or from a Hugging Face CLIPModel (modeling_clip.py's names and config.json):
nn.MultiheadAttention's in_proj split in q, k, v, QuickGELU or the config's activation, the causal text mask,
pooling at the argmax of the ids (OpenAI; transformers with eos_token_id 2) or the first end-of-text token.
"""
import math

import torch
import torch.nn.functional as F


# --------------------------------------------------------------------------------------------
# Parameters in one layout
# --------------------------------------------------------------------------------------------
def _leaf(t):
    """float64 copies that require grad, so that every intermediate is in the graph as in the authors' models."""
    return t.detach().to(torch.float64).clone().requires_grad_(True)


def _quick_gelu(x):
    return x * torch.sigmoid(1.702 * x)


def _gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


ACT = {"quick_gelu": _quick_gelu, "gelu": _gelu}


def _count(sd, prefix, suffix):
    n = 0
    while f"{prefix}{n}{suffix}" in sd:
        n += 1
    return n


def openai_params(sd):
    """(visual, text) parameter dicts from an OpenAI CLIP state_dict (heads = width // 64, build_model)."""
    g = lambda k: _leaf(sd[k])  # noqa: E731

    def blocks(prefix, count):
        out = []
        for i in range(count):
            b = f"{prefix}{i}."
            w, bias = sd[b + "attn.in_proj_weight"], sd[b + "attn.in_proj_bias"]
            C = w.shape[1]
            out.append({"ln1_w": g(b + "ln_1.weight"), "ln1_b": g(b + "ln_1.bias"),
                        "q_w": _leaf(w[:C]), "k_w": _leaf(w[C:2 * C]), "v_w": _leaf(w[2 * C:]),
                        "q_b": _leaf(bias[:C]), "k_b": _leaf(bias[C:2 * C]), "v_b": _leaf(bias[2 * C:]),
                        "o_w": g(b + "attn.out_proj.weight"), "o_b": g(b + "attn.out_proj.bias"),
                        "ln2_w": g(b + "ln_2.weight"), "ln2_b": g(b + "ln_2.bias"),
                        "fc_w": g(b + "mlp.c_fc.weight"), "fc_b": g(b + "mlp.c_fc.bias"),
                        "proj_w": g(b + "mlp.c_proj.weight"), "proj_b": g(b + "mlp.c_proj.bias")})
        return out

    width = sd["visual.conv1.weight"].shape[0]
    visual = {"conv": g("visual.conv1.weight"), "cls": g("visual.class_embedding"),
              "pos": g("visual.positional_embedding"), "ln_pre_w": g("visual.ln_pre.weight"),
              "ln_pre_b": g("visual.ln_pre.bias"), "ln_post_w": g("visual.ln_post.weight"),
              "ln_post_b": g("visual.ln_post.bias"), "proj": g("visual.proj"), "heads": width // 64, "eps": 1e-5,
              "act": _quick_gelu,
              "blocks": blocks("visual.transformer.resblocks.",
                               _count(sd, "visual.transformer.resblocks.", ".attn.in_proj_weight"))}
    text_width = sd["ln_final.weight"].shape[0]
    text = {"tok": g("token_embedding.weight"), "pos": g("positional_embedding"), "ln_w": g("ln_final.weight"),
            "ln_b": g("ln_final.bias"), "proj": g("text_projection"), "heads": text_width // 64, "eps": 1e-5,
            "act": _quick_gelu, "logit_scale": _leaf(sd["logit_scale"]), "pool": "argmax",
            "blocks": blocks("transformer.resblocks.", _count(sd, "transformer.resblocks.", ".attn.in_proj_weight"))}
    return visual, text


def hf_params(sd, config):
    """(visual, text) from a Hugging Face CLIPModel state dict and its config.json (legacy *_config_dict first)."""
    def sub(name):
        c = dict(config.get(name + "_config") or {})
        if config.get(name + "_config_dict") is not None:
            c = dict(config[name + "_config_dict"])
        return c

    g = lambda k: _leaf(sd[k])  # noqa: E731

    def blocks(prefix, count):
        out = []
        for i in range(count):
            b, a = f"{prefix}{i}.", f"{prefix}{i}.self_attn."
            out.append({"ln1_w": g(b + "layer_norm1.weight"), "ln1_b": g(b + "layer_norm1.bias"),
                        "q_w": g(a + "q_proj.weight"), "k_w": g(a + "k_proj.weight"), "v_w": g(a + "v_proj.weight"),
                        "q_b": g(a + "q_proj.bias"), "k_b": g(a + "k_proj.bias"), "v_b": g(a + "v_proj.bias"),
                        "o_w": g(a + "out_proj.weight"), "o_b": g(a + "out_proj.bias"),
                        "ln2_w": g(b + "layer_norm2.weight"), "ln2_b": g(b + "layer_norm2.bias"),
                        "fc_w": g(b + "mlp.fc1.weight"), "fc_b": g(b + "mlp.fc1.bias"),
                        "proj_w": g(b + "mlp.fc2.weight"), "proj_b": g(b + "mlp.fc2.bias")})
        return out

    v, t = sub("vision"), sub("text")
    e = "vision_model.embeddings."
    visual = {"conv": g(e + "patch_embedding.weight"), "cls": g(e + "class_embedding"),
              "pos": g(e + "position_embedding.weight"), "ln_pre_w": g("vision_model.pre_layrnorm.weight"),
              "ln_pre_b": g("vision_model.pre_layrnorm.bias"), "ln_post_w": g("vision_model.post_layernorm.weight"),
              "ln_post_b": g("vision_model.post_layernorm.bias"), "proj": _leaf(sd["visual_projection.weight"].T),
              "heads": int(v["num_attention_heads"]), "eps": float(v.get("layer_norm_eps", 1e-5)),
              "act": ACT[v.get("hidden_act", "quick_gelu")],
              "blocks": blocks("vision_model.encoder.layers.",
                               _count(sd, "vision_model.encoder.layers.", ".layer_norm1.weight"))}
    eos = int(t.get("eos_token_id", 2))
    text = {"tok": g("text_model.embeddings.token_embedding.weight"),
            "pos": g("text_model.embeddings.position_embedding.weight"),
            "ln_w": g("text_model.final_layer_norm.weight"), "ln_b": g("text_model.final_layer_norm.bias"),
            "proj": _leaf(sd["text_projection.weight"].T), "heads": int(t["num_attention_heads"]),
            "eps": float(t.get("layer_norm_eps", 1e-5)), "act": ACT[t.get("hidden_act", "quick_gelu")],
            "logit_scale": _leaf(sd["logit_scale"]), "pool": "argmax" if eos == 2 else eos,
            "blocks": blocks("text_model.encoder.layers.",
                             _count(sd, "text_model.encoder.layers.", ".layer_norm1.weight"))}
    return visual, text


# --------------------------------------------------------------------------------------------
# The towers, keeping what the three methods read
# --------------------------------------------------------------------------------------------
def layer_norm(x, w, b, eps):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def _block(x, p, heads, eps, act, mask, keep):
    """A pre-norm residual block [B, T, C]; appends to `keep`: probs [B, h, T, T] (the softmax the values are
    weighted by), v [B, h, T, d] (with its bias), the MLP's output and the block's output."""
    B, T, C = x.shape
    d = C // heads
    h = layer_norm(x, p["ln1_w"], p["ln1_b"], eps)
    split = lambda t: t.reshape(B, T, heads, d).permute(0, 2, 1, 3)  # noqa: E731
    q, k, v = (split(h @ p[n + "_w"].T + p[n + "_b"]) for n in ("q", "k", "v"))
    scores = (q * d ** -0.5) @ k.transpose(-1, -2)
    if mask is not None:
        scores = scores + mask
    probs = scores.softmax(dim=-1)
    attn = (probs @ v).permute(0, 2, 1, 3).reshape(B, T, C) @ p["o_w"].T + p["o_b"]
    x = x + attn
    mlp = act(layer_norm(x, p["ln2_w"], p["ln2_b"], eps) @ p["fc_w"].T + p["fc_b"]) @ p["proj_w"].T + p["proj_b"]
    x = x + mlp
    keep["probs"].append(probs)
    keep["v"].append(v)
    keep["mlp"].append(mlp)
    keep["out"].append(x)
    return x


def encode_image(P, img):
    """[1, 3, H, W] at the native size -> (embedding [1, E], keep: ln_pre output, per block probs, v, mlp, out,
    the final residual)."""
    x = img.to(torch.float64)
    conv = P["conv"]
    patch = conv.shape[-1]
    tokens = F.conv2d(x, conv, stride=patch)  # conv1 / patch_embedding: no bias
    B, C, gh, gw = tokens.shape
    tokens = tokens.flatten(2).transpose(1, 2)
    x = torch.cat([P["cls"].expand(B, 1, C), tokens], dim=1) + P["pos"]
    x = layer_norm(x, P["ln_pre_w"], P["ln_pre_b"], P["eps"])
    keep = {"ln_pre": x, "probs": [], "v": [], "mlp": [], "out": [], "grid": (gh, gw), "patch": patch}
    for p in P["blocks"]:
        x = _block(x, p, P["heads"], P["eps"], P["act"], None, keep)
    keep["final"] = x
    return layer_norm(x[:, 0], P["ln_post_w"], P["ln_post_b"], P["eps"]) @ P["proj"], keep


def pooled_positions(T, ids):
    if T["pool"] == "argmax":
        return ids.argmax(dim=-1)
    return (ids == T["pool"]).int().argmax(dim=-1)


def encode_text(T, ids):
    """ids [P, L] -> (embeddings [P, E], keep with the blocks' probabilities)."""
    L = ids.shape[1]
    x = T["tok"][ids] + T["pos"][:L]
    mask = torch.full((L, L), float("-inf"), dtype=torch.float64).triu(1)
    keep = {"probs": [], "v": [], "mlp": [], "out": []}
    for p in T["blocks"]:
        x = _block(x, p, T["heads"], T["eps"], T["act"], mask, keep)
    x = layer_norm(x, T["ln_w"], T["ln_b"], T["eps"])
    return x[torch.arange(x.shape[0]), pooled_positions(T, ids)] @ T["proj"], keep


def logits_per_image(image_features, text_features, logit_scale):
    image_features = image_features / image_features.norm(dim=-1, keepdim=True)
    text_features = text_features / text_features.norm(dim=-1, keepdim=True)
    return logit_scale.exp() * image_features @ text_features.t()


def min_max(x):
    return (x - x.min()) / (x.max() - x.min())


# --------------------------------------------------------------------------------------------
# Chefer et al. (interpret(), batch of one image and one prompt)
# --------------------------------------------------------------------------------------------
def chefer_clip(V, T, image, ids, start_layer=-1, start_layer_text=-1):
    """(image_relevance [gh, gw], text_scores [eot - 1], logit, per-block cams used)."""
    image_features, vkeep = encode_image(V, image)
    text_features, tkeep = encode_text(T, ids)
    logits = logits_per_image(image_features, text_features, T["logit_scale"])
    one_hot = torch.sum(torch.ones_like(logits) * logits)  # batch 1: the one entry

    def relevance(blocks, start):
        if start == -1:
            start = len(blocks) - 1
        num_tokens = blocks[0].shape[-1]
        R = torch.eye(num_tokens, dtype=torch.float64).unsqueeze(0)
        for i, attn_probs in enumerate(blocks):
            if i < start:
                continue
            grad = torch.autograd.grad(one_hot, [attn_probs], retain_graph=True)[0].detach()
            cam = (grad * attn_probs.detach()).clamp(min=0).mean(dim=1)
            R = R + torch.bmm(cam, R)
        return R[0]

    R = relevance(vkeep["probs"], start_layer)
    gh, gw = vkeep["grid"]
    image_relevance = R[0, 1:].reshape(gh, gw)
    R_text = relevance(tkeep["probs"], start_layer_text)
    eot = int(ids[0].argmax()) if T["pool"] == "argmax" else int((ids[0] == T["pool"]).int().argmax())
    scores = R_text[eot, 1:eot]
    return image_relevance.detach(), (scores / scores.sum()).detach(), float(logits[0, 0])


# --------------------------------------------------------------------------------------------
# LeGrad (compute_legrad_clip)
# --------------------------------------------------------------------------------------------
def legrad_clip(V, text_embedding, image, layer_index=-2):
    """text_embedding [1, E] (normalised by the caller, as the authors' demo does). Returns (raw sum before the
    upsampling [gh, gw], the authors' output [H, W], per-block cosines)."""
    _, keep = encode_image(V, image)
    blocks = len(V["blocks"])
    starting_depth = layer_index if layer_index >= 0 else blocks + layer_index
    gh, gw = keep["grid"]
    raw, accum, sims = 0, 0, []
    for layer in range(starting_depth, blocks):
        feat = keep["out"][layer].mean(dim=1)  # the authors' [N, B, D].mean(dim=0): every token
        feat = layer_norm(feat, V["ln_post_w"], V["ln_post_b"], V["eps"]) @ V["proj"]
        feat = F.normalize(feat, dim=-1)
        sim = text_embedding @ feat.transpose(-1, -2)
        one_hot = torch.sum(torch.ones(1, dtype=torch.float64) * sim)
        sims.append(float(sim))
        grad = torch.autograd.grad(one_hot, [keep["probs"][layer]], retain_graph=True, create_graph=True)[0]
        grad = torch.clamp(grad, min=0.0)
        image_relevance = grad.mean(dim=1).mean(dim=1)[:, 1:]
        expl_map = image_relevance.reshape(1, 1, gh, gw)
        raw = raw + expl_map.detach()[0, 0]
        expl_map = F.interpolate(expl_map, scale_factor=keep["patch"], mode="bilinear")
        accum = accum + expl_map
    return raw, min_max(accum).detach()[0, 0], sims


# --------------------------------------------------------------------------------------------
# TextSpan (PRSLogger + compute_segmentations.py)
# --------------------------------------------------------------------------------------------
@torch.no_grad()
def prs_components(V, image):
    """(attentions [1, l, n, h, d_out] and mlps [1, l + 1, d_out] projected and divided by the representation's
    norm, representation [1, E]), as PRSLogger.finalize returns them."""
    with torch.enable_grad():
        representation, keep = encode_image(V, image)
    representation = representation.detach()
    heads = V["heads"]
    attentions, mlps = [], [keep["ln_pre"][:, 0].detach()]
    for i, p in enumerate(V["blocks"]):
        probs, v = keep["probs"][i].detach(), keep["v"][i].detach()  # [b, h, n, n], [b, h, n, c]
        C = p["o_w"].shape[0]
        x = torch.einsum("bhnm,bhmc->bnmhc", probs, v)
        out = torch.einsum("bnmhc,dhc->bnmhd", x, p["o_w"].detach().reshape(C, heads, C // heads))
        ret = out[:, 0]  # the class query: [b, m, h, d]
        attentions.append(ret + p["o_b"].detach()[None, None, None] / (ret.shape[1] * ret.shape[2]))
        mlps.append(keep["mlp"][i][:, 0].detach())
    final = keep["final"][:, 0].detach()
    mean = final.mean(dim=-1, keepdim=True)  # LayerNorm's "mean" hook
    var = (final ** 2).mean(dim=-1, keepdim=True) - mean ** 2
    std = torch.sqrt(var + V["eps"])  # "sqrt_var"
    attentions = torch.stack(attentions, dim=1)  # [b, l, n, h, d]
    mlps = torch.stack(mlps, dim=1)  # [b, l + 1, d]
    w, b, proj = V["ln_post_w"].detach(), V["ln_post_b"].detach(), V["proj"].detach()
    intermediates = attentions.shape[1] + mlps.shape[1]
    term = attentions.shape[2] * attentions.shape[3]
    a = w * (attentions - mean[:, :, None, None, None] / (intermediates * term)) / std[:, :, None, None, None]
    a = (a + b / (intermediates * term)) @ proj
    m = w * (mlps - mean[:, :, None] / intermediates) / std[:, :, None]
    m = (m + b / intermediates) @ proj
    norm = representation.norm(dim=-1)
    return a / norm[:, None, None, None, None], m / norm[:, None, None], representation, keep["grid"]


def textspan(V, image, text_embeddings):
    """(maps [P, gh, gw], uncentred heat [P, gh, gw], residual max |sum of components - representation|)."""
    attentions, mlps, representation, (gh, gw) = prs_components(V, image)
    norm = representation.norm(dim=-1)
    total = (attentions.sum(dim=(1, 2, 3)) + mlps.sum(dim=1)) * norm
    residual = (total - representation).abs().max().item()
    classifier = (text_embeddings / text_embeddings.norm(dim=-1, keepdim=True)).T  # [E, P]
    collapse = attentions[:, :, 1:].sum(dim=(1, 3))  # [b, n - 1, E]
    heat = collapse[0] @ classifier  # [n - 1, P]
    maps = heat - heat.mean(dim=1, keepdim=True)
    return maps.T.reshape(-1, gh, gw), heat.T.reshape(-1, gh, gw), residual
