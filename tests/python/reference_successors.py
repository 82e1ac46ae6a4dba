"""Independent float64 reference of the FLatten authors' successor attentions in their DeiT models, written
from the authors' code (read with the search tool), NOT from attnscope's C++ sources:

  * LeapLabTHU/Agent-Attention @ 207ce3e, agent_transformer/models/agent_deit.py: AgentAttention.forward
    (agent tokens = AdaptiveAvgPool2d(sqrt(A)) of q's patch tokens; position_bias = cat(ac_bias,
    interpolate(an_bias, (W, W), bilinear) + ah_bias + aw_bias); agent_attn = softmax(agent * scale @ k^T +
    position_bias); agent_bias = cat(ca_bias, interpolate(na_bias)^T + ha_bias + wa_bias, dim=-2); q_attn =
    softmax(q * scale @ agent^T + agent_bias); x = q_attn @ (agent_attn @ v); the patch tokens gain dwc(v),
    a depthwise 3 x 3 conv over all C with bias); blocks past agent_layer are deit.py's softmax Block;
  * LeapLabTHU/InLine @ e463a6f, models/inline_deit.py: InLineAttention.forward (no kernel function; kv =
    (k^T sqrt(s/n)) @ (v sqrt(s/n)); x = q @ kv + (1 - q @ mean(k)^T s) * mean(v); res_weight =
    residual(x_in.mean(1)) as a 3 x 3 kernel per batch item and channel, applied to v's patch tokens without
    bias and added to them);
  * both models: timm 0.4.12's VisionTransformer (cls token, pos_embed with its slot, LayerNorm eps 1e-6, exact
    GELU, head on the normed class token).

  * LeapLabTHU/MLLA @ 66b6d29, models/mlla.py: LinearAttention.forward (q, k = elu + 1; RoPE(shape=(H, W, C))
    with k_max = C / 4, theta_k = 1 / 10000^(k / k_max) in float32, rows in the first k_max complex pairs and
    columns in the rest, applied to the full C channels before the head split; z = 1 / (q @ mean(k)^T + 1e-6)
    from the UN-rotated q, k; kv = (k_rope^T n^-0.5) @ (v n^-0.5); x = q_rope @ kv * z);
  * ZacharyMeng/PolaFormer @ 44cdd39, models/pola_pvt.py: PolaLinearAttention.forward (q, k / softplus(scale);
    power = 1 + alpha sigmoid(power); q_sim = cat(relu(q)^p, relu(-q)^p), q_opp = cat(relu(-q)^p, relu(q)^p),
    k = cat(relu(k)^p, relu(-k)^p); v1, v2 = chunk(v, 2, -1); z = 1 / (q @ mean(k)^T + 1e-6); kv = (k^T n^-0.5) @
    (v_i n^-0.5); x = cat(q_sim @ kv1 * z_sim, q_opp @ kv2 * z_opp)).

As swaps on a plain ViT (attnscope's --variant agent|inline|mlla|pola) the same computations run on the ViT's
own q, k, v without the learned parts a plain module lacks: no position biases and no dwc (Agent), no residual
(InLine), no LePE, gates or own value (MLLA: v is the ViT's value, prefix tokens at RoPE angle 0), and
PolaFormer's scale and power at their initial zeros (softplus(0) = ln 2, sigmoid(0) = 1/2), no dwc or gate.

forward(...) returns (output [B, out], per-layer equivalent matrices [B, h, T, T]): softmax's probabilities,
Agent's q_attn @ agent_attn, InLine's 1/n + (s/n)(q.k_j - q.k_mean).
"""

import math

import torch
import torch.nn.functional as F

import reference_hub_vit as hub


def f64(sd):
    return {k: v.detach().to(torch.float64) for k, v in sd.items()}


def heads_of(t, heads):  # [B, N, C] -> [B, h, N, d]
    B, N, C = t.shape
    return t.reshape(B, N, heads, C // heads).permute(0, 2, 1, 3)


def agent_attention(x, p, pre, heads, agents=None, learned=True):
    b, n, c = x.shape
    prefix = 1
    h = w = int(math.isqrt(n - prefix))
    d = c // heads
    scale = d ** -0.5
    qkv = hub.linear(x, p[pre + "qkv.weight"], p.get(pre + "qkv.bias")).reshape(b, n, 3, c).permute(2, 0, 1, 3)
    q, k, v = qkv[0], qkv[1], qkv[2]
    agent_num = p[pre + "an_bias"].shape[1] if learned else agents
    pool = int(round(agent_num ** 0.5))
    agent_tokens = F.adaptive_avg_pool2d(q[:, prefix:, :].reshape(b, h, w, c).permute(0, 3, 1, 2), (pool, pool))
    agent_tokens = agent_tokens.reshape(b, c, -1).permute(0, 2, 1)
    q, k, v = heads_of(q, heads), heads_of(k, heads), heads_of(v, heads)
    agent_tokens = agent_tokens.reshape(b, agent_num, heads, d).permute(0, 2, 1, 3)
    scores = (agent_tokens * scale) @ k.transpose(-2, -1)
    if learned:
        window = p[pre + "ah_bias"].shape[3]
        bias1 = F.interpolate(p[pre + "an_bias"], size=(window, window), mode="bilinear")
        bias1 = bias1.reshape(1, heads, agent_num, -1)
        bias2 = (p[pre + "ah_bias"] + p[pre + "aw_bias"]).reshape(1, heads, agent_num, -1)
        scores = scores + torch.cat([p[pre + "ac_bias"], bias1 + bias2], dim=-1)
    agent_attn = hub.softmax(scores)
    agent_v = agent_attn @ v
    scores = (q * scale) @ agent_tokens.transpose(-2, -1)
    if learned:
        bias1 = F.interpolate(p[pre + "na_bias"], size=(window, window), mode="bilinear")
        bias1 = bias1.reshape(1, heads, agent_num, -1).permute(0, 1, 3, 2)
        bias2 = (p[pre + "ha_bias"] + p[pre + "wa_bias"]).reshape(1, heads, -1, agent_num)
        scores = scores + torch.cat([p[pre + "ca_bias"], bias1 + bias2], dim=-2)
    q_attn = hub.softmax(scores)
    out = (q_attn @ agent_v).transpose(1, 2).reshape(b, n, c)
    if learned:
        v_ = v[:, :, prefix:, :].transpose(1, 2).reshape(b, h, w, c).permute(0, 3, 1, 2)
        conv = F.conv2d(v_, p[pre + "dwc.weight"], p[pre + "dwc.bias"], padding=1, groups=c)
        out = torch.cat([out[:, :prefix], out[:, prefix:] + conv.permute(0, 2, 3, 1).reshape(b, n - prefix, c)], 1)
    return hub.linear(out, p[pre + "proj.weight"], p[pre + "proj.bias"]), q_attn @ agent_attn


def inline_attention(x, p, pre, heads, learned=True):
    b, n, c = x.shape
    prefix = 1
    h = w = int(math.isqrt(n - prefix))
    d = c // heads
    scale = d ** -0.5
    qkv = hub.linear(x, p[pre + "qkv.weight"], p.get(pre + "qkv.bias")).reshape(b, n, 3, c).permute(2, 0, 1, 3)
    q, k, v = heads_of(qkv[0], heads), heads_of(qkv[1], heads), heads_of(qkv[2], heads)
    kv = (k.transpose(-2, -1) * (scale / n) ** 0.5) @ (v * (scale / n) ** 0.5)
    out = q @ kv + (1 - q @ k.mean(dim=2, keepdim=True).transpose(-2, -1) * scale) * v.mean(dim=2, keepdim=True)
    out = out.transpose(1, 2).reshape(b, n, c)
    if learned:
        hidden = F.conv1d(x.mean(dim=1).unsqueeze(-1), p[pre + "residual.0.weight"], p[pre + "residual.0.bias"],
                          groups=heads)
        res_weight = F.conv1d(hub.gelu_erf(hidden), p[pre + "residual.2.weight"], p[pre + "residual.2.bias"],
                              groups=heads).reshape(b * c, 1, 3, 3)
        v_ = v[:, :, prefix:, :].transpose(1, 2).reshape(b, h, w, c).permute(0, 3, 1, 2).reshape(1, b * c, h, w)
        residual = F.conv2d(v_, res_weight, None, padding=(1, 1), groups=b * c)
        out = torch.cat([out[:, :prefix], out[:, prefix:] + residual.reshape(b, c, n - prefix).permute(0, 2, 1)], 1)
    matrix = 1.0 / n + (scale / n) * (q @ k.transpose(-2, -1) - q @ k.mean(dim=2, keepdim=True).transpose(-2, -1))
    return hub.linear(out, p[pre + "proj.weight"], p[pre + "proj.bias"]), matrix


def mlla_rope(x, gh, gw):
    """mlla.py's RoPE of x [B, gh*gw, C] (patch tokens in grid order), as its module computes it."""
    b, n, c = x.shape
    k_max = c // 4
    theta = 1 / (10000 ** (torch.arange(k_max) / k_max))  # float32, as the buffer
    grid = torch.meshgrid([torch.arange(gh), torch.arange(gw)], indexing="ij")
    angles = torch.cat([t.unsqueeze(-1) * theta for t in grid], dim=-1)  # [gh, gw, C/2] float32
    rotation = torch.complex(torch.cos(angles).to(torch.float64), torch.sin(angles).to(torch.float64))
    pairs = torch.view_as_complex(x.reshape(b, gh, gw, c // 2, 2).contiguous())
    return torch.view_as_real(rotation * pairs).reshape(b, n, c)


def mlla_kernel(q, k, v, gh, gw, prefix):
    """MLLA's linear attention on per-head q, k, v [B, h, T, d] (float64): (out, matrix)."""
    b, heads, n, d = q.shape
    tokens = lambda t: t.transpose(1, 2).reshape(b, n, heads * d)
    q, k = F.elu(q) + 1.0, F.elu(k) + 1.0
    rotate = lambda t: heads_of(torch.cat([tokens(t)[:, :prefix], mlla_rope(tokens(t)[:, prefix:], gh, gw)], 1),
                                heads)
    q_rope, k_rope = rotate(q), rotate(k)
    z = 1 / (q @ k.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
    kv = (k_rope.transpose(-2, -1) * (n ** -0.5)) @ (v * (n ** -0.5))
    out = q_rope @ kv * z
    return out, (q_rope @ k_rope.transpose(-2, -1)) * z / n


def pola_kernel(q, k, v, alpha):
    """PolaFormer's linear attention on per-head q, k, v [B, h, T, d] (float64), its scale and power at their
    initial zeros: (out, same-sign matrix, opposite-sign matrix)."""
    n = k.shape[2]
    scale = F.softplus(torch.zeros(1, dtype=q.dtype))
    power = 1 + alpha * torch.sigmoid(torch.zeros(1, dtype=q.dtype))
    q, k = q / scale, k / scale
    q_pos, q_neg = F.relu(q) ** power, F.relu(-q) ** power
    k_pos, k_neg = F.relu(k) ** power, F.relu(-k) ** power
    q_sim, q_opp = torch.cat([q_pos, q_neg], dim=-1), torch.cat([q_neg, q_pos], dim=-1)
    k = torch.cat([k_pos, k_neg], dim=-1)
    v1, v2 = torch.chunk(v, 2, dim=-1)
    k_mean = k.mean(dim=-2, keepdim=True).transpose(-2, -1)
    z = 1 / (q_sim @ k_mean + 1e-6)
    kv = (k.transpose(-2, -1) * (n ** -0.5)) @ (v1 * (n ** -0.5))
    x_sim = q_sim @ kv * z
    z_opp = 1 / (q_opp @ k_mean + 1e-6)
    kv = (k.transpose(-2, -1) * (n ** -0.5)) @ (v2 * (n ** -0.5))
    x_opp = q_opp @ kv * z_opp
    same = (q_sim @ k.transpose(-2, -1)) * z / n
    opposite = (q_opp @ k.transpose(-2, -1)) * z_opp / n
    return torch.cat([x_sim, x_opp], dim=-1), same, opposite


def swapped_linear_attention(x, p, pre, heads, kernel, alpha=4.0):
    """MLLA's or PolaFormer's kernel on a plain ViT block's own q, k, v; the matrix is the rows attnscope shows
    (PolaFormer's: the same-sign one; its opposite-sign one is returned third)."""
    b, n, c = x.shape
    prefix = 1
    gh = gw = int(math.isqrt(n - prefix))
    qkv = hub.linear(x, p[pre + "qkv.weight"], p.get(pre + "qkv.bias")).reshape(b, n, 3, c).permute(2, 0, 1, 3)
    q, k, v = heads_of(qkv[0], heads), heads_of(qkv[1], heads), heads_of(qkv[2], heads)
    second = None
    if kernel == "mlla":
        out, matrix = mlla_kernel(q, k, v, gh, gw, prefix)
    else:
        out, matrix, second = pola_kernel(q, k, v, alpha)
    out = out.transpose(1, 2).reshape(b, n, c)
    return hub.linear(out, p[pre + "proj.weight"], p[pre + "proj.bias"]), matrix, second


def softmax_attention(x, p, pre, heads):
    b, n, c = x.shape
    d = c // heads
    qkv = hub.linear(x, p[pre + "qkv.weight"], p.get(pre + "qkv.bias")).reshape(b, n, 3, heads, d)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    attn = hub.softmax((q @ k.transpose(-2, -1)) * d ** -0.5)
    return hub.linear((attn @ v).transpose(1, 2).reshape(b, n, c), p[pre + "proj.weight"], p[pre + "proj.bias"]), attn


def forward(sd, img, heads, patch=16, swap=None, agents=None, alpha=4.0, second_matrices=None):
    """A DeiT of agent_deit's / inline_deit's keys (or a plain one), each block's attention as its keys say,
    or every block as `swap` ('agent' with `agents`, 'inline', 'mlla', 'pola' with `alpha`) without learned
    parts. PolaFormer's opposite-sign matrices are appended to `second_matrices` when it is a list."""
    p = f64(sd)
    eps = 1e-6
    x, gh, gw = hub.patch_tokens(img.to(torch.float64), p["patch_embed.proj.weight"], p["patch_embed.proj.bias"], patch)
    x = torch.cat([p["cls_token"].expand(x.shape[0], -1, -1), x], dim=1) + p["pos_embed"]
    matrices = []
    i = 0
    while f"blocks.{i}.norm1.weight" in p:
        pre = f"blocks.{i}."
        normed = hub.layer_norm(x, p[pre + "norm1.weight"], p[pre + "norm1.bias"], eps)
        if swap == "agent":
            a, m = agent_attention(normed, p, pre + "attn.", heads, agents=agents, learned=False)
        elif swap == "inline":
            a, m = inline_attention(normed, p, pre + "attn.", heads, learned=False)
        elif swap in ("mlla", "pola"):
            a, m, second = swapped_linear_attention(normed, p, pre + "attn.", heads, swap, alpha)
            if second_matrices is not None and second is not None:
                second_matrices.append(second)
        elif pre + "attn.an_bias" in p:
            a, m = agent_attention(normed, p, pre + "attn.", heads)
        elif pre + "attn.residual.0.weight" in p:
            a, m = inline_attention(normed, p, pre + "attn.", heads)
        else:
            a, m = softmax_attention(normed, p, pre + "attn.", heads)
        matrices.append(m)
        x = x + a
        hidden = hub.gelu_erf(hub.linear(hub.layer_norm(x, p[pre + "norm2.weight"], p[pre + "norm2.bias"], eps),
                                         p[pre + "mlp.fc1.weight"], p[pre + "mlp.fc1.bias"]))
        x = x + hub.linear(hidden, p[pre + "mlp.fc2.weight"], p[pre + "mlp.fc2.bias"])
        i += 1
    x = hub.layer_norm(x, p["norm.weight"], p["norm.bias"], eps)
    return hub.linear(x[:, 0], p["head.weight"], p["head.bias"]), matrices
