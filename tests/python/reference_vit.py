"""Independent pure-PyTorch reference of timm-layout ViT / DeiT with pluggable attention variants.

Written from ../shared/reference/attention-variants.md (the authority on the computations) and
the parity-test brief, NOT from attnscope's C++ sources. It serves two purposes:

* the ground truth for the C++ parity tests (tests/python/make_parity_cases.py runs it in float64);
* the "PyTorch eager" baseline of bench/pytorch_forward.py (float32; the softmax path is written
  exactly as timm's non-fused Attention: qkv linear, reshape/permute, q*scale @ k^T, softmax, @ v, proj).

Model layout (timm key names): patch_embed.proj, cls_token?, dist_token?, reg_token?, pos_embed,
blocks.{i}.{norm1, attn.*, ls1.gamma?, norm3?, local_mp.*?, norm2, mlp.fc1, mlp.fc2, ls2.gamma?},
norm?, fc_norm?, head, head_dist?.

Attention module kinds (detected from the keys of each block):
  plain    attn.qkv [3C,C] (+bias?), attn.proj
  focused  plain + attn.dwc.{weight [d,1,k,k], bias}, attn.scale [1,1,C]?, attn.positional_encoding?
  enhanced plain + attn.temperature [h,1,1] (block may carry norm3 + local_mp = LCM)
  anchor   attn.x_to_emb.weight [2C,C] (qk | v), attn.dist_anchor_B.weight [m,d], attn.to_out.0
Every module can run every variant (softmax, linear, focused, enhanced, window, anchor, agent, inline) from its own
q, k, v, selected by `Settings`.

Equivalent ("display") attention matrices, per head, T x T (prefix + patch tokens):
  softmax/window  A = softmax(q k^T d^-0.5) (masked to windows)
  linear          A_ij = S_ij / (sum_j S_ij + 1e-6), S = ReLU(q) ReLU(k)^T
  focused         A_ij = S_ij / T_i * z_i (the equivalent matrix adds the mean-over-channels DWC band
                  between patch tokens)
  enhanced        A_ij = S_ij * temperature / clamp_min(sum_j S_ij, 100)
  anchor          A Delta^-1 A^T
  agent           softmax(q a^T s) softmax(a k^T s), a = q's patches average-pooled to sqrt(m) x sqrt(m)
  inline          1/n + (s/n)(q k^T - q k_mean^T)

Choices made where the written spec is silent (the C++ side must make the same ones):
* pos_embed layout is read from its length L: prefix tokens included when L - num_prefix is a
  perfect square (checked first), else patches only (timm no_embed_class) when L is a square.
* Top-mass anchor selection (native anchors, 0 < anchors < m) is done per head (and per image):
  each head keeps its own m' anchors; ties go to the lower index (stable sort).
* Pooled anchors: r = round-half-up(sqrt(m H / W)) (= std::round), clamped to [1, min(m, H)].
* fc_norm, when present, is applied to the pooled feature also for cls-token pooling (timm order:
  norm -> pool -> fc_norm -> head); distilled heads use norm only (no fc_norm in that layout).
* A positional_encoding whose length is neither T nor N raises (no resizing is defined).
* Settings.dwc defaults to True (a native FLatten module runs as trained); cases set it explicitly.
"""

import math
from dataclasses import dataclass, asdict

import torch
import torch.nn.functional as F

LN_EPS = 1e-6
BN_EPS = 1e-5
# When True, every recorded display matrix A is checked against the computed output (A @ v == out)
# for the variants where that identity holds (all but focused with DWC); used by the case generator.
CHECK_MATRIX = False
VARIANTS = ("softmax", "linear", "focused", "enhanced", "window", "anchor", "agent", "inline", "mlla", "pola")
DEFAULT_WINDOW = 7
DEFAULT_POOLED_ANCHORS = 30


# --------------------------------------------------------------------------------------------
# Runtime settings
# --------------------------------------------------------------------------------------------
@dataclass
class Settings:
    """Runtime attention settings (one per parity case).

    variant: one of VARIANTS. p: focusing factor of FLatten. window: window side (0 = global; the
    variant "window" uses DEFAULT_WINDOW when 0). anchors: anchor count (0 = all learned anchors,
    or DEFAULT_POOLED_ANCHORS pooled from K on a module without anchors). dwc: use the FLatten DWC
    when the module has one (only in the focused variant). norm: "all" (f_p norms over all C
    channels, the authors' code) or "head" (over each head's d channels, the paper's formula).
    """

    variant: str = "softmax"
    p: float = 3.0
    window: int = 0
    anchors: int = 0
    agents: int = 0
    alpha: float = 4.0
    dwc: bool = True
    norm: str = "all"

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}")
        if self.norm not in ("all", "head"):
            raise ValueError(f"unknown norm {self.norm!r}")
        if self.window < 0 or self.anchors < 0:
            raise ValueError("window and anchors must be >= 0")

    @staticmethod
    def from_dict(d):
        return Settings(variant=d.get("variant", "softmax"), p=float(d.get("p", 3.0)),
                        window=int(d.get("window", 0)), anchors=int(d.get("anchors", 0)),
                        agents=int(d.get("agents", 0)), alpha=float(d.get("alpha", 4.0)),
                        dwc=bool(d.get("dwc", True)), norm=d.get("norm", "all"))

    def to_dict(self):
        return asdict(self)

    def effective_window(self, gh, gw):
        """Window side actually used on a gh x gw grid, or 0 for global attention."""
        if self.variant in ("anchor", "agent", "inline", "mlla", "pola"):  # global by construction
            return 0
        w = self.window
        if self.variant == "window" and w == 0:
            w = DEFAULT_WINDOW
        if w <= 0 or (w >= gh and w >= gw):
            return 0
        return w


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------
def window_mask(gh, gw, num_prefix, w, device=None):
    """Bool [T, T] mask (True = query row may see key column) for w x w windows.

    Windows tile the grid from the top-left (index (row // w, col // w)); edge windows are smaller.
    Patch queries see the keys of their own window plus every prefix token; prefix queries see all.
    """
    n = gh * gw
    t = num_prefix + n
    idx = torch.arange(n, device=device)
    win = (idx // gw // w) * ((gw + w - 1) // w) + (idx % gw) // w
    mask = torch.ones(t, t, dtype=torch.bool, device=device)
    mask[num_prefix:, num_prefix:] = win[:, None] == win[None, :]
    return mask


def pooled_anchor_regions(gh, gw, m):
    """Regions (row0, row1, col0, col1) of the m pooled anchors on a gh x gw grid, in anchor order."""
    if m <= 0:
        raise ValueError("pooled anchors need anchors > 0")
    r = int(math.floor(math.sqrt(m * gh / gw) + 0.5))  # round half up (= std::round for x > 0)
    r = max(1, min(r, min(m, gh)))
    regions = []
    for b in range(r):
        r0 = (b * gh) // r
        r1 = -((-(b + 1) * gh) // r)  # ceil
        cb = m // r + (1 if b < m % r else 0)
        for j in range(cb):
            c0 = (j * gw) // cb
            c1 = -((-(j + 1) * gw) // cb)
            regions.append((r0, r1, c0, c1))
    return regions


def pooled_anchors(k, num_prefix, gh, gw, m):
    """Anchors per head averaged from the raw keys of the patch tokens: k [B,h,T,d] -> [B,h,m,d]."""
    B, h, _, d = k.shape
    grid = k[:, :, num_prefix:, :].reshape(B, h, gh, gw, d)
    us = [grid[:, :, r0:r1, c0:c1, :].mean(dim=(2, 3)) for (r0, r1, c0, c1) in pooled_anchor_regions(gh, gw, m)]
    return torch.stack(us, dim=2)


def dwc_band(weight, num_prefix, gh, gw):
    """Display matrix of the FLatten DWC [T, T]: for patch query i and patch key j at grid offset
    (dy, dx) = pos(j) - pos(i) within the kernel, the mean over the d channels of
    weight[:, 0, k//2 + dy, k//2 + dx]; zero elsewhere (prefix rows and columns)."""
    kh, kw = weight.shape[-2], weight.shape[-1]
    taps = weight[:, 0].mean(dim=0)  # [kh, kw]
    n = gh * gw
    t = num_prefix + n
    rows = torch.arange(n) // gw
    cols = torch.arange(n) % gw
    dy = rows[None, :] - rows[:, None]
    dx = cols[None, :] - cols[:, None]
    inside = (dy.abs() <= kh // 2) & (dx.abs() <= kw // 2)
    vals = taps[(dy + kh // 2).clamp(0, kh - 1), (dx + kw // 2).clamp(0, kw - 1)]
    band = torch.zeros(t, t, dtype=weight.dtype)
    band[num_prefix:, num_prefix:] = torch.where(inside, vals, torch.zeros_like(vals))
    return band


def focusing(x, p):
    """f_p(x) = (x^p / ||x^p||) * ||x|| along the last dim (x > 0 here)."""
    x_norm = x.norm(dim=-1, keepdim=True)
    xp = x ** p
    return (xp / xp.norm(dim=-1, keepdim=True)) * x_norm


# --------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------
class Attention:
    """One attention module with its weights; __call__ runs the variant chosen by Settings."""

    def __init__(self, sd, prefix, dim, heads_hint):
        g = lambda k: sd.get(prefix + k)
        self.dim = dim
        self.kind = "plain"
        if g("x_to_emb.weight") is not None:
            self.kind = "anchor"
            self.emb_w = g("x_to_emb.weight")
            self.emb_b = g("x_to_emb.bias")
            self.anchor_u = g("dist_anchor_B.weight")  # [m, d]
            self.head_dim = self.anchor_u.shape[1]
            self.proj_w, self.proj_b = g("to_out.0.weight"), g("to_out.0.bias")
        else:
            self.qkv_w, self.qkv_b = g("qkv.weight"), g("qkv.bias")
            if self.qkv_w is None:
                raise KeyError(f"{prefix}qkv.weight missing")
            self.proj_w, self.proj_b = g("proj.weight"), g("proj.bias")
            self.dwc_w, self.dwc_b = g("dwc.weight"), g("dwc.bias")
            self.f_scale = g("scale")
            self.pe = g("positional_encoding")
            self.temperature = g("temperature")
            if self.dwc_w is not None:
                self.kind = "focused"
                self.head_dim = self.dwc_w.shape[0]
            elif self.temperature is not None:
                self.kind = "enhanced"
                self.head_dim = dim // self.temperature.shape[0]
            else:
                heads = heads_hint if heads_hint else (dim // 64 if dim % 64 == 0 else None)
                if not heads:
                    raise ValueError(f"{prefix}: cannot infer heads for C={dim}; pass heads")
                self.head_dim = dim // heads
        if dim % self.head_dim:
            raise ValueError(f"{prefix}: head dim {self.head_dim} does not divide C={dim}")
        self.heads = dim // self.head_dim
        self.scale = self.head_dim ** -0.5

    # ---- q, k, v in [B, h, T, d] -----------------------------------------------------------
    def qkv(self, x):
        B, T, C = x.shape
        h, d = self.heads, self.head_dim
        if self.kind == "anchor":
            e = F.linear(x, self.emb_w, self.emb_b)
            qk = e[..., :C].reshape(B, T, h, d).transpose(1, 2)
            v = e[..., C:].reshape(B, T, h, d).transpose(1, 2)
            return qk, qk, v
        qkv = F.linear(x, self.qkv_w, self.qkv_b).reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        return q, k, v

    def _tokens(self, t):  # [B,h,T,d] -> [B,T,C]
        B, h, T, d = t.shape
        return t.transpose(1, 2).reshape(B, T, h * d)

    def _heads(self, t):  # [B,T,C] -> [B,h,T,d]
        B, T, C = t.shape
        return t.reshape(B, T, self.heads, self.head_dim).transpose(1, 2)

    def __call__(self, x, ctx, want_matrix=False):
        """x [B,T,C] -> (out [B,T,C], display matrix [B,h,T,T] or None)."""
        s = ctx.settings
        B, T, C = x.shape
        if s.variant in ("softmax", "window") and ctx.mask is None and not want_matrix:
            # timm's eager Attention.forward (non-fused path), kept verbatim for the benchmark.
            q, k, v = self.qkv(x)
            q = q * self.scale
            attn = q @ k.transpose(-2, -1)
            attn = attn.softmax(dim=-1)
            x = attn @ v
            x = x.transpose(1, 2).reshape(B, T, C)
            return F.linear(x, self.proj_w, self.proj_b), None
        q, k, v = self.qkv(x)
        fn = {"softmax": self._softmax, "window": self._softmax, "linear": self._linear,
              "focused": self._focused, "enhanced": self._enhanced, "anchor": self._anchor, "agent": self._agent,
              "inline": self._inline, "mlla": self._mlla, "pola": self._pola}[s.variant]
        out, mat = fn(q, k, v, ctx, want_matrix)
        # PolaFormer's matrix weighs half of v: _pola checks both of its matrices itself.
        if CHECK_MATRIX and mat is not None and s.variant != "pola" and not (
                s.variant == "focused" and s.dwc and self.kind == "focused"):
            err = (mat @ v - out).abs().max().item()
            if err > 1e-9 * max(1.0, out.abs().max().item()):
                raise AssertionError(f"display matrix disagrees with output ({s.variant}): {err}")
        out = self._tokens(out)
        return F.linear(out, self.proj_w, self.proj_b), mat

    # ---- variants: q,k,v [B,h,T,d] -> out [B,h,T,d], matrix [B,h,T,T] | None ----------------
    def _agent(self, q, k, v, ctx, want):
        """Agent Attention as agent_deit.py computes it, swapped in: no position biases, no dwc."""
        B, h, T, d = q.shape
        m = ctx.settings.agents or min(49, ctx.gh * ctx.gw)
        side = int(round(m ** 0.5))
        grid = q[:, :, ctx.num_prefix:].reshape(B * h, ctx.gh, ctx.gw, d).permute(0, 3, 1, 2)
        agents = F.adaptive_avg_pool2d(grid, (side, side)).reshape(B, h, d, -1).transpose(-1, -2)
        agent_attn = ((agents * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        q_attn = ((q * self.scale) @ agents.transpose(-2, -1)).softmax(dim=-1)
        return q_attn @ (agent_attn @ v), (q_attn @ agent_attn if want else None)

    def _inline(self, q, k, v, ctx, want):
        """InLine as inline_deit.py computes it, swapped in: no residual."""
        n, s = k.shape[2], self.scale
        kv = (k.transpose(-2, -1) * (s / n) ** 0.5) @ (v * (s / n) ** 0.5)
        k_mean = k.mean(dim=2, keepdim=True).transpose(-2, -1)
        out = q @ kv + (1 - q @ k_mean * s) * v.mean(dim=2, keepdim=True)
        return out, (1.0 / n + (s / n) * (q @ k.transpose(-2, -1) - q @ k_mean) if want else None)

    def _mlla(self, q, k, v, ctx, want):
        """MLLA's LinearAttention (mlla.py) on the layer's q, k, v, swapped in: RoPE over all C channels with
        the prefix tokens at angle 0, the normaliser from the un-rotated features; no LePE, no gates."""
        B, h, n, d = q.shape
        q, k = F.elu(q) + 1.0, F.elu(k) + 1.0
        c = h * d
        k_max = c // 4
        theta = 1 / (10000 ** (torch.arange(k_max) / k_max))
        rows, cols = torch.meshgrid(torch.arange(ctx.gh), torch.arange(ctx.gw), indexing="ij")
        angles = torch.cat([rows.unsqueeze(-1) * theta, cols.unsqueeze(-1) * theta], -1).reshape(-1, c // 2)
        angles = torch.cat([torch.zeros(ctx.num_prefix, c // 2), angles]).reshape(n, h, d // 2).transpose(0, 1)
        cos, sin = torch.cos(angles).to(q.dtype), torch.sin(angles).to(q.dtype)

        def rope(t):
            re, im = t[..., 0::2], t[..., 1::2]
            return torch.stack([re * cos - im * sin, re * sin + im * cos], -1).flatten(-2)

        q_rope, k_rope = rope(q), rope(k)
        z = 1 / (q @ k.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
        kv = (k_rope.transpose(-2, -1) * (n ** -0.5)) @ (v * (n ** -0.5))
        return q_rope @ kv * z, ((q_rope @ k_rope.transpose(-2, -1)) * z / n if want else None)

    def _pola(self, q, k, v, ctx, want):
        """PolaFormer's PolaLinearAttention (pola_pvt.py) on the layer's q, k, v, swapped in: scale and power
        at their initial zeros, no dwc, no gate. The matrix is the same-sign one (the first half of v)."""
        n = k.shape[2]
        power = 1 + ctx.settings.alpha * 0.5
        q, k = q / math.log(2.0), k / math.log(2.0)
        q_pos, q_neg, k_pos, k_neg = F.relu(q) ** power, F.relu(-q) ** power, F.relu(k) ** power, F.relu(-k) ** power
        q_sim, q_opp = torch.cat([q_pos, q_neg], -1), torch.cat([q_neg, q_pos], -1)
        k = torch.cat([k_pos, k_neg], -1)
        v1, v2 = torch.chunk(v, 2, dim=-1)
        z = 1 / (q_sim @ k.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
        x_sim = q_sim @ ((k.transpose(-2, -1) * (n ** -0.5)) @ (v1 * (n ** -0.5))) * z
        z_opp = 1 / (q_opp @ k.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
        x_opp = q_opp @ ((k.transpose(-2, -1) * (n ** -0.5)) @ (v2 * (n ** -0.5))) * z_opp
        out = torch.cat([x_sim, x_opp], -1)
        if want and CHECK_MATRIX:  # each half of the output from its own matrix
            for query, values, half in ((q_sim, v1, x_sim), (q_opp, v2, x_opp)):
                zq = 1 / (query @ k.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
                err = (((query @ k.transpose(-2, -1)) * zq / n) @ values - half).abs().max().item()
                if err > 1e-9 * max(1.0, half.abs().max().item()):
                    raise AssertionError(f"a PolaFormer matrix disagrees with its output: {err}")
        return out, ((q_sim @ k.transpose(-2, -1)) * z / n if want else None)

    def _softmax(self, q, k, v, ctx, want):
        a = (q * self.scale) @ k.transpose(-2, -1)
        if ctx.mask is not None:
            a = a.masked_fill(~ctx.mask, float("-inf"))
        a = a.softmax(dim=-1)
        return a @ v, (a if want else None)

    @staticmethod
    def _masked_scores(qp, kp, mask):
        s = qp @ kp.transpose(-2, -1)
        if mask is not None:
            s = s * mask.to(s.dtype)
        return s

    def _linear(self, q, k, v, ctx, want):
        qp, kp = F.relu(q), F.relu(k)
        mat = None
        if ctx.mask is None:
            kv = kp.transpose(-2, -1) @ v  # [d, d]: K^T V first, O(T d^2)
            den = qp @ kp.sum(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6
            out = (qp @ kv) / den
            if want:
                s = self._masked_scores(qp, kp, None)
                mat = s / (s.sum(dim=-1, keepdim=True) + 1e-6)
        else:
            s = self._masked_scores(qp, kp, ctx.mask)
            mat = s / (s.sum(dim=-1, keepdim=True) + 1e-6)
            out = mat @ v
        return out, mat

    def _focused(self, q, k, v, ctx, want):
        s = ctx.settings
        qt, kt = self._tokens(q), self._tokens(k)
        if self.kind == "focused" and self.pe is not None:
            pe = self.pe
            if pe.shape[1] == kt.shape[1]:
                kt = kt + pe
            elif pe.shape[1] == kt.shape[1] - ctx.num_prefix:
                kt = torch.cat([kt[:, :ctx.num_prefix], kt[:, ctx.num_prefix:] + pe], dim=1)
            else:
                raise ValueError(f"positional_encoding has {pe.shape[1]} tokens, input has {kt.shape[1]}")
        if self.kind == "focused" and self.f_scale is not None:
            div = F.softplus(self.f_scale)
        else:
            div = math.log(2.0)  # softplus(0)
        qt = (F.relu(qt) + 1e-6) / div
        kt = (F.relu(kt) + 1e-6) / div
        if s.norm == "all":
            qt, kt = focusing(qt, s.p), focusing(kt, s.p)
            qf, kf = self._heads(qt), self._heads(kt)
        else:
            qf, kf = focusing(self._heads(qt), s.p), focusing(self._heads(kt), s.p)
        T = q.shape[2]
        mat = None
        if ctx.mask is None:
            z = 1.0 / (qf @ kf.mean(dim=-2, keepdim=True).transpose(-2, -1) + 1e-6)
            kv = (kf.transpose(-2, -1) @ v) / T
            out = (qf @ kv) * z
            if want:
                sc = qf @ kf.transpose(-2, -1)
                mat = sc / T * z
        else:
            sc = self._masked_scores(qf, kf, ctx.mask)
            ti = ctx.mask.sum(dim=-1, keepdim=True).to(sc.dtype)  # [T,1] keys each query sees
            z = 1.0 / (sc.sum(dim=-1, keepdim=True) / ti + 1e-6)
            mat = sc / ti * z
            out = mat @ v
        if s.dwc and self.kind == "focused" and self.dwc_w is not None:
            B, h, T, d = v.shape
            P, gh, gw = ctx.num_prefix, ctx.gh, ctx.gw
            grid = v[:, :, P:, :].transpose(-2, -1).reshape(B * h, d, gh, gw)
            kh, kw = self.dwc_w.shape[-2:]
            conv = F.conv2d(grid, self.dwc_w, self.dwc_b, padding=(kh // 2, kw // 2), groups=d)
            conv = conv.reshape(B, h, d, gh * gw).transpose(-2, -1)
            out = torch.cat([out[:, :, :P], out[:, :, P:] + conv], dim=2)
            if mat is not None and ctx.with_dwc_band:
                mat = mat + dwc_band(self.dwc_w, P, gh, gw).to(mat.dtype)
        return out, mat

    def _enhanced(self, q, k, v, ctx, want):
        qp, kp = F.relu(q), F.relu(k)
        temp = self.temperature if (self.kind == "enhanced" and self.temperature is not None) else self.scale
        mat = None
        if ctx.mask is None:
            den = (qp @ kp.sum(dim=-2, keepdim=True).transpose(-2, -1)).clamp_min(100.0)
            out = (qp @ ((kp.transpose(-2, -1) @ v) * temp)) / den
            if want:
                sc = qp @ kp.transpose(-2, -1)
                mat = sc * temp / den
        else:
            sc = self._masked_scores(qp, kp, ctx.mask)
            mat = sc * temp / sc.sum(dim=-1, keepdim=True).clamp_min(100.0)
            out = mat @ v
        return out, mat

    def _anchor(self, q, k, v, ctx, want):
        s = ctx.settings
        if self.kind == "anchor":
            u = self.anchor_u[None, None]  # [1,1,m,d] shared by all heads
            m = u.shape[2]
            a = ((q @ u.transpose(-2, -1)) * self.scale).softmax(dim=-1)
            if 0 < s.anchors < m:
                mass = a.sum(dim=-2)  # [B,h,m], per head
                order = torch.sort(mass, dim=-1, descending=True, stable=True).indices[..., :s.anchors]
                keep = torch.sort(order, dim=-1).values  # original order
                B, h = q.shape[:2]
                u_full = u.expand(B, h, m, u.shape[-1])
                u = torch.gather(u_full, 2, keep[..., None].expand(B, h, s.anchors, u.shape[-1]))
                a = ((q @ u.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        else:
            # 0: AnchorFormer's default count (attnscope's kDefaultPooledAnchors), at most the patches.
            m = s.anchors if s.anchors > 0 else min(DEFAULT_POOLED_ANCHORS, ctx.gh * ctx.gw)
            u = pooled_anchors(k, ctx.num_prefix, ctx.gh, ctx.gw, m)
            a = ((q @ u.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        delta = a.sum(dim=-2)  # [B,h,m]
        inv = 1.0 / delta
        inv = torch.where(torch.isinf(inv), torch.zeros_like(inv), inv)
        out = a @ (inv[..., None] * (a.transpose(-2, -1) @ v))
        mat = (a * inv[..., None, :]) @ a.transpose(-2, -1) if want else None
        return out, mat


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------
class _Ctx:
    __slots__ = ("settings", "gh", "gw", "num_prefix", "mask", "with_dwc_band")


class ViTReference:
    """timm-layout ViT/DeiT built from a flat state dict (see the module docstring)."""

    def __init__(self, state_dict, heads=None, dtype=torch.float32):
        sd = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in state_dict.items()}
        self.sd = sd
        self.patch_w = sd["patch_embed.proj.weight"]
        self.patch_b = sd.get("patch_embed.proj.bias")
        self.dim = self.patch_w.shape[0]
        self.patch = (self.patch_w.shape[2], self.patch_w.shape[3])
        self.cls_token = sd.get("cls_token")
        self.dist_token = sd.get("dist_token")
        self.reg_token = sd.get("reg_token")
        self.prefix = [t for t in (self.cls_token, self.dist_token, self.reg_token) if t is not None]
        self.num_prefix = sum(t.shape[1] for t in self.prefix)
        self.pos_embed = sd.get("pos_embed")
        self.pos_has_prefix = False
        self.pos_grid = None
        if self.pos_embed is not None:
            L = self.pos_embed.shape[1]
            n_pre = L - self.num_prefix
            if self.num_prefix > 0 and n_pre > 0 and math.isqrt(n_pre) ** 2 == n_pre:
                self.pos_has_prefix = True
                n = n_pre
            elif math.isqrt(L) ** 2 == L:
                n = L
            else:
                raise ValueError(f"pos_embed length {L} fits no square grid (prefix {self.num_prefix})")
            self.pos_grid = math.isqrt(n)
        depth = 0
        while f"blocks.{depth}.norm1.weight" in sd:
            depth += 1
        if depth == 0:
            raise ValueError("no blocks found")
        self.blocks = []
        for i in range(depth):
            p = f"blocks.{i}."
            b = {
                "n1": (sd[p + "norm1.weight"], sd[p + "norm1.bias"]),
                "attn": Attention(sd, p + "attn.", self.dim, heads),
                "ls1": sd.get(p + "ls1.gamma"),
                "n2": (sd[p + "norm2.weight"], sd[p + "norm2.bias"]),
                "fc1": (sd[p + "mlp.fc1.weight"], sd.get(p + "mlp.fc1.bias")),
                "fc2": (sd[p + "mlp.fc2.weight"], sd.get(p + "mlp.fc2.bias")),
                "ls2": sd.get(p + "ls2.gamma"),
                "lcm": None,
            }
            if p + "local_mp.conv1.weight" in sd:
                n3 = (sd[p + "norm3.weight"], sd[p + "norm3.bias"]) if p + "norm3.weight" in sd else None
                b["lcm"] = {
                    "n3": n3,
                    "c1": (sd[p + "local_mp.conv1.weight"], sd.get(p + "local_mp.conv1.bias")),
                    "bn": (sd[p + "local_mp.bn.weight"], sd[p + "local_mp.bn.bias"],
                           sd[p + "local_mp.bn.running_mean"], sd[p + "local_mp.bn.running_var"]),
                    "c2": (sd[p + "local_mp.conv2.weight"], sd.get(p + "local_mp.conv2.bias")),
                }
            self.blocks.append(b)
        self.heads = [b["attn"].heads for b in self.blocks]
        self.norm = (sd["norm.weight"], sd["norm.bias"]) if "norm.weight" in sd else None
        self.fc_norm = (sd["fc_norm.weight"], sd["fc_norm.bias"]) if "fc_norm.weight" in sd else None
        self.head = (sd["head.weight"], sd.get("head.bias"))
        self.head_dist = (sd["head_dist.weight"], sd.get("head_dist.bias")) if "head_dist.weight" in sd else None

    # ---- pieces --------------------------------------------------------------------------------
    def _ln(self, x, wb):
        return F.layer_norm(x, (self.dim,), wb[0], wb[1], LN_EPS)

    def resized_pos_embed(self, gh, gw):
        """pos_embed for a gh x gw patch grid (bicubic, antialias, align_corners=False on the patch part)."""
        pe = self.pos_embed
        if pe is None:
            return None
        P = self.num_prefix if self.pos_has_prefix else 0
        pre, patch = pe[:, :P], pe[:, P:]
        g = self.pos_grid
        if (gh, gw) != (g, g):
            grid = patch.reshape(1, g, g, self.dim).permute(0, 3, 1, 2)
            grid = F.interpolate(grid, size=(gh, gw), mode="bicubic", align_corners=False, antialias=True)
            patch = grid.permute(0, 2, 3, 1).reshape(1, gh * gw, self.dim)
        return torch.cat([pre, patch], dim=1)

    def embed(self, img):
        B, _, H, W = img.shape
        ph, pw = self.patch
        if H % ph or W % pw:
            raise ValueError(f"input {H}x{W} is not a multiple of the patch {ph}x{pw}")
        gh, gw = H // ph, W // pw
        x = F.conv2d(img, self.patch_w, self.patch_b, stride=(ph, pw))
        x = x.flatten(2).transpose(1, 2)  # [B, N, C], row-major grid
        pe = self.resized_pos_embed(gh, gw)
        prefix = [t.expand(B, -1, -1) for t in self.prefix]
        if pe is not None and not self.pos_has_prefix:
            x = x + pe
            x = torch.cat(prefix + [x], dim=1)
        else:
            x = torch.cat(prefix + [x], dim=1)
            if pe is not None:
                x = x + pe
        return x, gh, gw

    def _lcm(self, x, lcm, gh, gw):
        B, T, C = x.shape
        P = self.num_prefix
        y = self._ln(x, lcm["n3"]) if lcm["n3"] is not None else x
        grid = y[:, P:].transpose(1, 2).reshape(B, C, gh, gw)
        w1, b1 = lcm["c1"]
        grid = F.conv2d(grid, w1, b1, padding=(w1.shape[2] // 2, w1.shape[3] // 2), groups=C)
        grid = F.gelu(grid)
        bw, bb, rm, rv = lcm["bn"]
        grid = F.batch_norm(grid, rm, rv, bw, bb, training=False, eps=BN_EPS)
        w2, b2 = lcm["c2"]
        grid = F.conv2d(grid, w2, b2, padding=(w2.shape[2] // 2, w2.shape[3] // 2), groups=C)
        upd = grid.reshape(B, C, gh * gw).transpose(1, 2)
        return torch.cat([x[:, :P], x[:, P:] + upd], dim=1)

    def pool_and_head(self, x):
        if self.norm is not None:
            x = self._ln(x, self.norm)
        if self.cls_token is not None:
            if self.head_dist is not None and self.dist_token is not None:
                a = F.linear(x[:, 0], *self.head)
                b = F.linear(x[:, 1], *self.head_dist)
                return (a + b) / 2
            feat = x[:, 0]
        else:
            feat = x[:, self.num_prefix:].mean(dim=1)
        if self.fc_norm is not None:
            feat = self._ln(feat, self.fc_norm)
        return F.linear(feat, *self.head)

    # ---- forward -------------------------------------------------------------------------------
    def after_attention(self, x, b, a, gh, gw):
        """Block b after its attention output a: the residual, L2ViT's LCM, the MLP and its residual."""
        x = x + (a * b["ls1"] if b["ls1"] is not None else a)
        if b["lcm"] is not None:
            x = self._lcm(x, b["lcm"], gh, gw)
        y = F.linear(self._ln(x, b["n2"]), *b["fc1"])
        y = F.linear(F.gelu(y), *b["fc2"])
        return x + (y * b["ls2"] if b["ls2"] is not None else y)

    def forward(self, img, settings=None, record=False, with_dwc_band=False):
        """img [B,3,H,W] -> logits [B, classes], or with record=True (logits, [matrix per layer
        [B,h,T,T]]) where each matrix is the attention matrix of that layer; with_dwc_band adds
        FLatten's DWC band to it (the equivalent matrix M = A + M_DWC whose rank the DWC restores)."""
        settings = settings or Settings()
        x, gh, gw = self.embed(img)
        ctx = _Ctx()
        ctx.with_dwc_band = with_dwc_band
        ctx.settings, ctx.gh, ctx.gw, ctx.num_prefix = settings, gh, gw, self.num_prefix
        w = settings.effective_window(gh, gw)
        ctx.mask = window_mask(gh, gw, self.num_prefix, w, device=x.device) if w else None
        mats = []
        for b in self.blocks:
            a, m = b["attn"](self._ln(x, b["n1"]), ctx, want_matrix=record)
            if record:
                mats.append(m)
            x = self.after_attention(x, b, a, gh, gw)
        logits = self.pool_and_head(x)
        return (logits, mats) if record else logits

    __call__ = forward


def load_model(path, heads=None, dtype=torch.float32):
    """Load a safetensors file (via safetensors_io) into a ViTReference."""
    import safetensors_io
    return ViTReference(safetensors_io.load_file(path), heads=heads, dtype=dtype)
