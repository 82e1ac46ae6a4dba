"""An independent float64 forward of the successors' CSwin in their authors' keys, written from
LeapLabTHU/Agent-Attention agent_transformer/models/agent_cswin.py and LeapLabTHU/InLine models/inline_cswin.py:
CSWinTransformer (stage1_conv_embed = Conv2d(7, stride 4, padding 2) + LayerNorm; stage{i} of CSWinBlock;
merge{i} = Conv2d(3, stride 2, padding 1) + LayerNorm; norm; mean; head). A block has one branch over the whole
grid where it is the last stage or its split equals the grid (split = la_split_size for the successor's blocks,
split_size for the others), else two branches over channel halves with vertical then horizontal stripes.
LePEAttention: softmax at d^-0.5 in each stripe, plus LePE (get_v, a depthwise 3 x 3 per stripe). AgentAttention:
Agent Attention in each stripe with its biases at the stripe's size, plus LePE. InLineAttention: the injective
linear attention in each stripe plus its residual, whose 3 x 3 kernels are predicted from the block's INPUT
(before norm1) averaged over tokens, plus LePE. forward() returns the logits and the equivalent matrices of the
single-branch successor blocks ([heads, n, n] of the first image), None for the others."""

import math

import torch
import torch.nn.functional as F


def _ln(x, sd, prefix):
    return F.layer_norm(x, x.shape[-1:], sd[prefix + ".weight"], sd[prefix + ".bias"], 1e-5)


def _lin(x, sd, prefix):
    return F.linear(x, sd[prefix + ".weight"], sd.get(prefix + ".bias"))


def img2windows(img, h_sp, w_sp):
    B, C, H, W = img.shape
    return img.view(B, C, H // h_sp, h_sp, W // w_sp, w_sp).permute(0, 2, 4, 3, 5, 1).reshape(-1, h_sp * w_sp, C)


def windows2img(x, h_sp, w_sp, H, W):
    B = int(x.shape[0] / (H * W / h_sp / w_sp))
    return x.view(B, H // h_sp, W // w_sp, h_sp, w_sp, -1).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, -1)


def stripe(idx, resolution, split):
    return {-1: (resolution, resolution), 0: (resolution, split), 1: (split, resolution)}[idx]


def im2cswin(x, h_sp, w_sp):
    B, N, C = x.shape
    H = W = int(math.isqrt(N))
    return img2windows(x.transpose(-2, -1).reshape(B, C, H, W), h_sp, w_sp)  # [B', n, C]


def lepe_of(v, h_sp, w_sp, get_v):
    """(v per stripe [B', n, C], get_v per stripe [B', n, C])."""
    B, N, C = v.shape
    H = W = int(math.isqrt(N))
    x = v.transpose(-2, -1).reshape(B, C, H // h_sp, h_sp, W // w_sp, w_sp).permute(0, 2, 4, 1, 3, 5)
    x = x.reshape(-1, C, h_sp, w_sp)
    lepe = F.conv2d(x, get_v[0], get_v[1], padding=1, groups=C).reshape(-1, C, h_sp * w_sp).permute(0, 2, 1)
    return x.reshape(-1, C, h_sp * w_sp).permute(0, 2, 1), lepe


def branch(qkv, sd, a, heads, resolution, idx, split, kind, x_mean):
    q, k, v = qkv
    B, L, C = q.shape
    h_sp, w_sp = stripe(idx, resolution, split)
    q, k = im2cswin(q, h_sp, w_sp), im2cswin(k, h_sp, w_sp)
    v, lepe = lepe_of(v, h_sp, w_sp, (sd[a + "get_v.weight"], sd[a + "get_v.bias"]))
    b, n, c = q.shape
    d = c // heads
    scale = d ** -0.5
    qh, kh, vh = (t.reshape(b, n, heads, d).permute(0, 2, 1, 3) for t in (q, k, v))
    matrix = None
    if kind == "softmax":
        attn = ((qh * scale) @ kh.transpose(-2, -1)).softmax(-1)
        out = attn @ vh
    elif kind == "agent":
        agents = sd[a + "an_bias"].shape[1]
        pool = int(agents ** 0.5)
        agent = F.adaptive_avg_pool2d(q.reshape(b, h_sp, w_sp, c).permute(0, 3, 1, 2), (pool, pool))
        agent = agent.reshape(b, c, -1).permute(0, 2, 1).reshape(b, agents, heads, d).permute(0, 2, 1, 3)
        pb = F.interpolate(sd[a + "an_bias"], size=(h_sp, w_sp), mode="bilinear").reshape(1, heads, agents, -1)
        pb = pb + (sd[a + "ah_bias"] + sd[a + "aw_bias"]).reshape(1, heads, agents, -1)
        agent_attn = ((agent * scale) @ kh.transpose(-2, -1) + pb).softmax(-1)
        ab = F.interpolate(sd[a + "na_bias"], size=(h_sp, w_sp), mode="bilinear").reshape(1, heads, agents, -1)
        ab = ab.permute(0, 1, 3, 2) + (sd[a + "ha_bias"] + sd[a + "wa_bias"]).reshape(1, heads, -1, agents)
        q_attn = ((qh * scale) @ agent.transpose(-2, -1) + ab).softmax(-1)
        out = q_attn @ (agent_attn @ vh)
        matrix = (q_attn @ agent_attn)[0]
    else:  # inline
        hidden = F.conv1d(x_mean.unsqueeze(-1), sd[a + "residual.0.weight"], sd[a + "residual.0.bias"],
                          groups=heads)
        res_weight = F.conv1d(F.gelu(hidden), sd[a + "residual.2.weight"], sd[a + "residual.2.bias"],
                              groups=heads).reshape(b * c, 1, 3, 3)
        kv = (kh.transpose(-2, -1) * (scale / n) ** 0.5) @ (vh * (scale / n) ** 0.5)
        out = qh @ kv + (1 - qh @ kh.mean(dim=2, keepdim=True).transpose(-2, -1) * scale) * vh.mean(2, keepdim=True)
        vimg = vh.transpose(1, 2).reshape(b, h_sp, w_sp, c).permute(0, 3, 1, 2).reshape(1, b * c, h_sp, w_sp)
        residual = F.conv2d(vimg, res_weight, None, padding=(1, 1), groups=b * c).reshape(b, c, n).permute(0, 2, 1)
        out = out.transpose(1, 2).reshape(b, n, c) + residual
        q0, k0 = qh[0], kh[0]
        matrix = (q0 @ k0.transpose(-2, -1) - q0 @ k0.mean(1, keepdim=True).transpose(-2, -1)) * (scale / n) + 1.0 / n
    if kind != "inline":
        out = out.transpose(1, 2).reshape(b, n, c)
    out = out + lepe
    return windows2img(out, h_sp, w_sp, resolution, resolution).reshape(B, -1, C), matrix


def block_types(attn_type, depths, letters):
    out = []
    for i, depth in enumerate(depths):
        t = attn_type[i]
        out.append([(t if t != "M" else (letters[0] if b < int(attn_type[len(depths):]) else letters[1]))
                    for b in range(depth)])
    return out


def forward(sd, img, heads, split_size, la_split_size, attn_type):
    sd = {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in sd.items()}
    x = F.conv2d(img.to(torch.float64), sd["stage1_conv_embed.0.weight"], sd["stage1_conv_embed.0.bias"], stride=4,
                 padding=2)
    B, C, H, W = x.shape
    x = _ln(x.flatten(2).transpose(1, 2), sd, "stage1_conv_embed.2")
    depths = []
    while f"stage{len(depths) + 1}.0.norm1.weight" in sd:
        s, n = len(depths) + 1, 0
        while f"stage{s}.{n}.norm1.weight" in sd:
            n += 1
        depths.append(n)
    letters = "AB" if "A" in attn_type or "B" in attn_type else "IS"
    types = block_types(attn_type, depths, letters)
    kinds = {"A": "agent", "I": "inline", "B": "softmax", "S": "softmax"}
    matrices = []
    resolution = H
    for s, depth in enumerate(depths):
        if s > 0:
            m = f"merge{s}."
            g = x.transpose(-2, -1).reshape(B, -1, resolution, resolution)
            g = F.conv2d(g, sd[m + "conv.weight"], sd[m + "conv.bias"], stride=2, padding=1)
            resolution = g.shape[-1]
            x = _ln(g.flatten(2).transpose(1, 2), sd, m + "norm")
        for bi in range(depth):
            p = f"stage{s + 1}.{bi}."
            t = types[s][bi]
            split = la_split_size[s] if t in "AI" else split_size[s]
            one = s == len(depths) - 1 or resolution == split
            img_n = _ln(x, sd, p + "norm1")
            Cx = img_n.shape[-1]
            qkv = _lin(img_n, sd, p + "qkv").reshape(B, -1, 3, Cx).permute(2, 0, 1, 3)
            x_mean = x.mean(dim=1)
            if one:
                out, matrix = branch(qkv, sd, p + "attns.0.", heads[s], resolution, -1, split, kinds[t], x_mean)
            else:
                half = Cx // 2
                outs = [branch(qkv[..., i * half:(i + 1) * half], sd, p + f"attns.{i}.", heads[s] // 2, resolution,
                               i, split, kinds[t], x_mean[:, i * half:(i + 1) * half])[0] for i in range(2)]
                out, matrix = torch.cat(outs, dim=2), None
            x = x + _lin(out, sd, p + "proj")
            x = x + _lin(F.gelu(_lin(_ln(x, sd, p + "norm2"), sd, p + "mlp.fc1")), sd, p + "mlp.fc2")
            matrices.append(matrix if one and t in "AI" else None)
    x = _ln(x, sd, "norm").mean(dim=1)
    return _lin(x, sd, "head"), matrices


def make_state(r, embed, depths, heads, img, split_size, la_split_size, attn_type, agent_num, classes, mlp_ratio=2):
    """Random weights in the authors' keys at the shapes their constructor gives; r: fixture_tools.Init."""
    sd = {"stage1_conv_embed.0.weight": r.normal([embed, 3, 7, 7], 1.0 / math.sqrt(3 * 49)),
          "stage1_conv_embed.0.bias": r.normal([embed], 0.02),
          "stage1_conv_embed.2.weight": r.normal([embed], 0.1, 1.0),
          "stage1_conv_embed.2.bias": r.normal([embed], 0.05)}
    letters = "AB" if "A" in attn_type or "B" in attn_type else "IS"
    types = block_types(attn_type, depths, letters)
    C, resolution = embed, img // 4
    for s, depth in enumerate(depths):
        if s > 0:
            m = f"merge{s}."
            sd[m + "conv.weight"] = r.normal([2 * C, C, 3, 3], 1.0 / math.sqrt(9 * C))
            sd[m + "conv.bias"] = r.normal([2 * C], 0.02)
            sd[m + "norm.weight"] = r.normal([2 * C], 0.1, 1.0)
            sd[m + "norm.bias"] = r.normal([2 * C], 0.05)
            C, resolution = 2 * C, resolution // 2
        for bi in range(depth):
            p = f"stage{s + 1}.{bi}."
            t = types[s][bi]
            split = la_split_size[s] if t in "AI" else split_size[s]
            branches = 1 if (s == len(depths) - 1 or resolution == split) else 2
            for norm in ("norm1", "norm2"):
                sd[p + norm + ".weight"] = r.normal([C], 0.1, 1.0)
                sd[p + norm + ".bias"] = r.normal([C], 0.05)
            sd[p + "qkv.weight"] = r.normal([3 * C, C], 1.4 / math.sqrt(C))
            sd[p + "qkv.bias"] = r.normal([3 * C], 0.05)
            sd[p + "proj.weight"] = r.normal([C, C], 0.6 / math.sqrt(C))
            sd[p + "proj.bias"] = r.normal([C], 0.02)
            Cb, hb = C // branches, heads[s] // branches
            for i in range(branches):
                a = p + f"attns.{i}."
                sd[a + "get_v.weight"] = r.normal([Cb, 1, 3, 3], 0.3)
                sd[a + "get_v.bias"] = r.normal([Cb], 0.05)
                if t == "A":
                    A = agent_num[s]
                    h_sp, w_sp = (resolution, resolution) if branches == 1 else stripe(i, resolution, split)
                    sd[a + "an_bias"] = r.normal([hb, A, 7, 7], 0.5)
                    sd[a + "na_bias"] = r.normal([hb, A, 7, 7], 0.5)
                    sd[a + "ah_bias"] = r.normal([1, hb, A, h_sp, 1], 0.3)
                    sd[a + "aw_bias"] = r.normal([1, hb, A, 1, w_sp], 0.3)
                    sd[a + "ha_bias"] = r.normal([1, hb, h_sp, 1, A], 0.3)
                    sd[a + "wa_bias"] = r.normal([1, hb, 1, w_sp, A], 0.3)
                elif t == "I":
                    d = Cb // hb
                    sd[a + "residual.0.weight"] = r.normal([Cb, d, 1], 1.0 / math.sqrt(d))
                    sd[a + "residual.0.bias"] = r.normal([Cb], 0.05)
                    sd[a + "residual.2.weight"] = r.normal([9 * Cb, d, 1], 0.3 / math.sqrt(d))
                    sd[a + "residual.2.bias"] = r.normal([9 * Cb], 0.05)
            sd[p + "mlp.fc1.weight"] = r.normal([mlp_ratio * C, C], 1.0 / math.sqrt(C))
            sd[p + "mlp.fc1.bias"] = r.normal([mlp_ratio * C], 0.02)
            sd[p + "mlp.fc2.weight"] = r.normal([C, mlp_ratio * C], 0.5 / math.sqrt(mlp_ratio * C))
            sd[p + "mlp.fc2.bias"] = r.normal([C], 0.02)
    sd["norm.weight"] = r.normal([C], 0.1, 1.0)
    sd["norm.bias"] = r.normal([C], 0.05)
    sd["head.weight"] = r.normal([classes, C], 1.0 / math.sqrt(C))
    sd["head.bias"] = r.normal([classes], 0.02)
    return sd
