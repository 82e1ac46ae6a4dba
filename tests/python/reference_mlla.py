"""An independent float64 forward of MLLA (LeapLabTHU/MLLA models/mlla.py, NeurIPS 2024) in its authors' keys,
written from their code: Stem (conv1: Conv3x3/2 + BN + ReLU; conv2: two Conv3x3 + BN (ReLU after the first) added
to conv1's output; conv3: Conv3x3/2 + BN + ReLU, Conv1x1 + BN), layers.i.blocks.j of MLLABlock (x + cpe1(x);
act_res = SiLU(act_proj(norm1(x))); y = SiLU(dwc(in_proj(norm1(x)))); LinearAttention(y): q, k = ELU(qk(y)) + 1,
v = y, RoPE over all C channels at the layer's resolution for the numerator, z = 1 / (q . mean(k) + 1e-6) from the
un-rotated features, x = rope(q) (rope(k)^T v / n) z + lepe(v); x + out_proj(attn * act_res); x + cpe2(x);
x + mlp(norm2(x))), PatchMerging at the end of stages 0..n-2 (Conv1x1 + ReLU, depthwise Conv3x3/2 + ReLU,
Conv1x1 + BN), norm, mean, head. BatchNorm in eval mode (running statistics, eps 1e-5).
forward() returns the logits and each block's equivalent matrix [heads, n, n] of the first image
(w_ij = rope(q_i).rope(k_j) z_i / n)."""

import math

import torch
import torch.nn.functional as F


def _ln(x, sd, prefix):
    return F.layer_norm(x, x.shape[-1:], sd[prefix + ".weight"], sd[prefix + ".bias"], 1e-5)


def _lin(x, sd, prefix):
    return F.linear(x, sd[prefix + ".weight"], sd.get(prefix + ".bias"))


def conv_layer(x, sd, prefix, stride=1, padding=0, groups=1, act=True, norm=True):
    """ConvLayer: conv, BatchNorm (eval), ReLU."""
    x = F.conv2d(x, sd[prefix + ".conv.weight"], sd.get(prefix + ".conv.bias"), stride=stride, padding=padding,
                 groups=groups)
    if norm:
        n = prefix + ".norm."
        x = F.batch_norm(x, sd[n + "running_mean"], sd[n + "running_var"], sd[n + "weight"], sd[n + "bias"],
                         training=False, eps=1e-5)
    return F.relu(x) if act else x


def rope(x, base=10000.0):
    """mlla.py's RoPE of x [B, H, W, C] (float32 angles, as its buffer)."""
    B, H, W, C = x.shape
    k_max = C // 4
    theta = 1 / (base ** (torch.arange(k_max) / k_max))
    angles = torch.cat([t.unsqueeze(-1) * theta for t in torch.meshgrid([torch.arange(H), torch.arange(W)],
                                                                          indexing="ij")], dim=-1)
    rot = torch.complex(torch.cos(angles), torch.sin(angles)).to(torch.complex128)
    z = torch.view_as_complex(x.reshape(B, H, W, -1, 2).contiguous())
    return torch.view_as_real(rot * z).flatten(-2)


def linear_attention(x, sd, a, heads, H, W):
    b, n, c = x.shape
    d = c // heads
    qk = _lin(x, sd, a + "qk").reshape(b, n, 2, c).permute(2, 0, 1, 3)
    q, k, v = F.elu(qk[0]) + 1.0, F.elu(qk[1]) + 1.0, x
    q_rope = rope(q.reshape(b, H, W, c)).reshape(b, n, heads, d).permute(0, 2, 1, 3)
    k_rope = rope(k.reshape(b, H, W, c)).reshape(b, n, heads, d).permute(0, 2, 1, 3)
    q, k, v = (t.reshape(b, n, heads, d).permute(0, 2, 1, 3) for t in (q, k, v))
    z = 1 / (q @ k.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
    kv = (k_rope.transpose(-2, -1) * n ** -0.5) @ (v * n ** -0.5)
    out = (q_rope @ kv * z).transpose(1, 2).reshape(b, n, c)
    vimg = v.transpose(1, 2).reshape(b, H, W, c).permute(0, 3, 1, 2)
    out = out + F.conv2d(vimg, sd[a + "lepe.weight"], sd[a + "lepe.bias"], padding=1, groups=c).permute(
        0, 2, 3, 1).reshape(b, n, c)
    matrix = (q_rope[0] @ k_rope[0].transpose(-2, -1)) * z[0] / n
    return out, matrix


def _dw(x, sd, prefix, H, W):
    B, L, C = x.shape
    y = F.conv2d(x.reshape(B, H, W, C).permute(0, 3, 1, 2), sd[prefix + ".weight"], sd[prefix + ".bias"], padding=1,
                 groups=C)
    return y.flatten(2).permute(0, 2, 1)


def forward(sd, img, heads):
    sd = {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in sd.items()}
    x = img.to(torch.float64)
    x = conv_layer(x, sd, "patch_embed.conv1", stride=2, padding=1)
    x = conv_layer(conv_layer(x, sd, "patch_embed.conv2.0", padding=1), sd, "patch_embed.conv2.1", padding=1,
                   act=False) + x
    x = conv_layer(conv_layer(x, sd, "patch_embed.conv3.0", stride=2, padding=1), sd, "patch_embed.conv3.1",
                   act=False)
    B, C, H, W = x.shape
    x = x.flatten(2).transpose(1, 2)
    matrices = []
    s = 0
    while f"layers.{s}.blocks.0.norm1.weight" in sd:
        b = 0
        while f"layers.{s}.blocks.{b}.norm1.weight" in sd:
            p = f"layers.{s}.blocks.{b}."
            x = x + _dw(x, sd, p + "cpe1", H, W)
            shortcut = x
            y = _ln(x, sd, p + "norm1")
            act_res = F.silu(_lin(y, sd, p + "act_proj"))
            y = _lin(y, sd, p + "in_proj")
            y = F.silu(_dw(y, sd, p + "dwc", H, W))
            y, matrix = linear_attention(y, sd, p + "attn.", heads[s], H, W)
            x = shortcut + _lin(y * act_res, sd, p + "out_proj")
            x = x + _dw(x, sd, p + "cpe2", H, W)
            x = x + _lin(F.gelu(_lin(_ln(x, sd, p + "norm2"), sd, p + "mlp.fc1")), sd, p + "mlp.fc2")
            matrices.append(matrix)
            b += 1
        m = f"layers.{s}.downsample.conv."
        if m + "0.conv.weight" in sd:
            g = x.reshape(B, H, W, -1).permute(0, 3, 1, 2)
            g = conv_layer(g, sd, m + "0", norm=False)
            g = conv_layer(g, sd, m + "1", stride=2, padding=1, groups=g.shape[1], norm=False)
            g = conv_layer(g, sd, m + "2", act=False)
            H, W = g.shape[-2:]
            x = g.flatten(2).permute(0, 2, 1)
        s += 1
    x = _ln(x, sd, "norm").mean(dim=1)
    return _lin(x, sd, "head"), matrices


def make_state(r, embed, depths, heads, img, classes, mlp_ratio=2, merge_ratio=4):
    """Random weights in the authors' keys (BatchNorm statistics included; the RoPE buffers their state_dict holds
    too); r: fixture_tools.Init."""
    sd = {}

    def conv(prefix, cout, cin, k, bias, norm, groups=1):
        sd[prefix + ".conv.weight"] = r.normal([cout, cin // groups, k, k], 1.0 / math.sqrt(cin // groups * k * k))
        if bias:
            sd[prefix + ".conv.bias"] = r.normal([cout], 0.02)
        if norm:
            n = prefix + ".norm."
            sd[n + "weight"] = r.normal([cout], 0.1, 1.0)
            sd[n + "bias"] = r.normal([cout], 0.05)
            sd[n + "running_mean"] = r.normal([cout], 0.1)
            sd[n + "running_var"] = r.uniform([cout], 0.5, 1.5)
            sd[n + "num_batches_tracked"] = torch.tensor(100, dtype=torch.int64)

    h = embed // 2
    conv("patch_embed.conv1", h, 3, 3, False, True)
    conv("patch_embed.conv2.0", h, h, 3, False, True)
    conv("patch_embed.conv2.1", h, h, 3, False, True)
    conv("patch_embed.conv3.0", 4 * embed, h, 3, False, True)
    conv("patch_embed.conv3.1", embed, 4 * embed, 1, False, True)
    C, grid = embed, img // 4
    for s, depth in enumerate(depths):
        for b in range(depth):
            p = f"layers.{s}.blocks.{b}."
            for dw in ("cpe1", "dwc", "cpe2", "attn.lepe"):
                sd[p + dw + ".weight"] = r.normal([C, 1, 3, 3], 0.3)
                sd[p + dw + ".bias"] = r.normal([C], 0.05)
            for norm in ("norm1", "norm2"):
                sd[p + norm + ".weight"] = r.normal([C], 0.1, 1.0)
                sd[p + norm + ".bias"] = r.normal([C], 0.05)
            for lin, out in (("in_proj", C), ("act_proj", C), ("out_proj", C), ("attn.qk", 2 * C)):
                sd[p + lin + ".weight"] = r.normal([out, C], 1.2 / math.sqrt(C))
                sd[p + lin + ".bias"] = r.normal([out], 0.05)
            k_max = C // 4
            theta = 1 / (10000 ** (torch.arange(k_max) / k_max))
            angles = torch.cat([t.unsqueeze(-1) * theta for t in torch.meshgrid(
                [torch.arange(grid), torch.arange(grid)], indexing="ij")], dim=-1)
            sd[p + "attn.rope.rotations"] = torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1)
            sd[p + "mlp.fc1.weight"] = r.normal([mlp_ratio * C, C], 1.0 / math.sqrt(C))
            sd[p + "mlp.fc1.bias"] = r.normal([mlp_ratio * C], 0.02)
            sd[p + "mlp.fc2.weight"] = r.normal([C, mlp_ratio * C], 0.5 / math.sqrt(mlp_ratio * C))
            sd[p + "mlp.fc2.bias"] = r.normal([C], 0.02)
        if s + 1 < len(depths):
            m = f"layers.{s}.downsample.conv."
            wide = int(2 * C * merge_ratio)
            conv(m + "0", wide, C, 1, True, False)
            conv(m + "1", wide, wide, 3, True, False, groups=wide)
            conv(m + "2", 2 * C, wide, 1, True, True)
            C, grid = 2 * C, grid // 2
    sd["norm.weight"] = r.normal([C], 0.1, 1.0)
    sd["norm.bias"] = r.normal([C], 0.05)
    sd["head.weight"] = r.normal([classes, C], 1.0 / math.sqrt(C))
    sd["head.bias"] = r.normal([classes], 0.02)
    return sd
