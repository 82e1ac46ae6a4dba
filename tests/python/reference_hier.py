"""Independent pure-PyTorch references of four hierarchical backbones, with per-layer attention records.

Families (functional: a state_dict + an arch dict in, logits + attention records out):
  swin            timm's SwinTransformer (timm/models/swin_transformer.py)
  flatten_swin    FLatten-Transformer's FLattenSwinTransformer (models/flatten_swin.py)
  pvt_v2          timm's PyramidVisionTransformerV2 (timm/models/pvt_v2.py), also linear=True (-li)
  flatten_pvt_v2  FLatten-Transformer's PVT v2 (models/flatten_pvt_v2.py)

Written from the authors' public code (read, not copied; nothing here comes from attnscope's C++ sources).
The forward passes follow the authors' op order; every constant the C++ side must match is a module-level
name below. Used in float64 by make_hier_cases.py.

Key layouts. The references run on the timm layout; `to_internal_layout` converts the others first:
  * Microsoft Swin / FLatten-Swin (`head.weight`, merging at the END of stages 0-2, stored
    `relative_position_index` and `attn_mask`) -> timm, as timm's swin checkpoint_filter_fn does:
    drop every key containing `relative_position_index` or `attn_mask`; `layers.S.downsample.*` ->
    `layers.{S+1}.downsample.*`; `head.*` -> `head.fc.*`. FLatten-Swin keys map the same way (its focused
    blocks keep `attn.{qkv,proj,dwc,scale,positional_encoding}`).
  * Original PVT v2 (whai362) / FLatten-PVT v2 -> timm, as timm's pvt_v2 _checkpoint_filter_fn does:
    `patch_embed1` -> `patch_embed`, `patch_embed{2,3,4}` -> `stages.{1,2,3}.downsample`,
    `dwconv.dwconv` -> `dwconv`, `block{i}.{j}` -> `stages.{i-1}.blocks.{j}`, `norm{i}` (at the start of the
    key) -> `stages.{i-1}.norm`; `head` unchanged.

Arch dict (what the keys cannot show; make_hier_cases.py stores it as JSON, see its docstring):
  family, heads [per stage]; swin: window (int, or one per stage); flatten_swin: attn_type (e.g. "LLSS",
  also the authors' "M<n>" form), window (the L-block window, config WINDOW_SIZE), window_s (the S-block
  window: the authors hard-code 7 if window <= 56 else 12), focusing_factor; pvt_v2: sr_ratios, linear;
  flatten_pvt_v2: attn_type, sr_ratios (S stages), la_sr_ratios (L stages), linear, focusing_factor.

Attention records (one per attention block, numbered across stages in run order), `LayerRecord`:
  stage, block, query_grid [h, w], key_grid [h, w], window [wh, ww] or None, shift [sh, sw], padded_grid
  [Hp, Wp] (Swin family: the grid after timm's bottom/right padding), kind "<kernel>-<structure>"
  (kernel: softmax | focused | linear | enhanced; structure: window (Swin family), sr (PVT spatial
  reduction, sr may be 1), pool (PVT -li: 7x7 average pool)), heads, and row(r, c) -> [heads, key_h, key_w]:
  the probabilities of query (r, c) over the key grid in IMAGE coordinates. Shifted windows are mapped back
  (key rolled position (i, j) -> image ((i + sh) % H, (j + sw) % W)); keys outside the query's window are 0;
  keys masked by Swin's -100 are stored as softmax gives them (~1e-44 relative); timm's zero padding tokens
  are keys too (they are not masked when there is no shift) but have no image position: their probability
  is dropped from the row (so such rows sum to 1 minus the padding mass; `pad_mass(r, c)` returns it).
  Focused rows are A_ij = (q_i . k_j / n) * z_i (n = number of keys, the DWC is not part of the row).

Facts of the authors' code matched here (each checked against the file named):
  Swin (timm swin_transformer.py): nn.LayerNorm eps 1e-5 everywhere (patch_embed.norm after the conv,
  norm1/norm2, downsample.norm, final norm); per-dimension clamp in _calc_window_shift: window_d = grid_d
  if grid_d <= target_d, shift_d = 0 if grid_d <= target_d else target_d // 2 (odd blocks); roll by -shift
  BEFORE padding; pad bottom/right with zeros to a multiple of the window (after norm1); the shift mask
  is built on the padded grid with slices [0, P-w), [P-w, P-s), [P-s, P) per dim, -100 where labels
  differ, added after the relative position bias; no mask at all when shift is 0 (padding tokens are then
  ordinary keys); q * d^-0.5 before q @ k^T; crop, then roll back by +shift. The clamp uses timm's stage
  resolution patch_grid // 2**stage (floor; `swin_stage_resolution`), which is smaller than the real
  grid after an odd grid was merged: e.g. 112x112, window 4: stage 3 is 4x4 but clamps against 3x3, so
  window 3 and zero padding to 6x6 (cases.json records it as clamp_grid). PatchMerging pads odd H/W
  with zeros, then cat order x(0,0), x(1,0), x(0,1), x(1,1) (row offset first), norm(4C), reduction (no
  bias). Head: final norm, mean over H, W, head.fc. Relative position index:
  (dr + wh - 1) * (2 ww - 1) + (dc + ww - 1) with (dr, dc) = pos(query) - pos(key).
  FLatten-Swin (flatten_swin.py): stage blocks get window = config window for L blocks, 7 (or 12 when the
  config window > 56) for S blocks; shift = window // 2 on odd blocks; the MS clamp (min(grid) <= window
  -> window = min(grid), shift 0) equals timm's per-dimension clamp on square grids (non-square grids:
  this reference applies timm's per-dimension rule; the authors' code cannot run them). Focused blocks
  IGNORE the shift mask (their forward never reads it) and run inside the (shifted) windows: qkv
  reshape (B, N, 3, C); k += positional_encoding [1, wh*ww, C]; q, k = ReLU(.) + 1e-6; both / softplus(scale);
  f_p with norms over all C channels; heads split; z = 1 / (q . mean_n(k) + 1e-6);
  kv = (k^T * n^-0.5) @ (v * n^-0.5); out = (q @ kv) * z; DWC: v [B, h, N, d] -> [B*h, wh, ww, d] ->
  [B*h, d, wh, ww], Conv2d(d, d, k, groups=d, padding=k//2) on each WINDOW (zero padding at window
  borders), -> [B, C, N] (channel = head * d + j) added to out before proj. This reference refuses
  focused windows that would need timm's padding (undefined by the authors).
  PVT v2 (timm pvt_v2.py, whai362 classification/pvt_v2.py): stem conv 7x7 stride 4 pad 3, downsample
  conv 3x3 stride 2 pad 1, each followed by nn.LayerNorm (eps 1e-5); block norms and stage norms eps 1e-6;
  attention: q from every token; sr > 1: conv k = s = sr then attn.norm (eps 1e-5) then kv; linear (-li):
  AdaptiveAvgPool2d(7), 1x1 sr conv, attn.norm (1e-5), GELU, kv; kv rows [k; v]; attn =
  (q @ k^T) * d^-0.5 (scale AFTER the product), softmax; MLP: fc1, (ReLU if linear), 3x3 depthwise
  dwconv pad 1, GELU, fc2; each stage ends with its norm; head on the mean over tokens.
  FLatten-PVT v2 (flatten_pvt_v2.py): L stages use sr = la_sr_ratios[i], S stages sr_ratios[i];
  positional_encoding [1, num_patches // sr^2, C] (the training key grid); the focused kernel as above
  over the layer's (reduced) keys; when sr > 1 or linear the DWC input V is first resampled from n to N
  tokens by F.interpolate(mode="linear", align_corners=False) along the FLATTENED token order, then
  reshaped to [B*h, d, H, W]; DWC zero padding k//2 on the full grid.

Our own semantics (no author code defines these; the C++ side implements the same):
  * Input size differing from training: Swin tables (stored for the block's clamped training window) are
    resized to the block's effective window by timm's resize_rel_pos_bias_table (re-implemented in
    `resize_rel_pos_bias_table`: geometric-progression source positions, linear interpolation with edge
    clamping) whenever the table size differs or the window is not square. timm evaluates it in float32,
    this reference in float64 (logits differ by ~1e-8). A focused layer's positional_encoding, whose
    length must be a square s*s, is resized to the layer's window (Swin) or key grid (PVT) when (s, s)
    differs from it: reshape [1, s, s, C] -> NCHW, F.interpolate(mode="bicubic", align_corners=False,
    antialias=True), flatten back (as timm resizes pos_embed).
  * Variant(window=w) on Swin: every block's target window becomes w (shift w // 2 on odd blocks, the
    same per-dimension clamp), tables resized as above to the effective window, index and mask rebuilt.
  * Variant(kernel=...) swaps the attention kernel of EVERY layer, computed from the layer's own q, k, v
    (raw projections: no positional encoding, no learned scale, no DWC): with S_ij = ReLU(q_i).ReLU(k_j)
    per head and "allowed" = not separated by the shift mask (all pairs when the block has no shift),
      linear    A_ij = S_ij * allowed / (sum_j S_ij * allowed + 1e-6)
      focused   q, k <- (ReLU(.) + 1e-6) / ln 2 on all C channels, f_p (norms over the C channels of a
                token, p = Variant.p), heads split, S_ij = q_i.k_j * allowed, t_i = allowed keys of i,
                z_i = 1 / (sum_j S_ij / t_i + 1e-6), A_ij = S_ij / t_i * z_i
      enhanced  A_ij = S_ij * allowed * d^-0.5 / clamp_min(sum_j S_ij * allowed, 100)
      softmax   softmax(q.k d^-0.5 + relative position bias (Swin S blocks only) + -100 shift mask)
    out = A @ v, then proj. Swin swaps run in the block's (shifted, padded) windows, where timm's padding
    tokens are keys as in the native softmax (allowed unless the shift mask separates them); PVT swaps use the
    layer's (reduced / pooled) keys. The shift mask of a shifted FLatten-Swin L block (which the native
    kernel ignores) is applied by the swapped kernels.
"""

import math
import re
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

# ---- constants of the authors' code --------------------------------------------------------------
SWIN_LN_EPS = 1e-5          # timm / Microsoft / FLatten Swin: nn.LayerNorm default
PVT_BLOCK_LN_EPS = 1e-6     # PVT v2 norm_layer = partial(nn.LayerNorm, eps=1e-6): norm1, norm2, stage norms
PVT_EMBED_LN_EPS = 1e-5     # OverlapPatchEmbed.norm = nn.LayerNorm(embed_dim)
PVT_SR_LN_EPS = 1e-5        # Attention.norm = nn.LayerNorm(dim)
SHIFT_MASK_VALUE = -100.0   # Swin shift mask between regions
FOCUSED_EPS = 1e-6          # ReLU(x) + 1e-6 and z = 1 / (... + 1e-6)
LINEAR_EPS = 1e-6
ENHANCED_CLAMP = 100.0
PVT_LI_POOL = 7             # AdaptiveAvgPool2d(7) of PVT v2-li
PVT_STEM = (4, 3)           # stem stride, padding (kernel 7)
PVT_DOWN = (2, 1)           # downsample stride, padding (kernel 3)

# When True every LayerRecord keeps .debug = {v_keys [h, key_h, key_w, d] (V of each key, image order),
# out [h, H, W, d] (the layer's attention output before DWC and proj, image order), v_pad [h, d] (V of a
# padding token) or None}: row(r, c) . v_keys (+ pad_mass * v_pad) must give out[:, r, c].
KEEP_DEBUG = False

KERNELS = ("native", "softmax", "linear", "focused", "enhanced")


@dataclass(frozen=True)
class Variant:
    """kernel: "native" or a swapped kernel (see the module docstring); p: focusing factor of the swapped
    focused kernel; window: new target window for every Swin block (None = the arch's)."""

    kernel: str = "native"
    p: float = 3.0
    window: Optional[int] = None

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"unknown kernel {self.kernel!r}")
        if self.window is not None and self.window < 1:
            raise ValueError("window must be >= 1")

    def to_dict(self):
        return {"kernel": self.kernel, "p": self.p, "window": self.window}


# ---- checkpoint layouts --------------------------------------------------------------------------
def unwrap_checkpoint(obj):
    """The state_dict inside a torch.load result: under "model", "model_ema", "state_dict",
    "state_dict_ema", or the dict itself when its values are tensors. Returns (state_dict, key or None)."""
    if isinstance(obj, dict):
        for key in ("model", "model_ema", "state_dict", "state_dict_ema"):
            if key in obj and isinstance(obj[key], dict):
                return obj[key], key
        if obj and all(torch.is_tensor(v) for v in obj.values()):
            return obj, None
    raise ValueError("no state_dict found in checkpoint")


def detect_layout(sd, family):
    if family in ("swin", "flatten_swin"):
        return "timm" if "head.fc.weight" in sd else "microsoft"
    if family in ("pvt_v2", "flatten_pvt_v2"):
        return "timm" if "patch_embed.proj.weight" in sd else "original"
    raise ValueError(f"unknown family {family!r}")


def swin_microsoft_to_timm(sd):
    out = {}
    for k, v in sd.items():
        if "relative_position_index" in k or "attn_mask" in k:
            continue  # buffers: rebuilt from the window
        m = re.match(r"^layers\.(\d+)\.downsample\.(.*)$", k)
        if m:
            k = f"layers.{int(m.group(1)) + 1}.downsample.{m.group(2)}"
        if k.startswith("head."):
            k = "head.fc." + k[len("head."):]
        out[k] = v
    return out


def pvt_original_to_timm(sd):
    out = {}
    for k, v in sd.items():
        m = re.match(r"^patch_embed(\d+)\.(.*)$", k)
        if m:
            i = int(m.group(1))
            k = ("patch_embed." if i == 1 else f"stages.{i - 1}.downsample.") + m.group(2)
        k = k.replace("dwconv.dwconv", "dwconv")
        m = re.match(r"^block(\d+)\.(\d+)\.(.*)$", k)
        if m:
            k = f"stages.{int(m.group(1)) - 1}.blocks.{m.group(2)}.{m.group(3)}"
        m = re.match(r"^norm(\d+)\.(.*)$", k)
        if m:
            k = f"stages.{int(m.group(1)) - 1}.norm.{m.group(2)}"
        out[k] = v
    return out


def to_internal_layout(sd, family):
    layout = detect_layout(sd, family)
    if layout == "microsoft":
        return swin_microsoft_to_timm(sd)
    if layout == "original":
        return pvt_original_to_timm(sd)
    return dict(sd)


class _Weights:
    """State dict cast to one dtype, recording which keys the model read (all must be read)."""

    def __init__(self, sd, dtype):
        self.sd = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in sd.items()}
        self.used = set()

    def __contains__(self, k):
        return k in self.sd

    def __getitem__(self, k):
        if k not in self.sd:
            raise KeyError(f"missing key {k}")
        self.used.add(k)
        return self.sd[k]

    def get(self, k):
        return self[k] if k in self.sd else None

    def ln(self, prefix):
        return self[prefix + ".weight"], self[prefix + ".bias"]

    def lin(self, prefix):
        return self[prefix + ".weight"], self.get(prefix + ".bias")

    def check_all_used(self):
        unused = sorted(set(self.sd) - self.used)
        if unused:
            raise ValueError(f"keys not used by the reference: {unused[:8]}{'...' if len(unused) > 8 else ''}")


def _ln(x, wb, eps):
    return F.layer_norm(x, (x.shape[-1],), wb[0], wb[1], eps)


# ---- small functions shared by the families (module level so that a test can replace them) --------
def relative_position_index(wh, ww):
    """[N, N] index into the (2wh-1)(2ww-1) table; rows are queries, columns keys (row-major window)."""
    r = torch.arange(wh).repeat_interleave(ww)
    c = torch.arange(ww).repeat(wh)
    dr = r[:, None] - r[None, :] + (wh - 1)
    dc = c[:, None] - c[None, :] + (ww - 1)
    return dr * (2 * ww - 1) + dc


def swin_window_shift(grid, target_window, odd_block):
    """timm _calc_window_shift: per-dimension clamp of window and shift to the stage grid."""
    tw = tuple(target_window)
    ts = (tw[0] // 2, tw[1] // 2) if odd_block else (0, 0)
    window = tuple(g if g <= w else w for g, w in zip(grid, tw))
    shift = tuple(0 if g <= w else s for g, w, s in zip(grid, tw, ts))
    return window, shift


def swin_stage_resolution(patch_grid, stage):
    """The grid timm's (and Microsoft's) blocks of a stage are built for: patch_grid // 2**stage per
    dimension. PatchMerging pads odd grids, so the real grid is ceil(patch_grid / 2**stage); the window
    clamp and shift use this floor value (timm SwinTransformerStage.output_resolution = i // 2)."""
    return tuple(g // 2 ** stage for g in patch_grid)


def _region_labels(padded, window, shift):
    lab = torch.zeros(padded, dtype=torch.long)
    if shift > 0:
        lab[padded - window:padded - shift] = 1
        lab[padded - shift:] = 2
    return lab


def shift_mask_labels(padded_hw, window, shift):
    """Region label of each padded-grid position [Hp, Wp] (timm get_attn_mask's img_mask)."""
    lh = _region_labels(padded_hw[0], window[0], shift[0])
    lw = _region_labels(padded_hw[1], window[1], shift[1])
    return lh[:, None] * 3 + lw[None, :]


def partition_windows(x, window):
    """[B, Hp, Wp, C] -> [B * nW, wh * ww, C], windows row-major."""
    B, Hp, Wp, C = x.shape
    wh, ww = window
    x = x.view(B, Hp // wh, wh, Wp // ww, ww, C).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, wh * ww, C)


def reverse_windows(w, window, Hp, Wp):
    wh, ww = window
    C = w.shape[-1]
    x = w.view(-1, Hp // wh, Wp // ww, wh, ww, C).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, Hp, Wp, C)


def patch_merging(x, norm_wb, reduction_w):
    """timm PatchMerging on [B, H, W, C]: zero-pad odd sides, cat [x(0,0), x(1,0), x(0,1), x(1,1)]."""
    B, H, W, C = x.shape
    x = F.pad(x, (0, 0, 0, W % 2, 0, H % 2))
    _, H, W, _ = x.shape
    x = x.reshape(B, H // 2, 2, W // 2, 2, C).permute(0, 1, 3, 4, 2, 5).flatten(3)
    x = _ln(x, norm_wb, SWIN_LN_EPS)
    return F.linear(x, reduction_w)


def pvt_sr_norm(x, wb):
    return _ln(x, wb, PVT_SR_LN_EPS)


def focusing(x, p):
    """f_p over the last dim, in the authors' op order: (x^p / ||x^p||) * ||x||."""
    x_norm = x.norm(dim=-1, keepdim=True)
    xp = x ** p
    return (xp / xp.norm(dim=-1, keepdim=True)) * x_norm


def _geometric_positions(src, dst):
    """Source sample positions of timm's resize_rel_pos_bias_table along one axis (length src)."""
    left, right = 1.01, 1.5
    q = None
    while right - left > 1e-6:
        q = (left + right) / 2.0
        gp = (1.0 - q ** (src // 2)) / (1.0 - q)
        if gp > dst // 2:
            right = q
        else:
            left = q
    dis, cur = [], 1.0
    for i in range(src // 2):
        dis.append(cur)
        cur += q ** (i + 1)
    return [-d for d in reversed(dis)] + [0.0] + dis


def _linear_weights(points, targets, dtype):
    """[len(targets), len(points)] weights of timm's RegularGridInterpolator along one axis: linear
    between the bracketing points, the edge value beyond the ends."""
    Wt = torch.zeros(len(targets), len(points), dtype=dtype)
    n = len(points)
    for t_i, t in enumerate(targets):
        j = 0
        while j < n and points[j] < t:  # first j with points[j] >= t (torch.bucketize, right=False)
            j += 1
        right = min(j, n - 1)
        left = min(max(j - 1, 0), n - 1)
        d_left = max(t - points[left], 0.0)
        d_right = max(points[right] - t, 0.0)
        if d_left == 0.0 and d_right == 0.0:
            d_left = d_right = 1.0
        total = d_left + d_right
        Wt[t_i, left] += d_right / total
        Wt[t_i, right] += d_left / total
    return Wt


def resize_rel_pos_bias_table(table, new_window):
    """timm resize_rel_pos_bias_table for a flat [L, heads] table (source assumed square)."""
    dst = (2 * new_window[0] - 1, 2 * new_window[1] - 1)
    L, heads = table.shape
    s = math.isqrt(L)
    if s * s != L:
        raise ValueError(f"relative_position_bias_table with {L} rows is not square")
    if (s, s) == dst:
        return table
    ys = _geometric_positions(s, dst[0])
    xs = _geometric_positions(s, dst[1])
    ty, tx = dst[0] // 2, dst[1] // 2
    wy = _linear_weights(ys, [float(v) for v in range(-ty, ty + 1)], table.dtype)
    wx = _linear_weights(xs, [float(v) for v in range(-tx, tx + 1)], table.dtype)
    grid = table.T.reshape(heads, s, s)
    out = wy[None] @ grid @ wx.T[None]  # [heads, dst_h, dst_w]
    return out.reshape(heads, -1).T.contiguous()


def resize_positional_encoding(pe, hw):
    """[1, s*s, C] -> [1, h*w, C] by bicubic antialiased interpolation (timm's pos_embed resize)."""
    n, C = pe.shape[1], pe.shape[2]
    s = math.isqrt(n)
    if s * s != n:
        raise ValueError(f"positional_encoding with {n} tokens is not a square grid")
    if (s, s) == tuple(hw):
        return pe
    g = pe.reshape(1, s, s, C).permute(0, 3, 1, 2)
    g = F.interpolate(g, size=tuple(hw), mode="bicubic", align_corners=False, antialias=True)
    return g.permute(0, 2, 3, 1).reshape(1, hw[0] * hw[1], C)


def adaptive_avg_pool(x, out):
    return F.adaptive_avg_pool2d(x, out)


# ---- kernels on (q, k, v) with optional "allowed" mask --------------------------------------------
def _heads(t, h):  # [B, n, C] -> [B, h, n, d]
    B, n, C = t.shape
    return t.reshape(B, n, h, C // h).permute(0, 2, 1, 3)


def _tokens(t):  # [B, h, n, d] -> [B, n, C]
    B, h, n, d = t.shape
    return t.transpose(1, 2).reshape(B, n, h * d)


def swapped_kernel(kernel, q, k, v, heads, p, allowed=None, bias=None, additive_mask=None, scale_after=False):
    """q [B,Nq,C], k, v [B,n,C] (raw projections) -> (out [B,Nq,C], A [B,h,Nq,n]).

    allowed: bool [B or 1, Nq, n] (None = all); bias [1, h, Nq, n] and additive_mask [B, 1, Nq, n] are
    used by softmax only. scale_after: PVT's (q @ k^T) * scale order instead of Swin's (q * scale) @ k^T.
    """
    qh, kh, vh = _heads(q, heads), _heads(k, heads), _heads(v, heads)
    d = qh.shape[-1]
    scale = d ** -0.5
    al = None if allowed is None else allowed[:, None].to(q.dtype)
    if kernel == "softmax":
        a = (qh @ kh.transpose(-2, -1)) * scale if scale_after else (qh * scale) @ kh.transpose(-2, -1)
        if bias is not None:
            a = a + bias
        if additive_mask is not None:
            a = a + additive_mask
        A = a.softmax(dim=-1)
    elif kernel in ("linear", "enhanced"):
        s = F.relu(qh) @ F.relu(kh).transpose(-2, -1)
        if al is not None:
            s = s * al
        if kernel == "linear":
            A = s / (s.sum(dim=-1, keepdim=True) + LINEAR_EPS)
        else:
            A = s * scale / s.sum(dim=-1, keepdim=True).clamp_min(ENHANCED_CLAMP)
    elif kernel == "focused":
        div = math.log(2.0)
        qf = _heads(focusing((F.relu(q) + FOCUSED_EPS) / div, p), heads)
        kf = _heads(focusing((F.relu(k) + FOCUSED_EPS) / div, p), heads)
        s = qf @ kf.transpose(-2, -1)
        if al is not None:
            s = s * al
            t = al.sum(dim=-1, keepdim=True)
        else:
            t = torch.full_like(s[..., :1], float(kh.shape[2]))
        z = 1.0 / (s.sum(dim=-1, keepdim=True) / t + FOCUSED_EPS)
        A = s / t * z
    else:
        raise ValueError(kernel)
    return _tokens(A @ vh), A


def focused_native(q, k, v, heads, scale_param, pe, p):
    """The authors' FocusedLinearAttention core. q [B,Nq,C], k, v [B,n,C] ->
    (out [B,Nq,C] without DWC, factors (qf [B,h,Nq,d], kf [B,h,n,d], z [B,h,Nq,1]), v heads [B,h,n,d])."""
    n = k.shape[1]
    if pe is not None:
        k = k + pe
    div = F.softplus(scale_param)
    q = (F.relu(q) + FOCUSED_EPS) / div
    k = (F.relu(k) + FOCUSED_EPS) / div
    q, k = focusing(q, p), focusing(k, p)
    qh, kh, vh = _heads(q, heads), _heads(k, heads), _heads(v, heads)
    z = 1.0 / (qh @ kh.mean(dim=-2, keepdim=True).transpose(-2, -1) + FOCUSED_EPS)
    kv = (kh.transpose(-2, -1) * (n ** -0.5)) @ (vh * (n ** -0.5))
    out = (qh @ kv) * z
    return _tokens(out), (qh, kh, z), vh


def depthwise_conv_heads(vh, hw, w, b):
    """DWC shared by all heads: vh [B,h,N,d] on an hw grid -> [B, N, C] (channel = head*d + j)."""
    B, h, N, d = vh.shape
    k = w.shape[-1]
    if k % 2 == 0 or w.shape[-2] != k:
        raise ValueError(f"DWC kernel {tuple(w.shape[-2:])} must be square and odd")
    g = vh.reshape(B * h, hw[0], hw[1], d).permute(0, 3, 1, 2)
    g = F.conv2d(g, w, b, padding=k // 2, groups=d)
    return g.reshape(B, h * d, N).permute(0, 2, 1)


# ---- records -------------------------------------------------------------------------------------
class LayerRecord:
    """Attention probabilities of one block; see the module docstring."""

    def __init__(self, stage, block, query_grid, key_grid, window, shift, padded_grid, kernel, structure,
                 heads, native, extra=None):
        self.stage, self.block = stage, block
        self.query_grid, self.key_grid = tuple(query_grid), tuple(key_grid)
        self.window = None if window is None else tuple(window)
        self.shift = tuple(shift)
        self.padded_grid = tuple(padded_grid)
        self.kernel, self.structure = kernel, structure
        self.kind = f"{kernel}-{structure}"
        self.heads = heads
        self.native = native
        self.extra = extra or {}
        self._A = None        # [nW or 1, h, Nq, n] explicit probabilities
        self._factors = None  # (qf, kf, z) with leading nW or 1

    def _window_row(self, widx, i):
        if self._A is not None:
            return self._A[widx, :, i, :]
        qf, kf, z = self._factors
        n = kf.shape[-2]
        s = (qf[widx, :, i, None, :] @ kf[widx].transpose(-2, -1))[:, 0, :]  # [h, n]
        return s / n * z[widx, :, i, :]

    def _locate(self, r, c):
        H, W = self.query_grid
        if not (0 <= r < H and 0 <= c < W):
            raise IndexError(f"query ({r}, {c}) outside the grid {self.query_grid}")
        if self.window is None:
            return 0, r * W + c
        wh, ww = self.window
        sh, sw = self.shift
        rr, cc = (r - sh) % H, (c - sw) % W
        widx = (rr // wh) * (self.padded_grid[1] // ww) + cc // ww
        return widx, (rr % wh) * ww + cc % ww

    def row(self, r, c):
        """[heads, key_h, key_w] probabilities of query (r, c) in image coordinates."""
        widx, i = self._locate(r, c)
        vals = self._window_row(widx, i)  # [h, n]
        if self.window is None:
            return vals.reshape(self.heads, *self.key_grid)
        H, W = self.query_grid
        wh, ww = self.window
        sh, sw = self.shift
        nww = self.padded_grid[1] // ww
        r0, c0 = (widx // nww) * wh, (widx % nww) * ww
        out = torch.zeros(self.heads, H, W, dtype=vals.dtype)
        for a in range(wh):
            for b in range(ww):
                pr, pc = r0 + a, c0 + b
                if pr < H and pc < W:  # padding tokens have no image position
                    out[:, (pr + sh) % H, (pc + sw) % W] = vals[:, a * ww + b]
        return out

    def pad_mass(self, r, c):
        """[heads] probability that query (r, c) puts on timm's padding tokens (0 without padding)."""
        widx, i = self._locate(r, c)
        return self._window_row(widx, i).sum(dim=-1) - self.row(r, c).sum(dim=(-2, -1))

    def rows(self, queries):
        return torch.stack([self.row(r, c) for r, c in queries], dim=1)  # [h, Q, kh, kw]

    def in_window(self, r, c):
        """Bool [H, W]: the keys of the query's (shifted) window, in image coordinates."""
        H, W = self.query_grid
        if self.window is None:
            return torch.ones(*self.key_grid, dtype=torch.bool)
        widx, _ = self._locate(r, c)
        wh, ww = self.window
        sh, sw = self.shift
        nww = self.padded_grid[1] // ww
        r0, c0 = (widx // nww) * wh, (widx % nww) * ww
        m = torch.zeros(H, W, dtype=torch.bool)
        for a in range(wh):
            for b in range(ww):
                if r0 + a < H and c0 + b < W:
                    m[(r0 + a + sh) % H, (c0 + b + sw) % W] = True
        return m

    def to_json(self):
        return {
            "stage": self.stage, "block": self.block, "query_grid": list(self.query_grid),
            "key_grid": list(self.key_grid), "window": None if self.window is None else list(self.window),
            "shift": list(self.shift), "padded_grid": list(self.padded_grid), "kind": self.kind,
            "kernel": self.kernel, "native": self.native, "heads": self.heads, **self.extra,
        }


# ---- Swin family ---------------------------------------------------------------------------------
def _parse_attn_types(attn_type, depths):
    """Per-block 'L'/'S' of FLatten-Swin: one letter per stage; 'M' = the first int(rest) blocks L."""
    n = len(depths)
    out = []
    for i in range(n):
        ch = attn_type[i]
        if ch == "M":
            m = int(attn_type[n:])
            out.append(["L" if j < m else "S" for j in range(depths[i])])
        elif ch in "LS":
            out.append([ch] * depths[i])
        else:
            raise ValueError(f"attn_type {attn_type!r}: stage {i} is {ch!r}")
    return out


class SwinReference:
    """timm-layout Swin / FLatten-Swin (after to_internal_layout)."""

    def __init__(self, state_dict, arch, dtype=torch.float64):
        self.arch = dict(arch)
        self.family = arch["family"]
        if self.family not in ("swin", "flatten_swin"):
            raise ValueError(self.family)
        self.w = _Weights(to_internal_layout(state_dict, self.family), dtype)
        w = self.w
        self.patch_w = w["patch_embed.proj.weight"]
        self.patch_b = w.get("patch_embed.proj.bias")
        self.patch_norm = w.ln("patch_embed.norm")
        self.depths = []
        s = 0
        while f"layers.{s}.blocks.0.norm1.weight" in w:
            b = 0
            while f"layers.{s}.blocks.{b}.norm1.weight" in w:
                b += 1
            self.depths.append(b)
            s += 1
        n = len(self.depths)
        heads = arch["heads"]
        if len(heads) != n:
            raise ValueError(f"arch heads {heads} for {n} stages")
        win = arch["window"]
        win = list(win) if isinstance(win, (list, tuple)) else [win] * n
        if self.family == "flatten_swin":
            types = _parse_attn_types(arch["attn_type"], self.depths)
            window_s = arch.get("window_s", 7 if arch["window"] <= 56 else 12)
        else:
            types = [["S"] * d for d in self.depths]
            window_s = None
        self.stages = []
        for si in range(n):
            st = {"downsample": None, "blocks": []}
            if si > 0:
                p = f"layers.{si}.downsample."
                st["downsample"] = (w.ln(p + "norm"), w[p + "reduction.weight"])
            for bi in range(self.depths[si]):
                p = f"layers.{si}.blocks.{bi}."
                t = types[si][bi]
                blk = {
                    "type": t, "heads": heads[si],
                    "target": win[si] if (t == "L" or window_s is None) else window_s,
                    "n1": w.ln(p + "norm1"), "n2": w.ln(p + "norm2"),
                    "qkv": w.lin(p + "attn.qkv"), "proj": w.lin(p + "attn.proj"),
                    "fc1": w.lin(p + "mlp.fc1"), "fc2": w.lin(p + "mlp.fc2"),
                }
                if t == "S":
                    blk["table"] = w[p + "attn.relative_position_bias_table"]
                    if blk["table"].shape[1] != heads[si]:
                        raise ValueError(f"{p}: table has {blk['table'].shape[1]} heads, arch {heads[si]}")
                else:
                    blk["dwc"] = (w[p + "attn.dwc.weight"], w[p + "attn.dwc.bias"])
                    blk["scale"] = w[p + "attn.scale"]
                    blk["pe"] = w.get(p + "attn.positional_encoding")
                    C = blk["qkv"][0].shape[1]
                    if C // blk["dwc"][0].shape[0] != heads[si]:
                        raise ValueError(f"{p}: dwc implies {C // blk['dwc'][0].shape[0]} heads, arch {heads[si]}")
                st["blocks"].append(blk)
            self.stages.append(st)
        self.norm = w.ln("norm")
        self.head = w.lin("head.fc")
        self.p = float(arch.get("focusing_factor", 3))
        w.check_all_used()

    def _attention(self, y, blk, clamp_grid, odd, variant, rec_meta):
        B, H, W, C = y.shape
        grid = (H, W)
        target = variant.window if variant.window is not None else blk["target"]
        window, shift = swin_window_shift(clamp_grid, (target, target), odd)
        wh, ww = window
        sh, sw = shift
        y_in = y
        if sh or sw:
            y = torch.roll(y, shifts=(-sh, -sw), dims=(1, 2))
        ph, pw = (wh - H % wh) % wh, (ww - W % ww) % ww
        if blk["type"] == "L" and (ph or pw) and variant.kernel == "native":
            raise ValueError(f"focused window {window} does not tile the grid {grid}: undefined")
        if (sh or sw) and any(-(-g // w) * w != -(-c // w) * w for g, c, w in zip(grid, clamp_grid, window)):
            raise ValueError(f"shifted window {window} on grid {grid} (timm's resolution {clamp_grid}): "
                             "timm's mask does not fit (it fails there); undefined")
        y = F.pad(y, (0, 0, 0, pw, 0, ph))
        Hp, Wp = H + ph, W + pw
        xw = partition_windows(y, window)  # [B*nW, N, C]
        nW, N = (Hp // wh) * (Wp // ww), wh * ww
        heads = blk["heads"]
        qkv = F.linear(xw, *blk["qkv"])
        q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
        addmask = allowed = None
        if sh or sw:
            lab = partition_windows(shift_mask_labels((Hp, Wp), window, shift)[None, :, :, None], window)[..., 0]
            diff = lab[:, :, None] != lab[:, None, :]  # [nW, N, N]
            addmask = torch.zeros(nW, N, N, dtype=y.dtype).masked_fill(diff, SHIFT_MASK_VALUE)
            addmask = addmask.repeat(B, 1, 1)[:, None]
            allowed = (~diff).repeat(B, 1, 1)
        extra = {"clamp_grid": list(clamp_grid)}
        kernel = variant.kernel
        if kernel == "native":
            kernel = "softmax" if blk["type"] == "S" else "focused"
        rec = LayerRecord(rec_meta[0], rec_meta[1], grid, grid, window, shift, (Hp, Wp), kernel, "window",
                          heads, variant.kernel == "native", extra)
        bias = None
        if blk["type"] == "S":
            table = blk["table"]
            L = table.shape[0]
            if L != (2 * wh - 1) * (2 * ww - 1) or wh != ww:
                table = resize_rel_pos_bias_table(table, window)
            extra["bias_table_window"] = [math.isqrt(L) // 2 + 1] * 2
            idx = relative_position_index(wh, ww)
            bias = table[idx.reshape(-1)].reshape(N, N, heads).permute(2, 0, 1)[None]
        dwc = None
        if variant.kernel == "native" and blk["type"] == "L":
            pe = blk["pe"]
            if pe is not None:
                s = math.isqrt(pe.shape[1])
                extra["pe_trained_grid"] = [s, s]
                pe = resize_positional_encoding(pe, window)
            core, factors, vh = focused_native(q, k, v, heads, blk["scale"], pe, self.p)
            dwc = depthwise_conv_heads(vh, window, *blk["dwc"])
            rec._factors = factors
        else:
            core, A = swapped_kernel(kernel, q, k, v, heads, variant.p, allowed=allowed, bias=bias,
                                     additive_mask=addmask)
            rec._A = A

        def to_image(t):
            t = reverse_windows(t, window, Hp, Wp)[:, :H, :W, :]
            return torch.roll(t, shifts=(sh, sw), dims=(1, 2)) if (sh or sw) else t

        out = F.linear(core if dwc is None else core + dwc, *blk["proj"])
        if KEEP_DEBUG:
            d = C // heads
            wq, bq = blk["qkv"]
            vimg = F.linear(y_in, wq[2 * C:], None if bq is None else bq[2 * C:])  # V of the image tokens
            rec.debug = {
                "v_keys": vimg[0].reshape(H, W, heads, d).permute(2, 0, 1, 3),
                "out": to_image(core)[0].reshape(H, W, heads, d).permute(2, 0, 1, 3),
                "v_pad": (blk["qkv"][1][2 * C:].reshape(heads, d) if blk["qkv"][1] is not None
                          else torch.zeros(heads, d, dtype=y.dtype)) if (ph or pw) else None,
            }
        return to_image(out), rec

    def forward(self, img, variant=Variant()):
        x = F.conv2d(img, self.patch_w, self.patch_b, stride=self.patch_w.shape[-2:])
        x = _ln(x.permute(0, 2, 3, 1), self.patch_norm, SWIN_LN_EPS)  # NHWC
        g0 = x.shape[1:3]
        records = []
        for si, st in enumerate(self.stages):
            if st["downsample"] is not None:
                x = patch_merging(x, *st["downsample"])
            for bi, blk in enumerate(st["blocks"]):
                a, rec = self._attention(_ln(x, blk["n1"], SWIN_LN_EPS), blk, swin_stage_resolution(g0, si),
                                         bi % 2 == 1, variant, (si, bi))
                records.append(rec)
                x = x + a
                y = F.linear(F.gelu(F.linear(_ln(x, blk["n2"], SWIN_LN_EPS), *blk["fc1"])), *blk["fc2"])
                x = x + y
        x = _ln(x, self.norm, SWIN_LN_EPS)
        return F.linear(x.mean(dim=(1, 2)), *self.head), records


# ---- PVT v2 family -------------------------------------------------------------------------------
class PVTReference:
    """timm-layout PVT v2 / FLatten-PVT v2 (after to_internal_layout)."""

    def __init__(self, state_dict, arch, dtype=torch.float64):
        self.arch = dict(arch)
        self.family = arch["family"]
        if self.family not in ("pvt_v2", "flatten_pvt_v2"):
            raise ValueError(self.family)
        self.w = _Weights(to_internal_layout(state_dict, self.family), dtype)
        w = self.w
        self.linear = bool(arch.get("linear", False))
        self.p = float(arch.get("focusing_factor", 3))
        self.stem = (w["patch_embed.proj.weight"], w.get("patch_embed.proj.bias"), w.ln("patch_embed.norm"))
        n = 0
        while f"stages.{n}.norm.weight" in w:
            n += 1
        heads = arch["heads"]
        sr = list(arch.get("sr_ratios", [8, 4, 2, 1]))
        if self.family == "flatten_pvt_v2":
            types = arch["attn_type"]
            la = [int(c) for c in arch.get("la_sr_ratios", [1] * n)]
        else:
            types, la = "S" * n, None
        if len(heads) != n or len(sr) != n:
            raise ValueError(f"arch heads {heads} / sr_ratios {sr} for {n} stages")
        self.stages = []
        for si in range(n):
            st = {"down": None, "blocks": [], "norm": w.ln(f"stages.{si}.norm")}
            if si > 0:
                p = f"stages.{si}.downsample."
                st["down"] = (w[p + "proj.weight"], w.get(p + "proj.bias"), w.ln(p + "norm"))
            b = 0
            while f"stages.{si}.blocks.{b}.norm1.weight" in w:
                p = f"stages.{si}.blocks.{b}."
                t = types[si]
                ratio = sr[si] if t == "S" else la[si]
                blk = {
                    "type": t, "heads": heads[si], "sr": ratio,
                    "n1": w.ln(p + "norm1"), "n2": w.ln(p + "norm2"),
                    "q": w.lin(p + "attn.q"), "kv": w.lin(p + "attn.kv"), "proj": w.lin(p + "attn.proj"),
                    "fc1": w.lin(p + "mlp.fc1"), "dw": w.lin(p + "mlp.dwconv"), "fc2": w.lin(p + "mlp.fc2"),
                    "sr_conv": None, "sr_norm": None,
                }
                if self.linear or ratio > 1:
                    blk["sr_conv"] = w.lin(p + "attn.sr")
                    blk["sr_norm"] = w.ln(p + "attn.norm")
                    ks = blk["sr_conv"][0].shape[-1]
                    if ks != (1 if self.linear else ratio):
                        raise ValueError(f"{p}attn.sr kernel {ks} disagrees with sr {ratio} / linear {self.linear}")
                if t == "L":
                    blk["dwc"] = (w[p + "attn.dwc.weight"], w[p + "attn.dwc.bias"])
                    blk["scale"] = w[p + "attn.scale"]
                    blk["pe"] = w.get(p + "attn.positional_encoding")
                st["blocks"].append(blk)
                b += 1
            self.stages.append(st)
        self.head = w.lin("head")
        w.check_all_used()

    def _attention(self, x, blk, grid, variant, rec_meta):
        B, N, C = x.shape
        H, W = grid
        heads = blk["heads"]
        q = F.linear(x, *blk["q"])
        if self.linear:
            g = x.permute(0, 2, 1).reshape(B, C, H, W)
            g = F.conv2d(adaptive_avg_pool(g, PVT_LI_POOL), *blk["sr_conv"])
            kg = tuple(g.shape[-2:])
            x_ = F.gelu(pvt_sr_norm(g.reshape(B, C, -1).permute(0, 2, 1), blk["sr_norm"]))
            structure = "pool"
        elif blk["sr"] > 1:
            g = x.permute(0, 2, 1).reshape(B, C, H, W)
            g = F.conv2d(g, *blk["sr_conv"], stride=blk["sr"])
            kg = tuple(g.shape[-2:])
            x_ = pvt_sr_norm(g.reshape(B, C, -1).permute(0, 2, 1), blk["sr_norm"])
            structure = "sr"
        else:
            x_, kg, structure = x, (H, W), "sr"
        kv = F.linear(x_, *blk["kv"])
        k, v = kv[..., :C], kv[..., C:]
        n = k.shape[1]
        kernel = variant.kernel
        if kernel == "native":
            kernel = "softmax" if blk["type"] == "S" else "focused"
        extra = {"pool": PVT_LI_POOL} if self.linear else {"sr": blk["sr"]}
        rec = LayerRecord(rec_meta[0], rec_meta[1], grid, kg, None, (0, 0), grid, kernel, structure, heads,
                          variant.kernel == "native", extra)
        dwc = None
        if variant.kernel == "native" and blk["type"] == "L":
            pe = blk["pe"]
            if pe is not None:
                s = math.isqrt(pe.shape[1])
                extra["pe_trained_grid"] = [s, s]
                pe = resize_positional_encoding(pe, kg)
            core, factors, vh = focused_native(q, k, v, heads, blk["scale"], pe, self.p)
            if blk["sr"] > 1 or self.linear:
                d = vh.shape[-1]
                vh = F.interpolate(vh.transpose(-2, -1).reshape(B * heads, d, n), size=N, mode="linear",
                                   align_corners=False).reshape(B, heads, d, N).transpose(-2, -1)
            dwc = depthwise_conv_heads(vh, grid, *blk["dwc"])
            rec._factors = factors
        else:
            core, A = swapped_kernel(kernel, q, k, v, heads, variant.p, scale_after=True)
            rec._A = A
        if KEEP_DEBUG:
            d = C // heads
            rec.debug = {"v_keys": v[0].reshape(*kg, heads, d).permute(2, 0, 1, 3),
                         "out": core[0].reshape(H, W, heads, d).permute(2, 0, 1, 3), "v_pad": None}
        return F.linear(core if dwc is None else core + dwc, *blk["proj"]), rec

    def _mlp(self, x, blk, grid):
        B, N, _ = x.shape
        y = F.linear(x, *blk["fc1"])
        hid = y.shape[-1]
        y = y.transpose(1, 2).reshape(B, hid, *grid)
        if self.linear:
            y = F.relu(y)
        y = F.conv2d(y, *blk["dw"], padding=1, groups=hid)
        y = F.gelu(y.flatten(2).transpose(1, 2))
        return F.linear(y, *blk["fc2"])

    def forward(self, img, variant=Variant()):
        if variant.window is not None:
            raise ValueError("PVT has no windows")
        pw, pb, pn = self.stem
        x = F.conv2d(img, pw, pb, stride=PVT_STEM[0], padding=PVT_STEM[1])
        records = []
        for si, st in enumerate(self.stages):
            if st["down"] is not None:
                dw, db, dn = st["down"]
                x = F.conv2d(x, dw, db, stride=PVT_DOWN[0], padding=PVT_DOWN[1])
                x_grid, x_norm = tuple(x.shape[-2:]), dn
            else:
                x_grid, x_norm = tuple(x.shape[-2:]), pn
            B, C = x.shape[:2]
            x = _ln(x.flatten(2).transpose(1, 2), x_norm, PVT_EMBED_LN_EPS)
            for bi, blk in enumerate(st["blocks"]):
                a, rec = self._attention(_ln(x, blk["n1"], PVT_BLOCK_LN_EPS), blk, x_grid, variant, (si, bi))
                records.append(rec)
                x = x + a
                x = x + self._mlp(_ln(x, blk["n2"], PVT_BLOCK_LN_EPS), blk, x_grid)
            x = _ln(x, st["norm"], PVT_BLOCK_LN_EPS)
            x = x.transpose(1, 2).reshape(B, -1, *x_grid)
        return F.linear(x.mean(dim=(-2, -1)), *self.head), records


def build(state_dict, arch, dtype=torch.float64):
    fam = arch["family"]
    if fam in ("swin", "flatten_swin"):
        return SwinReference(state_dict, arch, dtype)
    if fam in ("pvt_v2", "flatten_pvt_v2"):
        return PVTReference(state_dict, arch, dtype)
    raise ValueError(f"unknown family {fam!r}")
