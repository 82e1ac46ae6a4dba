"""An independent float64 forward of the successors' PVT (PVT v1's skeleton) in their authors' keys, written from:
  * LeapLabTHU/Agent-Attention agent_transformer/models/agent_pvt.py: PyramidVisionTransformer (per stage
    patch_embed{i} = Conv2d(k = stride = 4, then 2) + LayerNorm; + pos_embed{i}, bilinearly resized when the grid
    differs; block{i} of Block: x + attn(norm1(x)), x + mlp(norm2(x)), norms eps 1e-6; no final norm; mean over
    the last grid; head), Attention (q, kv, sr conv + LayerNorm when sr > 1, softmax at d^-0.5) and
    AgentAttention (agents = AdaptiveAvgPool2d of q; key biases interpolate(an_bias, kv grid) + ah + aw, query
    biases interpolate(na_bias, grid)^T + ha + wa; q_attn @ (agent_attn @ v) + dwc(v), v bilinearly resized to
    the grid when sr > 1); 'A' blocks sr = PVT_LA_SR_RATIOS (1111), 'B' blocks sr_ratios;
  * LeapLabTHU/InLine models/inline_pvt.py: InLineAttention ('I'), the injective linear attention with the
    3 x 3 residual predicted from the mean token (sr 1: its k reshape needs every token);
  * ZacharyMeng/PolaFormer models/pola_pvt.py: PolaLinearAttention ('L': q, g = qg(x); keys and values from the
    sr-reduced grid; k + positional_encoding; / softplus(scale); p = 1 + alpha sigmoid(power); both polarities;
    v resampled linearly to N tokens when sr > 1, then the per-head dwc; times g), its unused `norm`.
forward() returns the logits and per block the equivalent matrix [heads, N, n] of the first image (softmax rows,
Agent's q_attn @ agent_attn, InLine's shifted scores, PolaFormer's same-sign matrix, its opposite-sign one in
`seconds`)."""

import math

import torch
import torch.nn.functional as F


def _ln(x, sd, prefix, eps):
    return F.layer_norm(x, x.shape[-1:], sd[prefix + ".weight"], sd[prefix + ".bias"], eps)


def _lin(x, sd, prefix):
    return F.linear(x, sd[prefix + ".weight"], sd.get(prefix + ".bias"))


def _reduced(x, sd, a, H, W, sr):
    if sr <= 1:
        return x
    b, n, c = x.shape
    y = F.conv2d(x.permute(0, 2, 1).reshape(b, c, H, W), sd[a + "sr.weight"], sd[a + "sr.bias"], stride=sr)
    return _ln(y.reshape(b, c, -1).permute(0, 2, 1), sd, a + "norm", 1e-5)


def softmax_attention(x, sd, a, heads, H, W, sr):
    b, n, c = x.shape
    d = c // heads
    q = _lin(x, sd, a + "q").reshape(b, n, heads, d).permute(0, 2, 1, 3)
    kv = _lin(_reduced(x, sd, a, H, W, sr), sd, a + "kv").reshape(b, -1, 2, heads, d).permute(2, 0, 3, 1, 4)
    attn = ((q @ kv[0].transpose(-2, -1)) * d ** -0.5).softmax(-1)
    return _lin((attn @ kv[1]).transpose(1, 2).reshape(b, n, c), sd, a + "proj"), attn[0], None


def agent_attention(x, sd, a, heads, H, W, sr):
    b, n, c = x.shape
    d = c // heads
    scale = d ** -0.5
    agents = sd[a + "an_bias"].shape[1]
    q = _lin(x, sd, a + "q")
    k, v = _lin(_reduced(x, sd, a, H, W, sr), sd, a + "kv").reshape(b, -1, 2, c).permute(2, 0, 1, 3)
    pool = int(agents ** 0.5)
    agent = F.adaptive_avg_pool2d(q.reshape(b, H, W, c).permute(0, 3, 1, 2), (pool, pool)).reshape(b, c, -1)
    agent = agent.permute(0, 2, 1).reshape(b, agents, heads, d).permute(0, 2, 1, 3)
    q = q.reshape(b, n, heads, d).permute(0, 2, 1, 3)
    k = k.reshape(b, n // sr ** 2, heads, d).permute(0, 2, 1, 3)
    v = v.reshape(b, n // sr ** 2, heads, d).permute(0, 2, 1, 3)
    kv_size = (H // sr, W // sr)
    pb = F.interpolate(sd[a + "an_bias"], size=kv_size, mode="bilinear").reshape(1, heads, agents, -1)
    pb = pb + (sd[a + "ah_bias"] + sd[a + "aw_bias"]).reshape(1, heads, agents, -1)
    agent_attn = ((agent * scale) @ k.transpose(-2, -1) + pb).softmax(-1)
    ab = F.interpolate(sd[a + "na_bias"], size=(H, W), mode="bilinear").reshape(1, heads, agents, -1)
    ab = ab.permute(0, 1, 3, 2) + (sd[a + "ha_bias"] + sd[a + "wa_bias"]).reshape(1, heads, -1, agents)
    q_attn = ((q * scale) @ agent.transpose(-2, -1) + ab).softmax(-1)
    out = (q_attn @ (agent_attn @ v)).transpose(1, 2).reshape(b, n, c)
    vimg = v.transpose(1, 2).reshape(b, H // sr, W // sr, c).permute(0, 3, 1, 2)
    if sr > 1:
        vimg = F.interpolate(vimg, size=(H, W), mode="bilinear")
    out = out + F.conv2d(vimg, sd[a + "dwc.weight"], sd[a + "dwc.bias"], padding=1, groups=c).permute(
        0, 2, 3, 1).reshape(b, n, c)
    return _lin(out, sd, a + "proj"), (q_attn @ agent_attn)[0], None


def inline_attention(x, sd, a, heads, H, W, sr):
    if sr != 1:
        raise ValueError("inline_pvt's InLineAttention reshapes k to every token: sr must be 1")
    b, n, c = x.shape
    d = c // heads
    scale = d ** -0.5
    q = _lin(x, sd, a + "q")
    k, v = _lin(x, sd, a + "kv").reshape(b, -1, 2, c).permute(2, 0, 1, 3)
    q, k, v = (t.reshape(b, n, heads, d).permute(0, 2, 1, 3) for t in (q, k, v))
    hidden = F.conv1d(x.mean(dim=1).unsqueeze(-1), sd[a + "residual.0.weight"], sd[a + "residual.0.bias"],
                      groups=heads)
    res_weight = F.conv1d(F.gelu(hidden), sd[a + "residual.2.weight"], sd[a + "residual.2.bias"],
                          groups=heads).reshape(b * c, 1, 3, 3)
    kv = (k.transpose(-2, -1) * (scale / n) ** 0.5) @ (v * (scale / n) ** 0.5)
    out = q @ kv + (1 - q @ k.mean(dim=2, keepdim=True).transpose(-2, -1) * scale) * v.mean(dim=2, keepdim=True)
    out = out.transpose(1, 2).reshape(b, n, c)
    vimg = v.transpose(1, 2).reshape(b, H, W, c).permute(0, 3, 1, 2).reshape(1, b * c, H, W)
    out = out + F.conv2d(vimg, res_weight, None, padding=(1, 1), groups=b * c).reshape(b, c, n).permute(0, 2, 1)
    q0, k0 = q[0], k[0]
    matrix = (q0 @ k0.transpose(-2, -1) - q0 @ k0.mean(dim=1, keepdim=True).transpose(-2, -1)) * (scale / n) + 1.0 / n
    return _lin(out, sd, a + "proj"), matrix, None


def pola_attention(x, sd, a, heads, H, W, sr, alpha=4.0):
    B, N, C = x.shape
    q, g = _lin(x, sd, a + "qg").reshape(B, N, 2, C).unbind(2)
    k, v = _lin(_reduced(x, sd, a, H, W, sr), sd, a + "kv").reshape(B, -1, 2, C).permute(2, 0, 1, 3)
    n = k.shape[1]
    k = k + sd[a + "positional_encoding"]
    scale = F.softplus(sd[a + "scale"])
    power = 1 + alpha * torch.sigmoid(sd[a + "power"])
    q, k = q / scale, k / scale
    q = q.reshape(B, N, heads, -1).permute(0, 2, 1, 3)
    k = k.reshape(B, n, heads, -1).permute(0, 2, 1, 3)
    v = v.reshape(B, n, heads, -1).permute(0, 2, 1, 3)
    q_pos, q_neg, k_pos, k_neg = F.relu(q) ** power, F.relu(-q) ** power, F.relu(k) ** power, F.relu(-k) ** power
    q_sim, q_opp, k = torch.cat([q_pos, q_neg], -1), torch.cat([q_neg, q_pos], -1), torch.cat([k_pos, k_neg], -1)
    v1, v2 = torch.chunk(v, 2, dim=-1)
    z_sim = 1 / (q_sim @ k.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
    x_sim = q_sim @ ((k.transpose(-2, -1) * n ** -0.5) @ (v1 * n ** -0.5)) * z_sim
    z_opp = 1 / (q_opp @ k.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
    x_opp = q_opp @ ((k.transpose(-2, -1) * n ** -0.5) @ (v2 * n ** -0.5)) * z_opp
    out = torch.cat([x_sim, x_opp], -1).transpose(1, 2).reshape(B, N, C)
    if sr > 1:
        v = F.interpolate(v.transpose(-2, -1).reshape(B * heads, -1, n), size=N, mode="linear").reshape(
            B, heads, -1, N).transpose(-2, -1)
    vimg = v.reshape(B * heads, H, W, -1).permute(0, 3, 1, 2)
    w = sd[a + "dwc.weight"]
    out = out + F.conv2d(vimg, w, sd[a + "dwc.bias"], padding=w.shape[-1] // 2, groups=w.shape[0]).reshape(
        B, C, N).permute(0, 2, 1)
    out = out * g
    same = (q_sim[0] @ k[0].transpose(-2, -1)) / n * z_sim[0]
    opposite = (q_opp[0] @ k[0].transpose(-2, -1)) / n * z_opp[0]
    return _lin(out, sd, a + "proj"), same, opposite


ATTENTION = {"A": agent_attention, "I": inline_attention, "L": pola_attention, "B": softmax_attention,
             "S": softmax_attention}


def forward(sd, img, heads, attn_type, sr_ratios, la_sr_ratios, patch=4, seconds=None):
    """Logits [B, classes] and the per-block equivalent matrices."""
    sd = {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in sd.items()}
    x = img.to(torch.float64)
    B = x.shape[0]
    stages = 0
    while f"patch_embed{stages + 1}.proj.weight" in sd:
        stages += 1
    matrices = []
    for i in range(stages):
        e = f"patch_embed{i + 1}."
        x = F.conv2d(x, sd[e + "proj.weight"], sd[e + "proj.bias"], stride=patch if i == 0 else 2)
        H, W = x.shape[-2:]
        x = _ln(x.flatten(2).transpose(1, 2), sd, e + "norm", 1e-5)
        pe = sd[f"pos_embed{i + 1}"]
        side = math.isqrt(pe.shape[1])
        if (side, side) != (H, W):
            pe = F.interpolate(pe.reshape(1, side, side, -1).permute(0, 3, 1, 2), size=(H, W), mode="bilinear")
            pe = pe.reshape(1, -1, H * W).permute(0, 2, 1)
        x = x + pe
        t = attn_type[i]
        sr = sr_ratios[i] if t in "BS" else la_sr_ratios[i]
        b = 0
        while f"block{i + 1}.{b}.norm1.weight" in sd:
            p = f"block{i + 1}.{b}."
            out, matrix, opposite = ATTENTION[t](_ln(x, sd, p + "norm1", 1e-6), sd, p + "attn.", heads[i], H, W, sr)
            x = x + out
            x = x + _lin(F.gelu(_lin(_ln(x, sd, p + "norm2", 1e-6), sd, p + "mlp.fc1")), sd, p + "mlp.fc2")
            matrices.append(matrix)
            if opposite is not None and seconds is not None:
                seconds.append(opposite)
            b += 1
        if i != stages - 1:
            x = x.reshape(B, H, W, -1).permute(0, 3, 1, 2)
    return _lin(x.mean(dim=1), sd, "head"), matrices


def make_state(r, dims, depths, heads, img, attn_type, sr_ratios, la_sr_ratios, agent_num, classes, mlp_ratio=2,
               patch=4):
    """Random weights in the authors' keys at the shapes their constructor gives; r: fixture_tools.Init."""
    sd = {}
    grid, in_ch = img // patch, 3
    for i, C in enumerate(dims):
        if i > 0:
            grid //= 2
        k = patch if i == 0 else 2
        e = f"patch_embed{i + 1}."
        sd[e + "proj.weight"] = r.normal([C, in_ch, k, k], 1.0 / math.sqrt(in_ch * k * k))
        sd[e + "proj.bias"] = r.normal([C], 0.02)
        sd[e + "norm.weight"] = r.normal([C], 0.1, 1.0)
        sd[e + "norm.bias"] = r.normal([C], 0.05)
        sd[f"pos_embed{i + 1}"] = r.normal([1, grid * grid, C], 0.3)
        t, h, d = attn_type[i], heads[i], C // heads[i]
        sr = sr_ratios[i] if t in "BS" else la_sr_ratios[i]
        keys = (grid // sr) ** 2
        for b in range(depths[i]):
            p = f"block{i + 1}.{b}."
            a = p + "attn."
            for norm in ("norm1", "norm2"):
                sd[p + norm + ".weight"] = r.normal([C], 0.1, 1.0)
                sd[p + norm + ".bias"] = r.normal([C], 0.05)
            if t == "L":
                sd[a + "qg.weight"] = r.normal([2 * C, C], 1.4 / math.sqrt(C))
                sd[a + "qg.bias"] = r.normal([2 * C], 0.05)
            else:
                sd[a + "q.weight"] = r.normal([C, C], 1.4 / math.sqrt(C))
                sd[a + "q.bias"] = r.normal([C], 0.05)
            sd[a + "kv.weight"] = r.normal([2 * C, C], 1.4 / math.sqrt(C))
            sd[a + "kv.bias"] = r.normal([2 * C], 0.05)
            sd[a + "proj.weight"] = r.normal([C, C], 0.6 / math.sqrt(C))
            sd[a + "proj.bias"] = r.normal([C], 0.02)
            if sr > 1:
                sd[a + "sr.weight"] = r.normal([C, C, sr, sr], 1.0 / math.sqrt(C * sr * sr))
                sd[a + "sr.bias"] = r.normal([C], 0.02)
                sd[a + "norm.weight"] = r.normal([C], 0.1, 1.0)
                sd[a + "norm.bias"] = r.normal([C], 0.05)
            if t == "A":
                A, s = agent_num[i], grid // sr
                sd[a + "dwc.weight"] = r.normal([C, 1, 3, 3], 0.3)
                sd[a + "dwc.bias"] = r.normal([C], 0.05)
                sd[a + "an_bias"] = r.normal([h, A, 7, 7], 0.5)
                sd[a + "na_bias"] = r.normal([h, A, 7, 7], 0.5)
                sd[a + "ah_bias"] = r.normal([1, h, A, s, 1], 0.3)
                sd[a + "aw_bias"] = r.normal([1, h, A, 1, s], 0.3)
                sd[a + "ha_bias"] = r.normal([1, h, grid, 1, A], 0.3)
                sd[a + "wa_bias"] = r.normal([1, h, 1, grid, A], 0.3)
            elif t == "I":
                sd[a + "residual.0.weight"] = r.normal([C, d, 1], 1.0 / math.sqrt(d))
                sd[a + "residual.0.bias"] = r.normal([C], 0.05)
                sd[a + "residual.2.weight"] = r.normal([9 * C, d, 1], 0.3 / math.sqrt(d))
                sd[a + "residual.2.bias"] = r.normal([9 * C], 0.05)
            elif t == "L":
                sd[a + "dwc.weight"] = r.normal([d, 1, 5, 5], 0.2)
                sd[a + "dwc.bias"] = r.normal([d], 0.05)
                sd[a + "power"] = r.normal([1, h, 1, d], 0.8)
                sd[a + "scale"] = r.normal([1, 1, C], 0.5)
                sd[a + "positional_encoding"] = r.normal([1, keys, C], 0.3)
            sd[p + "mlp.fc1.weight"] = r.normal([mlp_ratio * C, C], 1.0 / math.sqrt(C))
            sd[p + "mlp.fc1.bias"] = r.normal([mlp_ratio * C], 0.02)
            sd[p + "mlp.fc2.weight"] = r.normal([C, mlp_ratio * C], 0.5 / math.sqrt(mlp_ratio * C))
            sd[p + "mlp.fc2.bias"] = r.normal([C], 0.02)
        in_ch = C
    if "L" in attn_type:  # pola_pvt registers a final norm its forward does not use
        sd["norm.weight"] = r.normal([dims[-1]], 0.1, 1.0)
        sd["norm.bias"] = r.normal([dims[-1]], 0.05)
    sd["head.weight"] = r.normal([classes, dims[-1]], 1.0 / math.sqrt(dims[-1]))
    sd["head.bias"] = r.normal([classes], 0.02)
    return sd
