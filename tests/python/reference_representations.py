"""Independent float64 references of the representation analyses (feature PCA, patch similarity, token norms)
and of the token features they read, written from the authors' code (read with the search tool, not copied;
nothing here comes from attnscope's C++ sources):

Features, one dict per forward: blocks [L] of [T, C] block outputs (after both residual adds and the layer
scale, no final norm), qkv [L] of [T, 3C] (the block's attn.qkv linear output on norm1, bias included,
before any scaling), attn [L] of [heads, T, T] probabilities, norm [T, C] (the final norm's output),
num_prefix, grid (gh, gw). Tokens are in the model's order: prefix tokens then patches row-major.
  * timm ViT: huggingface/pytorch-image-models timm/models/vision_transformer.py (VisionTransformer._pos_embed
    with the class token positioned, Block: x + ls1(attn(norm1(x))), x + ls2(mlp(norm2(x))); Attention:
    qkv(x).reshape(B, N, 3, h, d), q * scale @ k^T, softmax; LayerNorm eps 1e-6; forward_features ends with
    self.norm). x_norm patch tokens = forward_features(x)[:, num_prefix_tokens:].
  * DINOv2: facebookresearch/dinov2 dinov2/models/vision_transformer.py (prepare_tokens_with_masks: class
    token, + pos_embed, then the register tokens inserted after the class token without position;
    forward_features: x_norm_patchtokens = norm(x)[:, num_register_tokens + 1:]), dinov2/layers/block.py
    (NestedTensorBlock with LayerScale), attention.py (qkv, scale, softmax); eps 1e-6. At the native grid only
    (no position interpolation).
  * Swin: reference_hier.SwinReference (timm's swin_transformer.py) run block by block here, with each
    block's output [H, W, C] flattened row-major and its qkv on norm1 per token in image order (the
    projection acts on each token alone, so the windows do not change it).

Analyses:
  * PCA: sklearn.decomposition.PCA(3).fit_transform: X - mean over rows, SVD, scores = U S; svd_flip with
    u_based_decision=False (each component's largest |entry| positive); explained_variance_ratio_ =
    S^2 / sum of all S^2. Display (dinov2 issue #23): each score column min-max scaled over the patches.
    Foreground (the issue's second pass): the patches whose scaled first component exceeds T (negated first
    with flip) get their own PCA(3), min-max scaled over themselves; the background is 0.
  * Otsu: scikit-image skimage/filters/thresholding.py threshold_otsu(nbins=256) on numpy.histogram
    bins (bin centres, cumulative class weights and means, argmax of w1 w2 (m1 - m2)^2).
  * Similarity: ShirAmir/dino-vit-features extractor.py ViTExtractor.extract_descriptors (facet key/query/
    value: the qkv output split as qkv[facet_idx] [B, h, t, d]; token: the block output; prefix tokens dropped;
    permute(0, 2, 3, 1).flatten: channels (d, h) ordered, which cosine similarity does not see), and
    correspondences.py chunk_cosine_sim (torch.nn.CosineSimilarity(dim=3)) and find_correspondences' best
    buddies: nn_1 = argmax over image 2, nn_2 = argmax over image 1, pairs with nn_2[nn_1] == arange.
  * Norms ("Vision Transformers Need Registers"): the L2 norm of every token of every block output; the
    threshold max(exp(Otsu(log norms of the last block's patches)), sqrt(10) x their median); outliers = patch
    tokens above it; the class token's attention (mean over heads) summed over the last block's outliers per
    layer; each outlier's mean
    cosine similarity to its up to 4 grid neighbours in the last block's output.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

import reference_hier

VIT_LN_EPS = 1e-6  # timm VisionTransformer and DINOv2: partial(nn.LayerNorm, eps=1e-6)


def _f64(t):
    return t.detach().to(torch.float64)


def _ln(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


# ---- token features ------------------------------------------------------------------------------
def _pre_norm_blocks(x, sd, heads, depth, features):
    """timm's / DINOv2's Block on [1, T, C] tokens, recording what the features dict names."""
    g = lambda k: _f64(sd[k]) if k in sd else None  # noqa: E731
    for i in range(depth):
        p = f"blocks.{i}."
        B, T, C = x.shape
        d = C // heads
        n1 = _ln(x, g(p + "norm1.weight"), g(p + "norm1.bias"), VIT_LN_EPS)
        qkv = F.linear(n1, g(p + "attn.qkv.weight"), g(p + "attn.qkv.bias"))
        features["qkv"].append(qkv[0])
        q, k, v = qkv.reshape(B, T, 3, heads, d).permute(2, 0, 3, 1, 4)
        attn = ((q * d ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
        features["attn"].append(attn[0])
        o = F.linear((attn @ v).transpose(1, 2).reshape(B, T, C), g(p + "attn.proj.weight"), g(p + "attn.proj.bias"))
        if g(p + "ls1.gamma") is not None:
            o = o * g(p + "ls1.gamma")
        x = x + o
        n2 = _ln(x, g(p + "norm2.weight"), g(p + "norm2.bias"), VIT_LN_EPS)
        m = F.linear(F.gelu(F.linear(n2, g(p + "mlp.fc1.weight"), g(p + "mlp.fc1.bias"))),
                     g(p + "mlp.fc2.weight"), g(p + "mlp.fc2.bias"))
        if g(p + "ls2.gamma") is not None:
            m = m * g(p + "ls2.gamma")
        x = x + m
        features["blocks"].append(x[0])
    return x


def _depth(sd):
    depth = 0
    while f"blocks.{depth}.norm1.weight" in sd:
        depth += 1
    return depth


def _patches(img, sd):
    w = _f64(sd["patch_embed.proj.weight"])
    x = F.conv2d(img.to(torch.float64), w, _f64(sd["patch_embed.proj.bias"]), stride=w.shape[-1])
    return x.flatten(2).transpose(1, 2), x.shape[-2:]


def timm_vit_features(sd, img, heads):
    """timm VisionTransformer (class token with a position, no registers) at its native grid."""
    tokens, grid = _patches(img, sd)
    x = torch.cat([_f64(sd["cls_token"]), tokens], dim=1) + _f64(sd["pos_embed"])
    features = {"blocks": [], "qkv": [], "attn": [], "num_prefix": 1, "grid": tuple(grid), "heads": heads}
    x = _pre_norm_blocks(x, sd, heads, _depth(sd), features)
    features["norm"] = _ln(x, _f64(sd["norm.weight"]), _f64(sd["norm.bias"]), VIT_LN_EPS)[0]
    return features


def dinov2_features(sd, img, heads):
    """DINOv2 hub layout (with or without register tokens) at its native grid."""
    tokens, grid = _patches(img, sd)
    x = torch.cat([_f64(sd["cls_token"]), tokens], dim=1) + _f64(sd["pos_embed"])
    registers = _f64(sd["register_tokens"]) if "register_tokens" in sd else torch.zeros(1, 0, x.shape[-1],
                                                                                         dtype=x.dtype)
    x = torch.cat([x[:, :1], registers, x[:, 1:]], dim=1)
    features = {"blocks": [], "qkv": [], "attn": [], "num_prefix": 1 + registers.shape[1], "grid": tuple(grid),
                "heads": heads}
    x = _pre_norm_blocks(x, sd, heads, _depth(sd), features)
    features["norm"] = _ln(x, _f64(sd["norm.weight"]), _f64(sd["norm.bias"]), VIT_LN_EPS)[0]
    return features


def swin_features(model, img):
    """timm Swin (reference_hier.SwinReference) block by block: outputs and qkv in image order per block."""
    eps = reference_hier.SWIN_LN_EPS
    x = F.conv2d(img.to(torch.float64), model.patch_w, model.patch_b, stride=model.patch_w.shape[-2:])
    x = reference_hier._ln(x.permute(0, 2, 3, 1), model.patch_norm, eps)
    g0 = x.shape[1:3]
    features = {"blocks": [], "qkv": [], "attn": [], "grids": [], "num_prefix": 0}
    for si, st in enumerate(model.stages):
        if st["downsample"] is not None:
            x = reference_hier.patch_merging(x, *st["downsample"])
        for bi, blk in enumerate(st["blocks"]):
            normed = reference_hier._ln(x, blk["n1"], eps)
            features["qkv"].append(F.linear(normed, *blk["qkv"])[0].reshape(-1, 3 * x.shape[-1]))
            a, _ = model._attention(normed, blk, reference_hier.swin_stage_resolution(g0, si), bi % 2 == 1,
                                    reference_hier.Variant(), (si, bi))
            x = x + a
            x = x + F.linear(F.gelu(F.linear(reference_hier._ln(x, blk["n2"], eps), *blk["fc1"])), *blk["fc2"])
            features["blocks"].append(x[0].reshape(-1, x.shape[-1]))
            features["grids"].append(tuple(x.shape[1:3]))
    features["norm"] = reference_hier._ln(x, model.norm, eps)[0].reshape(-1, x.shape[-1])
    features["grid"] = tuple(x.shape[1:3])
    return features


def descriptors(features, layer, facet):
    """[t, C] patch descriptors of dino-vit-features' extract_descriptors (bin=False, prefix tokens dropped),
    with the channels in its (d, h) order."""
    P = features["num_prefix"]
    if facet == "token":
        return features["blocks"][layer][P:]
    qkv = features["qkv"][layer]
    T, C3 = qkv.shape
    C = C3 // 3
    heads = features.get("heads", 1)
    x = qkv.reshape(1, T, 3, heads, C // heads).permute(2, 0, 3, 1, 4)[("query", "key", "value").index(facet)]
    x = x[:, :, P:, :]  # [1, h, t, d]
    return x.permute(0, 2, 3, 1).flatten(start_dim=-2)[0]  # [t, d * h]


# ---- analyses --------------------------------------------------------------------------------------
def pca_fit_transform(X, k=3):
    """(scores [N, k], components [k, C], explained_variance_ratio [k]) as sklearn's full-SVD PCA."""
    X = np.asarray(X, dtype=np.float64)
    Xc = X - X.mean(axis=0)
    U, S, Vt = np.linalg.svd(Xc, full_matrices=False)
    signs = np.sign(Vt[np.arange(Vt.shape[0]), np.argmax(np.abs(Vt), axis=1)])
    U, Vt = U * signs, Vt * signs[:, None]
    ratio = S ** 2 / np.sum(S ** 2)
    return (U * S)[:, :k], Vt[:k], ratio[:k], S ** 2


def min_max_columns(scores):
    lo, hi = scores.min(axis=0), scores.max(axis=0)
    return (scores - lo) / (hi - lo)


def threshold_otsu(values, nbins=256):
    values = np.asarray(values, dtype=np.float64).ravel()
    if np.all(values == values[0]):
        return float(values[0])
    counts, edges = np.histogram(values, bins=nbins)
    centres = (edges[:-1] + edges[1:]) / 2.0
    counts = counts.astype(np.float64)
    weight1 = np.cumsum(counts)
    weight2 = np.cumsum(counts[::-1])[::-1]
    mean1 = np.cumsum(counts * centres) / weight1
    mean2 = (np.cumsum((counts * centres)[::-1]) / weight2[::-1])[::-1]
    variance12 = weight1[:-1] * weight2[1:] * (mean1[:-1] - mean2[1:]) ** 2
    return float(centres[np.argmax(variance12)])


def feature_pca(patches, foreground=None, flip=False):
    """The contract's PCA outputs for patch features [N, C]; foreground None, a threshold or 'otsu'."""
    scores, _, ratio, eig = pca_fit_transform(patches)
    out = {"scores": scores, "rgb": min_max_columns(scores), "explained": ratio, "eigenvalues": eig[:4]}
    if foreground is None:
        return out
    first = out["rgb"][:, 0]
    first = 1.0 - first if flip else first
    threshold = threshold_otsu(first) if foreground == "otsu" else float(foreground)
    mask = first > threshold
    fg_scores, _, fg_ratio, fg_eig = pca_fit_transform(np.asarray(patches)[mask])
    out.update(threshold=threshold, mask=mask, foreground_eigenvalues=fg_eig[:4], foreground_explained=fg_ratio)
    out["foreground_scores"] = np.zeros_like(scores)
    out["foreground_scores"][mask] = fg_scores
    out["foreground_rgb"] = np.zeros_like(scores)
    out["foreground_rgb"][mask] = min_max_columns(fg_scores)
    out["split_values"] = first
    return out


def chunk_cosine_sim(x, y):
    """[tx, ty]: dino-vit-features' chunk_cosine_sim on [tx, d] and [ty, d]."""
    x, y = x[None, None], y[None, None]
    rows = [torch.nn.CosineSimilarity(dim=3)(x[:, :, i, :].unsqueeze(2), y) for i in range(x.shape[2])]
    return torch.stack(rows, dim=2)[0, 0]


def best_buddies(d1, d2):
    """[(i1, i2)] of find_correspondences' first step, and the smallest margin between a nearest and a
    second-nearest similarity (how far the pairs are from a tie)."""
    similarities = chunk_cosine_sim(d1, d2)
    _, nn_1 = torch.max(similarities, dim=-1)
    _, nn_2 = torch.max(similarities, dim=-2)
    mask = nn_2[nn_1] == torch.arange(d1.shape[0])
    pairs = [(int(i), int(nn_1[i])) for i in torch.nonzero(mask).flatten()]
    top_rows = similarities.topk(2, dim=1).values
    top_cols = similarities.topk(2, dim=0).values
    margin = min(float((top_rows[:, 0] - top_rows[:, 1]).min()), float((top_cols[0] - top_cols[1]).min()))
    return pairs, margin


def token_norms(features):
    return [torch.linalg.norm(b, dim=-1) for b in features["blocks"]]


def norm_report(features, threshold=None):
    """The contract's norms outputs: norms per block, the threshold, outliers (layer, token, row, col, norm),
    the class token's attention on the last block's outliers per layer, each outlier's neighbour cosine."""
    norms = token_norms(features)
    P = features["num_prefix"]
    grids = features.get("grids", [features["grid"]] * len(norms))
    last = norms[-1][P:].numpy()
    log_threshold = threshold_otsu(np.log(last)) if threshold is None else None
    # Darcet et al.'s high-norm tokens are ~10x the median norm: a split counts above sqrt(10) x the
    # median (the lower middle value, as torch.median), so a model without them reports none.
    median = float(np.sort(last)[(len(last) - 1) // 2])
    value = max(math.exp(log_threshold), math.sqrt(10) * median) if threshold is None else float(threshold)
    outliers = []
    for layer, n in enumerate(norms):
        gw = grids[layer][1]
        for token in range(P, n.shape[0]):
            if float(n[token]) > value:
                outliers.append((layer, token, (token - P) // gw, (token - P) % gw, float(n[token])))
    last_tokens = [t for (layer, t, _, _, _) in outliers if layer == len(norms) - 1]
    mass = []
    if P > 0:
        for attn in features["attn"]:
            mass.append(float(attn[:, 0, :].mean(dim=0)[last_tokens].sum()) if last_tokens else 0.0)
    block = features["blocks"][-1]
    gh, gw = grids[-1]
    neighbour = []
    for t in last_tokens:
        r, c = (t - P) // gw, (t - P) % gw
        near = [P + rr * gw + cc for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1))
                if 0 <= rr < gh and 0 <= cc < gw]
        sims = torch.nn.CosineSimilarity(dim=-1)(block[t][None], block[near])
        neighbour.append(float(sims.mean()))
    bin_width = (np.log(last).max() - np.log(last).min()) / 256
    return {"norms": norms, "threshold": value, "outliers": outliers, "class_mass": mass,
            "neighbours": neighbour, "last_tokens": last_tokens, "log_bin_width": float(bin_width)}
