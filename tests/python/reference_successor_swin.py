"""An independent float64 forward of the FLatten authors' Swin successors in their own (Microsoft) layout,
written from their code:
  * LeapLabTHU/Agent-Attention, agent_transformer/models/agent_swin.py: AgentSwinTransformer, BasicLayer
    (attn_types from ATTN_TYPE, 'M<k>' = the first k blocks A; window_sizes = window for A blocks, else
    max(7, window // 8); shift window // 2 on odd blocks), SwinTransformerBlock (a window not smaller than
    the resolution becomes the resolution, shift 0), AgentAttention (agent tokens = AdaptiveAvgPool2d of q;
    position_bias = interpolate(an_bias, window, bilinear) + ah_bias + aw_bias; agent_bias =
    interpolate(na_bias)^T + ha_bias + wa_bias; q_attn @ (agent_attn @ v) + dwc(v)), WindowAttention,
    PatchMerging at the end of stages 0..n-2, final norm, mean, head;
  * LeapLabTHU/InLine, models/inline_swin.py: InLineSwin with 'I' blocks (InLineAttention, kernel_func
    identity: kv = (k^T sqrt(s/n)) @ (v sqrt(s/n)); x = q @ kv + (1 - q @ k_mean^T s) v_mean; plus the
    3 x 3 residual predicted from the window's mean token by residual = Conv1d(C, C, 1, groups=h), GELU,
    Conv1d(C, 9C, 1, groups=h));
  * ZacharyMeng/PolaFormer, models/pola_swin.py: PolaSwinTransformer with 'L' blocks (PolaLinearAttention:
    q, k, v, g = qkvg(x); k += positional_encoding; q, k / softplus(scale); p = 1 + alpha sigmoid(power); same-sign
    features [q+^p, q-^p] with the first half of v, opposite-sign [q-^p, q+^p] with the second, each normalised by
    q.mean(k) + 1e-6; plus dwc(v) per head; times g) and 'S' windows of 7 (12 above a window of 56).
forward() returns the logits and, per block, the equivalent attention of the global successor blocks
([heads, n, n] of the first image: Agent's q_attn @ agent_attn, InLine's (s/n)(q.k_j - q.k_mean) + 1/n,
PolaFormer's same-sign matrix, with its opposite-sign one in `seconds`) or None for window blocks."""

import math

import torch
import torch.nn.functional as F

LN_EPS = 1e-5


def _ln(x, sd, prefix):
    return F.layer_norm(x, x.shape[-1:], sd[prefix + ".weight"], sd[prefix + ".bias"], LN_EPS)


def _lin(x, sd, prefix):
    return F.linear(x, sd[prefix + ".weight"], sd.get(prefix + ".bias"))


def block_types(attn_type, depths):
    """Per-block letters as BasicLayer makes them: attn_type[i], or for 'M' the first int(rest) blocks the
    successor's letter (A, I or L) and the others the softmax letter."""
    n = len(depths)
    letters = "AB" if "A" in attn_type or "B" in attn_type else ("LS" if "L" in attn_type else "IS")
    out = []
    for i in range(n):
        t = attn_type[i] + (attn_type[n:] if attn_type[i] == "M" else "")
        out.append([(t if t[0] != "M" else (letters[0] if b < int(t[1:]) else letters[1])) for b in range(depths[i])])
    return out


def window_partition(x, ws):
    B, H, W, C = x.shape
    x = x.view(B, H // ws, ws, W // ws, ws, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws, ws, C)


def window_reverse(windows, ws, H, W):
    B = int(windows.shape[0] / (H * W / ws / ws))
    x = windows.view(B, H // ws, W // ws, ws, ws, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


def shift_mask(H, W, ws, shift, dtype):
    img_mask = torch.zeros((1, H, W, 1), dtype=dtype)
    cnt = 0
    for h in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
        for w in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
            img_mask[:, h, w, :] = cnt
            cnt += 1
    mw = window_partition(img_mask, ws).view(-1, ws * ws)
    m = mw.unsqueeze(1) - mw.unsqueeze(2)
    return m.masked_fill(m != 0, -100.0).masked_fill(m == 0, 0.0)


def relative_position_index(ws):
    coords = torch.stack(torch.meshgrid([torch.arange(ws), torch.arange(ws)], indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += ws - 1
    rel[:, :, 1] += ws - 1
    rel[:, :, 0] *= 2 * ws - 1
    return rel.sum(-1)


def window_attention(x, sd, a, heads, ws, mask):
    b, n, c = x.shape
    d = c // heads
    qkv = _lin(x, sd, a + "qkv").reshape(b, n, 3, heads, d).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0] * d ** -0.5, qkv[1], qkv[2]
    attn = q @ k.transpose(-2, -1)
    table = sd[a + "relative_position_bias_table"]
    bias = table[relative_position_index(ws).view(-1)].view(ws * ws, ws * ws, -1).permute(2, 0, 1)
    attn = attn + bias.unsqueeze(0)
    if mask is not None:
        nw = mask.shape[0]
        attn = attn.view(b // nw, nw, heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, heads, n, n)
    attn = attn.softmax(-1)
    return _lin((attn @ v).transpose(1, 2).reshape(b, n, c), sd, a + "proj"), None


def agent_attention(x, sd, a, heads, ws):
    b, n, c = x.shape
    h = w = int(n ** 0.5)
    d = c // heads
    scale = d ** -0.5
    agents = sd[a + "an_bias"].shape[1]
    qkv = _lin(x, sd, a + "qkv").reshape(b, n, 3, c).permute(2, 0, 1, 3)
    q, k, v = qkv[0], qkv[1], qkv[2]
    pool = int(agents ** 0.5)
    agent = F.adaptive_avg_pool2d(q.reshape(b, h, w, c).permute(0, 3, 1, 2), (pool, pool))
    agent = agent.reshape(b, c, -1).permute(0, 2, 1).reshape(b, agents, heads, d).permute(0, 2, 1, 3)
    q, k, v = (t.reshape(b, n, heads, d).permute(0, 2, 1, 3) for t in (q, k, v))
    pb1 = F.interpolate(sd[a + "an_bias"], size=(ws, ws), mode="bilinear").reshape(1, heads, agents, -1)
    pb2 = (sd[a + "ah_bias"] + sd[a + "aw_bias"]).reshape(1, heads, agents, -1)
    agent_attn = ((agent * scale) @ k.transpose(-2, -1) + pb1 + pb2).softmax(-1)
    ab1 = F.interpolate(sd[a + "na_bias"], size=(ws, ws), mode="bilinear").reshape(1, heads, agents, -1)
    ab2 = (sd[a + "ha_bias"] + sd[a + "wa_bias"]).reshape(1, heads, -1, agents)
    q_attn = ((q * scale) @ agent.transpose(-2, -1) + ab1.permute(0, 1, 3, 2) + ab2).softmax(-1)
    out = (q_attn @ (agent_attn @ v)).transpose(1, 2).reshape(b, n, c)
    vimg = v.transpose(1, 2).reshape(b, h, w, c).permute(0, 3, 1, 2)
    out = out + F.conv2d(vimg, sd[a + "dwc.weight"], sd[a + "dwc.bias"], padding=1, groups=c).permute(
        0, 2, 3, 1).reshape(b, n, c)
    return _lin(out, sd, a + "proj"), (q_attn @ agent_attn)[0]


def inline_attention(x, sd, a, heads, ws):
    b, n, c = x.shape
    h = w = int(n ** 0.5)
    d = c // heads
    scale = d ** -0.5
    qkv = _lin(x, sd, a + "qkv").reshape(b, n, 3, c).permute(2, 0, 1, 3)
    q, k, v = (t.reshape(b, n, heads, d).permute(0, 2, 1, 3) for t in (qkv[0], qkv[1], qkv[2]))
    hidden = F.conv1d(x.mean(dim=1).unsqueeze(-1), sd[a + "residual.0.weight"], sd[a + "residual.0.bias"],
                      groups=heads)
    res_weight = F.conv1d(F.gelu(hidden), sd[a + "residual.2.weight"], sd[a + "residual.2.bias"],
                          groups=heads).reshape(b * c, 1, 3, 3)
    kv = (k.transpose(-2, -1) * (scale / n) ** 0.5) @ (v * (scale / n) ** 0.5)
    out = q @ kv + (1 - q @ k.mean(dim=2, keepdim=True).transpose(-2, -1) * scale) * v.mean(dim=2, keepdim=True)
    out = out.transpose(1, 2).reshape(b, n, c)
    vimg = v.transpose(1, 2).reshape(b, h, w, c).permute(0, 3, 1, 2).reshape(1, b * c, h, w)
    out = out + F.conv2d(vimg, res_weight, None, padding=(1, 1), groups=b * c).reshape(b, c, n).permute(0, 2, 1)
    q0, k0 = q[0], k[0]
    matrix = (q0 @ k0.transpose(-2, -1) - q0 @ k0.mean(dim=1, keepdim=True).transpose(-2, -1)) * (scale / n) + 1.0 / n
    return _lin(out, sd, a + "proj"), matrix


def pola_attention(x, sd, a, heads, ws, alpha=4.0):
    B, N, C = x.shape
    q, k, v, g = _lin(x, sd, a + "qkvg").reshape(B, N, 4, C).permute(2, 0, 1, 3).unbind(0)
    k = k + sd[a + "positional_encoding"]
    scale = F.softplus(sd[a + "scale"])
    power = 1 + alpha * torch.sigmoid(sd[a + "power"])
    q, k = q / scale, k / scale
    q, k, v = (t.reshape(B, N, heads, -1).permute(0, 2, 1, 3) for t in (q, k, v))
    q_pos, q_neg, k_pos, k_neg = F.relu(q) ** power, F.relu(-q) ** power, F.relu(k) ** power, F.relu(-k) ** power
    q_sim, q_opp, k = torch.cat([q_pos, q_neg], -1), torch.cat([q_neg, q_pos], -1), torch.cat([k_pos, k_neg], -1)
    v1, v2 = torch.chunk(v, 2, dim=-1)
    z_sim = 1 / (q_sim @ k.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
    x_sim = q_sim @ ((k.transpose(-2, -1) * N ** -0.5) @ (v1 * N ** -0.5)) * z_sim
    z_opp = 1 / (q_opp @ k.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
    x_opp = q_opp @ ((k.transpose(-2, -1) * N ** -0.5) @ (v2 * N ** -0.5)) * z_opp
    out = torch.cat([x_sim, x_opp], -1).transpose(1, 2).reshape(B, N, C)
    H = W = int(N ** 0.5)
    vimg = v.reshape(B * heads, H, W, -1).permute(0, 3, 1, 2)
    w = sd[a + "dwc.weight"]
    out = out + F.conv2d(vimg, w, sd[a + "dwc.bias"], padding=w.shape[-1] // 2, groups=w.shape[0]).reshape(
        B, C, N).permute(0, 2, 1)
    out = out * g
    same = (q_sim[0] @ k[0].transpose(-2, -1)) / N * z_sim[0]
    opposite = (q_opp[0] @ k[0].transpose(-2, -1)) / N * z_opp[0]
    return _lin(out, sd, a + "proj"), same, opposite


def block_window(kind, letter, window_size):
    """The window a block asks for: the successor's blocks the configured one, softmax blocks max(7, w // 8)
    (Agent, InLine) or 7, 12 above 56 (PolaFormer)."""
    if letter in "AIL":
        return window_size
    return (7 if window_size <= 56 else 12) if kind == "pola" else max(7, window_size // 8)


def forward(sd, img, heads, window_size, attn_type, patch=4, seconds=None):
    """Logits [B, classes] and the per-block equivalent matrices (None for window blocks)."""
    sd = {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in sd.items()}
    x = F.conv2d(img.to(torch.float64), sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=patch)
    B, C, H0, W0 = x.shape
    x = _ln(x.flatten(2).transpose(1, 2), sd, "patch_embed.norm")
    depths = []
    while f"layers.{len(depths)}.blocks.0.norm1.weight" in sd:
        s, n = len(depths), 0
        while f"layers.{s}.blocks.{n}.norm1.weight" in sd:
            n += 1
        depths.append(n)
    types = block_types(attn_type, depths)
    matrices = []
    for s, depth in enumerate(depths):
        H, W = H0 >> s, W0 >> s
        for bi in range(depth):
            t = types[s][bi]
            ws = block_window("pola" if "L" in attn_type else "", t, window_size)
            shift = 0 if bi % 2 == 0 else ws // 2
            if min(H, W) <= ws:
                shift, ws = 0, min(H, W)
            p = f"layers.{s}.blocks.{bi}."
            shortcut = x
            y = _ln(x, sd, p + "norm1").view(B, H, W, -1)
            if shift:
                y = torch.roll(y, shifts=(-shift, -shift), dims=(1, 2))
            yw = window_partition(y, ws).view(-1, ws * ws, y.shape[-1])
            if t == "A":
                out, matrix = agent_attention(yw, sd, p + "attn.", heads[s], ws)
            elif t == "I":
                out, matrix = inline_attention(yw, sd, p + "attn.", heads[s], ws)
            elif t == "L":
                out, matrix, opposite = pola_attention(yw, sd, p + "attn.", heads[s], ws)
                if seconds is not None:
                    seconds.append(opposite)
            else:
                mask = shift_mask(H, W, ws, shift, yw.dtype) if shift else None
                out, matrix = window_attention(yw, sd, p + "attn.", heads[s], ws, mask)
            y = window_reverse(out.view(-1, ws, ws, out.shape[-1]), ws, H, W)
            if shift:
                y = torch.roll(y, shifts=(shift, shift), dims=(1, 2))
            x = shortcut + y.reshape(B, H * W, -1)
            m = _ln(x, sd, p + "norm2")
            x = x + _lin(F.gelu(_lin(m, sd, p + "mlp.fc1")), sd, p + "mlp.fc2")
            matrices.append(matrix)
        if f"layers.{s}.downsample.reduction.weight" in sd:
            g = x.view(B, H, W, -1)
            g = torch.cat([g[:, 0::2, 0::2], g[:, 1::2, 0::2], g[:, 0::2, 1::2], g[:, 1::2, 1::2]], -1)
            x = F.linear(_ln(g.view(B, -1, g.shape[-1]), sd, f"layers.{s}.downsample.norm"),
                         sd[f"layers.{s}.downsample.reduction.weight"])
    x = _ln(x, sd, "norm").mean(dim=1)
    return _lin(x, sd, "head"), matrices


def make_state(r, kind, embed, depths, heads, img, window_size, attn_type, agent_num, classes, patch=4):
    """Random weights in the authors' keys (the state_dict their module saves, buffers included) at the
    shapes their constructor gives for `img`; r: fixture_tools.Init."""
    sd = {"patch_embed.proj.weight": r.normal([embed, 3, patch, patch], 1.0 / math.sqrt(3 * patch * patch)),
          "patch_embed.proj.bias": r.normal([embed], 0.02),
          "patch_embed.norm.weight": r.normal([embed], 0.1, 1.0), "patch_embed.norm.bias": r.normal([embed], 0.05)}
    types = block_types(attn_type, depths)
    grid = img // patch
    C = embed
    for s, depth in enumerate(depths):
        res, h = grid >> s, heads[s]
        for bi in range(depth):
            t = types[s][bi]
            ws = block_window(kind, t, window_size)
            shift = 0 if bi % 2 == 0 else ws // 2
            if res <= ws:
                shift, ws = 0, res
            p = f"layers.{s}.blocks.{bi}."
            for norm in ("norm1", "norm2"):
                sd[p + norm + ".weight"] = r.normal([C], 0.1, 1.0)
                sd[p + norm + ".bias"] = r.normal([C], 0.05)
            a = p + "attn."
            if t == "S" or t == "B":
                sd[a + "relative_position_bias_table"] = r.normal([(2 * ws - 1) ** 2, h], 0.6)
                sd[a + "relative_position_index"] = relative_position_index(ws)
            if t == "L":
                sd[a + "qkvg.weight"] = r.normal([4 * C, C], 1.4 / math.sqrt(C))
                sd[a + "qkvg.bias"] = r.normal([4 * C], 0.05)
            else:
                sd[a + "qkv.weight"] = r.normal([3 * C, C], 1.4 / math.sqrt(C))
                sd[a + "qkv.bias"] = r.normal([3 * C], 0.05)
            sd[a + "proj.weight"] = r.normal([C, C], 0.6 / math.sqrt(C))
            sd[a + "proj.bias"] = r.normal([C], 0.02)
            if t == "A":
                A = agent_num[s]
                sd[a + "dwc.weight"] = r.normal([C, 1, 3, 3], 0.3)
                sd[a + "dwc.bias"] = r.normal([C], 0.05)
                sd[a + "an_bias"] = r.normal([h, A, 7, 7], 0.5)
                sd[a + "na_bias"] = r.normal([h, A, 7, 7], 0.5)
                sd[a + "ah_bias"] = r.normal([1, h, A, ws, 1], 0.3)
                sd[a + "aw_bias"] = r.normal([1, h, A, 1, ws], 0.3)
                sd[a + "ha_bias"] = r.normal([1, h, ws, 1, A], 0.3)
                sd[a + "wa_bias"] = r.normal([1, h, 1, ws, A], 0.3)
            elif t == "L":
                d = C // h
                sd[a + "dwc.weight"] = r.normal([d, 1, 5, 5], 0.2)
                sd[a + "dwc.bias"] = r.normal([d], 0.05)
                sd[a + "power"] = r.normal([1, h, 1, d], 0.8)
                sd[a + "scale"] = r.normal([1, 1, C], 0.5)
                sd[a + "positional_encoding"] = r.normal([1, ws * ws, C], 0.3)
            elif t == "I":
                sd[a + "residual.0.weight"] = r.normal([C, C // h, 1], 1.0 / math.sqrt(C // h))
                sd[a + "residual.0.bias"] = r.normal([C], 0.05)
                sd[a + "residual.2.weight"] = r.normal([9 * C, C // h, 1], 0.3 / math.sqrt(C // h))
                sd[a + "residual.2.bias"] = r.normal([9 * C], 0.05)
            sd[p + "mlp.fc1.weight"] = r.normal([4 * C, C], 1.0 / math.sqrt(C))
            sd[p + "mlp.fc1.bias"] = r.normal([4 * C], 0.02)
            sd[p + "mlp.fc2.weight"] = r.normal([C, 4 * C], 0.5 / math.sqrt(4 * C))
            sd[p + "mlp.fc2.bias"] = r.normal([C], 0.02)
            if shift:
                sd[p + "attn_mask"] = shift_mask(res, res, ws, shift, torch.float32)
        if s + 1 < len(depths):
            d = f"layers.{s}.downsample."
            sd[d + "reduction.weight"] = r.normal([2 * C, 4 * C], 1.0 / math.sqrt(4 * C))
            sd[d + "norm.weight"] = r.normal([4 * C], 0.1, 1.0)
            sd[d + "norm.bias"] = r.normal([4 * C], 0.05)
            C *= 2
    sd["norm.weight"] = r.normal([C], 0.1, 1.0)
    sd["norm.bias"] = r.normal([C], 0.05)
    sd["head.weight"] = r.normal([classes, C], 1.0 / math.sqrt(C))
    sd["head.bias"] = r.normal([classes], 0.02)
    return sd
