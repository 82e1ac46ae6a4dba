"""Independent float64 reference of timm's Swin V2 (timm/models/swin_transformer_v2.py, read with the search
tool), NOT written from attnscope's C++ sources: SwinTransformerV2 with PatchEmbed (conv + LayerNorm),
SwinTransformerV2Stage (PatchMerging at the start of stages 1.., reduction THEN norm), SwinTransformerV2Block
(post-norm: x + norm1(attn(x)), x + norm2(mlp(x)); the cyclic shift, padding after it, the -100 mask of
get_attn_mask), WindowAttention (cosine attention: normalize(q) normalize(k)^T exp(min(logit_scale, ln 100)),
q_bias / zero k bias / v_bias, the continuous position bias 16 sigmoid(cpb_mlp(table)) over the log-spaced
relative coordinates of _make_pair_wise_relative_positions), the final norm, the mean over the grid and
head.fc. Inputs whose stage grids divide by the windows (no padding) are what the fixtures use.

forward(sd, img, cfg) -> (output [B, out], [per-block probabilities [B * windows, heads, S, S]]).
cfg: patch, window (target window side), heads per stage, pretrained_windows per stage (0: none), eps.
"""

import math

import torch

import reference_hub_vit as hub


def log_spaced_table(window, pretrained):
    rows = torch.arange(-(window - 1), window, dtype=torch.float64)
    table = torch.stack(torch.meshgrid(rows, rows, indexing="ij")).permute(1, 2, 0)
    divide = (pretrained - 1) if pretrained > 0 else (window - 1)
    table = table / divide * 8
    return torch.sign(table) * torch.log2(table.abs() + 1.0) / math.log2(8)


def relative_index(window):
    coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += window - 1
    rel[:, :, 1] += window - 1
    rel[:, :, 0] *= 2 * window - 1
    return rel.sum(-1)


def partition(x, w):
    B, H, W, C = x.shape
    return x.view(B, H // w, w, W // w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, w * w, C)


def reverse(windows, w, H, W):
    C = windows.shape[-1]
    B = windows.shape[0] // ((H // w) * (W // w))
    return windows.view(B, H // w, W // w, w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)


def shift_mask(H, W, window, shift):
    img = torch.zeros(1, H, W, 1, dtype=torch.float64)
    count = 0
    for h in ((0, -window), (-window, -shift), (-shift, None)):
        for w in ((0, -window), (-window, -shift), (-shift, None)):
            img[:, h[0]:h[1], w[0]:w[1], :] = count
            count += 1
    labels = partition(img, window).squeeze(-1)
    mask = labels.unsqueeze(1) - labels.unsqueeze(2)
    return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)


def window_attention(x, p, pre, heads, window, pretrained, mask):
    Bw, N, C = x.shape
    d = C // heads
    bias = torch.cat([p[pre + "q_bias"], torch.zeros_like(p[pre + "q_bias"]), p[pre + "v_bias"]])
    q, k, v = hub.linear(x, p[pre + "qkv.weight"], bias).reshape(Bw, N, 3, heads, d).permute(2, 0, 3, 1, 4)
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    k = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    scores = (q @ k.transpose(-2, -1)) * torch.clamp(p[pre + "logit_scale"], max=math.log(100.0)).exp()
    table = log_spaced_table(window, pretrained)
    hidden = torch.relu(hub.linear(table, p[pre + "cpb_mlp.0.weight"], p[pre + "cpb_mlp.0.bias"]))
    cpb = hub.linear(hidden, p[pre + "cpb_mlp.2.weight"]).view(-1, heads)
    rel = cpb[relative_index(window).view(-1)].view(N, N, -1).permute(2, 0, 1)
    scores = scores + 16 * torch.sigmoid(rel).unsqueeze(0)
    if mask is not None:
        windows = mask.shape[0]
        scores = (scores.view(-1, windows, heads, N, N) + mask.unsqueeze(1).unsqueeze(0)).view(-1, heads, N, N)
    probs = hub.softmax(scores)
    out = (probs @ v).transpose(1, 2).reshape(Bw, N, C)
    return hub.linear(out, p[pre + "proj.weight"], p[pre + "proj.bias"]), probs


def forward(sd, img, cfg):
    p = {k: v.detach().to(torch.float64) for k, v in sd.items()}
    eps, patch = cfg["eps"], cfg["patch"]
    w = p["patch_embed.proj.weight"]
    x, gh, gw = hub.patch_tokens(img.to(torch.float64), w, p["patch_embed.proj.bias"], patch)
    x = hub.layer_norm(x, p["patch_embed.norm.weight"], p["patch_embed.norm.bias"], eps)
    B, C = x.shape[0], x.shape[-1]
    x = x.view(B, gh, gw, C)
    probs_all = []
    stage = 0
    while f"layers.{stage}.blocks.0.norm1.weight" in p:
        sp = f"layers.{stage}."
        if sp + "downsample.reduction.weight" in p:
            Bm, H, W, Cm = x.shape
            x = x.reshape(Bm, H // 2, 2, W // 2, 2, Cm).permute(0, 1, 3, 4, 2, 5).flatten(3)
            x = hub.linear(x, p[sp + "downsample.reduction.weight"])
            x = hub.layer_norm(x, p[sp + "downsample.norm.weight"], p[sp + "downsample.norm.bias"], eps)
        H, W = x.shape[1], x.shape[2]
        heads = cfg["heads"][stage]
        block = 0
        while f"{sp}blocks.{block}.norm1.weight" in p:
            bp = f"{sp}blocks.{block}."
            target = cfg["window"]
            window = min(H, target)  # square grids and windows in the fixtures
            shift = 0 if (block % 2 == 0 or H <= target) else target // 2
            shifted = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2)) if shift else x
            mask = shift_mask(H, W, window, shift) if shift else None
            a, probs = window_attention(partition(shifted, window), p, bp + "attn.", heads, window,
                                        cfg["pretrained_windows"][stage], mask)
            probs_all.append(probs)
            a = reverse(a, window, H, W)
            if shift:
                a = torch.roll(a, shifts=(shift, shift), dims=(1, 2))
            x = x + hub.layer_norm(a, p[bp + "norm1.weight"], p[bp + "norm1.bias"], eps)
            m = hub.linear(hub.gelu_erf(hub.linear(x, p[bp + "mlp.fc1.weight"], p[bp + "mlp.fc1.bias"])),
                           p[bp + "mlp.fc2.weight"], p[bp + "mlp.fc2.bias"])
            x = x + hub.layer_norm(m, p[bp + "norm2.weight"], p[bp + "norm2.bias"], eps)
            block += 1
        stage += 1
    x = hub.layer_norm(x, p["norm.weight"], p["norm.bias"], eps)
    pooled = x.mean(dim=(1, 2))
    return hub.linear(pooled, p["head.fc.weight"], p["head.fc.bias"]), probs_all
