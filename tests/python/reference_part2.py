"""Independent pure-PyTorch references of three more backbones, with per-layer attention records.

Families (functional: a state_dict in the authors' own key names + an arch dict in, logits + records out):
  flatten_cswin  LeapLabTHU/FLatten-Transformer models/flatten_cswin.py (CSWinTransformer), cfgs/flatten_cswin_*.yaml
  l2vit          ChuanyangZheng/L2ViT classification/models/l2vit.py (L2ViT, block_type mix_local_enhanced_vit)
  care           zhouyuan888888/CARETrans models/CARETrans.py (CARENets)

Written from the authors' public code (read, not copied; nothing here comes from attnscope's C++ sources).
Every constant the C++ side must match is a module-level name below; the forward passes follow the
authors' op order. Used in float64 by make_part2_cases.py. Helpers shared with the first hierarchical
families (partition_windows, focused_native, depthwise_conv_heads, swapped_kernel, f_p,
resize_positional_encoding, Variant) come from reference_hier.py.

Checkpoints. Keys are the authors' own; there is one key layout per family (no conversion). Which entry of
a torch.load result holds the weights (`unwrap_checkpoint`, first present wins):
  flatten_cswin  model, model_ema, state_dict, state_dict_ema (FLatten's utils_ema.load_checkpoint reads
                 checkpoint['model']; save_checkpoint_ema also writes 'state_dict_ema', ignored)
  l2vit          model_ema, model, state_dict_ema, state_dict (the released *-checkpoint-best-ema.pth hold
                 'model' AND 'model_ema' (ConvNeXt save_model); the accuracy in the README is model_ema's)
  care           state_dict, model, state_dict_ema, model_ema (the released ckpt/*.pth.tar are a BARE
                 state_dict: train.py --eval does model.load_state_dict(torch.load(ckpt)); timm's
                 CheckpointSaver files hold 'state_dict' (+ 'state_dict_ema', 'args', ...), and the authors'
                 conversion comment reads state['state_dict'])
  then a bare dict whose values are all tensors. BatchNorm `num_batches_tracked` (int64) keys are read and
  ignored.

Arch dict (what the keys cannot show; make_part2_cases.py stores it, see its docstring):
  flatten_cswin: heads [per stage], split_size [per stage] (stripe width of S blocks), la_split_size [per
    stage] (stripe width of L blocks, the authors' CSWIN_LA_SPLIT_SIZE "56-28-14-7" as a list or that
    string), attn_type ("LLSS", or the authors' M form), focusing_factor, img_size (training side).
  l2vit: heads [per stage], window (LWA window_size: 7, 12 for L2ViT_Base_384).
  care: att_head_dim [per stage] (the authors' (1, 1, 16, 32)).

FLatten-CSwin (flatten_cswin.py), as computed here:
  * stem `stage1_conv_embed.0` Conv2d(3, C, 7, stride 4, padding 2) -> tokens -> `stage1_conv_embed.2`
    LayerNorm; merges `merge{1,2,3}.conv` Conv2d(C, 2C, 3, stride 2, padding 1) THEN `merge{i}.norm`
    LayerNorm; every LayerNorm eps 1e-5; block x += proj(attn(norm1(x))); x += mlp(norm2(x)) (GELU);
    final `norm`, mean over tokens, `head`.
  * Block: `stageS.B.qkv` on the block (bias), reshape (B, N, 3, C): rows [q; k; v]. Two branches when the
    block has `attns.1` (the authors: branch_num = 1 if last stage or training resolution == split_size):
    branch 0 gets channels [:C/2] of q, k and v, branch 1 [C/2:], each with heads/2 heads of d = C/heads;
    outputs concatenated [branch 0, branch 1] on channels, so layer head h = b * heads/2 + local head.
    Branch 0 (LePEAttention idx=0) uses stripes H_sp = H (the full height), W_sp = split_size: VERTICAL
    stripes (columns of width split_size). Branch 1 (idx=1) uses H_sp = split_size, W_sp = W: HORIZONTAL
    stripes (rows of height split_size). Single-branch blocks (idx=-1) attend over the whole grid.
    Stripes are row-major in the grid, tokens row-major in a stripe.
  * Softmax (S) branch: q * d^-0.5 @ k^T, softmax, @ v, THEN + LePE, LePE = `get_v`: Conv2d(Cb, Cb, 3,
    padding 1, groups Cb, bias) applied to V of EACH STRIPE separately as an image [Cb, H_sp, W_sp] (zero
    padding at stripe borders), channel = head*d + j.
  * Focused (L) blocks: the authors' code runs only when the branch is one window (with two branches and
    several stripes the DWC reshape fails: v.reshape(B*h, H_sp, W_sp, -1) gives nW*d channels to a
    groups=d conv), i.e. la_split_size == the stage resolution (the default CSWIN_LA_SPLIT_SIZE
    56-28-14-7 at 224): single-branch, global. There: k += positional_encoding [1, N_train, C]; ReLU + 1e-6;
    / softplus(scale); f_p with norms over all C channels; heads split; z = 1/(q . mean(k) + 1e-6);
    kv = (k^T L^-0.5)(v L^-0.5); out = (q @ kv) * z; out += DWC(v) (Conv2d(d, d, kernel_size, groups d),
    shared by the heads, on [B*h, d, H, W]) + LePE (get_v on the whole grid). This reference refuses
    two-branch focused blocks.

L2ViT (l2vit.py, L2ViT_* with conv_stem=True, block_type mix_local_enhanced_vit), as computed here:
  * stem `downsample_layers.0`: the IMAGE is zero-padded right/bottom to a multiple of 4 (PatchEmbed), then
    proj.proj.0 Conv2d(3, C/2, 3, s2, p1) -> .1 BatchNorm2d -> ReLU -> .3 Conv2d(C/2, C, 3, s2, p1) -> .4
    BatchNorm2d, tokens, `downsample_layers.0.norm` LayerNorm(C). Stages 1-3 `downsample_layers.i`:
    LayerNorm(C_in) `norm` FIRST, then zero-pad right/bottom to even H, W, then `proj` Conv2d(C_in, C_out,
    2, stride 2). All LayerNorms eps 1e-5, BatchNorm eps 1e-5 (eval: running statistics).
  * Block j of a stage: LWABlock for even j, LGABlock for odd j (the reference reads the kind from the keys:
    `local_mp` present = LGA) and checks the alternation.
  * LWABlock: s = x + DWConv3x3(x) (`cpe.0`); y = norm1(s); zero-pad right/bottom to a multiple of the window
    (AFTER the norm; no clamp of the window to the grid, no shift, no mask, no bias: padding tokens are keys
    whose q, k, v are the qkv bias); windows row-major; q * d^-0.5 @ k^T, softmax, @ v, proj; crop;
    x = s + y; x = x + DWConv3x3(x) (`cpe.1`, AFTER the attention); x += mlp(norm2(x)).
  * LGABlock: x = x + DWConv3x3(x) (`cpe.0`, its only CPE); x += proj(LGA(norm1(x))) with q = ReLU(q),
    k = ReLU(k), denom = clamp_min(q . sum_N k, 100), out = q @ ((k^T v) * temperature[h]) / denom;
    then x += LCM(norm3(x)); THEN x += mlp(norm2(x)) (LCM before the MLP although `local_mp`/`norm3` are
    registered after `mlp`). LCM = conv1 (DW 7x7, pad 3, bias) -> GELU -> bn (BatchNorm2d) -> conv2 (DW
    7x7, pad 3, bias).
  * final `norm` (LayerNorm), mean over tokens, `head`.

CARE (CARETrans.py, CARENets), as computed here:
  * stem Conv2d(3, D0, 4, stride 4) `stem.0` -> BatchNorm2d `stem.1`; stage i > 0 starts with
    `stages.i.downsample.0` BatchNorm2d(D_in) THEN `.1` Conv2d(D_in, D_out, 2, stride 2). BN eps 1e-5.
  * TokenMixer, gc = mem_dim of the stage, D = feat + mem channels: channels [0, D-3gc) are the memory
    (untouched by the mixer), [D-3gc, D-2gc) the attention part, [D-2gc, D-gc) dwconv1 (DW 3x3),
    [D-gc, D) dwconv2 (DW 7x7). Stages with `token_mixer.qk` (the authors: stage index >= 2): q, k =
    split(qk(att) 1x1 conv, gc), v = the att slice itself; heads = gc / att_head_dim, channel =
    head*hd + j; q, k = ELU + 1; z = 1/(q . mean_N(k) + 1e-6); kv = k^T v / (H W); out = (q @ kv) * z.
    Other stages: att = DW(11x1, pad (5,0)) + DW(1x11, pad (0,5)) (`dwconvatt_1/2`).
  * InterModule (act = GELU from CARENets; norm_layer = BatchNorm2d): feats = [att, conv3, conv7];
    feats = fc2(DW3x3(GELU(fc1(BN(feats))))) + feats; cat = [mem, feats]; cat2 = DW3x3(GELU(fc1(BN(cat))));
    not last: out = fc2(cat2) + cat; last: out = cat2 (ratio2 * D channels, no fc2, no residual).
  * CAREBlock: not last: x = x + gamma * out; last block (last block of stage 3): x = out (no gamma).
  * Heads `head`, `dist_head`: mean over H, W -> GELU -> LayerNorm(cls_dim, eps 1e-6) -> fc; eval output
    (head + dist_head) / 2.

Attention records (`Record`, one per attention-bearing block numbered across stages in run order; for CARE
one per block of every stage, strip-conv blocks being kind "none" with no rows):
  stage, block, query_grid, key_grid (the same grid for all three families), kind "<kernel>-<structure>",
  kernel (native: softmax | focused | enhanced (L2ViT, learned temperature) | elu_linear (CARE) | none;
  swapped: softmax | linear | focused | enhanced), structure (cswin | window | global | none), heads, and
  row(r, c) -> [heads, key_h, key_w]: the weights of query (r, c) over the keys in IMAGE coordinates, 0
  outside the query's stripe / window, padding tokens (no image position) dropped (pad_mass(r, c) gives
  their share). Rows are attention x V only: LePE, DWC, CPE and LCM are not folded in.
  Factored rows: focused A_ij = q_i.k_j / n * z_i; enhanced A_ij = q_i.k_j * temperature / clamp(q_i .
  sum k, 100); CARE A_ij = phi(q_i).phi(k_j) / N * z_i.
  L2ViT LGA layers also have rows_lcm(queries): the row of M = C_conv A, C_conv [N, N] = the LCM's linear
  spatial part averaged over ALL C channels: C_conv = (1/C) sum_c conv2_c * (LCM_GELU_SLOPE * a_c) *
  conv1_c, conv*_c the zero-padded 7x7 depthwise convolutions of channel c as N x N matrices (no bias),
  a_c = bn.weight_c / sqrt(bn.running_var_c + eps) (BatchNorm folded, shift dropped), GELU linearised at 0
  (slope 1/2). All channels, not a head's: proj mixes every head into every LCM channel. norm3, the
  residual and the biases are left out (they mix no tokens).

Our own semantics (no author code defines these; the C++ side implements the same):
  * Inputs other than the training size. FLatten-CSwin: the grids follow the convolutions (stem
    floor((H + 4 - 7) / 4) + 1, merges ceil(H / 2)); single-branch blocks cover the whole current grid;
    a focused block's positional_encoding (square, trained grid) is resized to the grid as in
    reference_hier (bicubic, antialias); when a stripe does not tile the grid, q, k, v (after qkv) are
    zero-padded as Microsoft's CSWin segmentation backbone does (segmentation/backbone/
    cswin_transformer.py): pad = (split - n % split) % split, pad // 2 before (top / left), the rest after,
    no mask (padding keys have k = 0, v = 0), LePE on the zero-padded stripes, cropped back.
    L2ViT and CARE run any size as their code does.
  * Variant(kernel=...) swaps the attention kernel of every attention layer, from the layer's own raw
    q, k, v (reference_hier.swapped_kernel), in the layer's own stripes / windows (padding tokens stay keys):
      softmax   softmax(q.k d^-0.5)      linear  A = S / (sum_j S + 1e-6), S = ReLU(q).ReLU(k)
      focused   (ReLU(.) + 1e-6) / ln 2, f_p with norms over the channels of the attention unit (a CSwin
                branch's C/2, CSwin single-branch C, L2ViT C, CARE gc), no positional encoding, no DWC
      enhanced  S d^-0.5 / clamp_min(sum_j S, 100)
    CSwin keeps LePE under every kernel (it belongs to the block, native S and L alike); DWC and the
    positional encoding go. L2ViT keeps CPE and LCM. CARE: q, k = the two halves of qk(att) (before ELU),
    v = the att slice; strip-conv stages are unchanged.
  * Variant(window=w) (L2ViT only): every LWA block uses window w (padding as the authors' code).
"""

import math
from contextlib import contextmanager

import torch
import torch.nn.functional as F

import reference_hier as hier
from reference_hier import Variant  # noqa: F401  (re-exported: the generator uses part2.Variant)

# ---- constants of the authors' code --------------------------------------------------------------
LN_EPS = 1e-5              # nn.LayerNorm default: every LayerNorm of FLatten-CSwin and L2ViT
BN_EPS = 1e-5              # nn.BatchNorm2d default: L2ViT stem and LCM, every CARE norm but the heads'
CARE_HEAD_LN_EPS = 1e-6    # CARE Head: norm_layer=partial(nn.LayerNorm, eps=1e-6)
CARE_Z_EPS = 1e-6          # z = 1 / (q . mean(k) + 1e-6)
FOCUSED_EPS = hier.FOCUSED_EPS
L2VIT_CLAMP = 100.0        # torch.clamp(q @ k.sum, 1e2)
CSWIN_STEM = (4, 2)        # stage1_conv_embed.0: kernel 7, stride 4, padding 2
CSWIN_MERGE = (2, 1)       # Merge_Block conv: kernel 3, stride 2, padding 1
L2VIT_STEM_MULTIPLE = 4    # PatchEmbed pads the image to a multiple of patch_size 4
L2VIT_LCM_PAD = 3          # LCM kernel_size 7, padding 3
CARE_STRIP = 11            # dwconvatt_1 (11, 1) pad (5, 0), dwconvatt_2 (1, 11) pad (0, 5)
LCM_GELU_SLOPE = 0.5       # our display semantics: GELU'(0)

# KEEP_DEBUG: every Record keeps .debug = {v_keys [h, H, W, d] (V of each image key), out [h, H, W, d] (the
# attention output before LePE / DWC / proj, image order), v_pad [h, d] (V of a padding token) or None}.
KEEP_DEBUG = False

# Deliberate mistakes, for the generator's detectability report only (never set in normal use).
MISTAKES = set()
KNOWN_MISTAKES = {
    "cswin_branch_swap": "CSwin branch 0 on horizontal stripes, branch 1 on vertical",
    "cswin_lepe_whole_grid": "CSwin LePE conv over the whole grid (no zero padding at stripe borders)",
    "cswin_pad_after": "CSwin stripe padding all after (bottom/right) instead of split before/after",
    "l2vit_lcm_after_mlp": "L2ViT LCM after the MLP (registration order) instead of before",
    "l2vit_down_norm_after_conv": "L2ViT downsample LayerNorm after the conv (where C_in == C_out)",
    "l2vit_no_clamp": "L2ViT linear attention denominator without clamp_min(., 100)",
    "l2vit_mask_padding": "L2ViT local windows masking the padding keys (-inf)",
    "l2vit_no_cpe1": "L2ViT LWA block without its second CPE",
    "care_single_head": "CARE output = head only (not the mean of head and dist_head)",
    "care_inter_relu": "CARE InterModule with ReLU (the module default) instead of the GELU passed in",
    "care_down_norm_after_conv": "CARE downsample BatchNorm after the conv (where C_in == C_out)",
}


@contextmanager
def mistake(name):
    if name not in KNOWN_MISTAKES:
        raise ValueError(name)
    MISTAKES.add(name)
    try:
        yield
    finally:
        MISTAKES.discard(name)


# ---- checkpoints ---------------------------------------------------------------------------------
STATE_DICT_KEYS = {
    "flatten_cswin": ("model", "model_ema", "state_dict", "state_dict_ema"),
    "l2vit": ("model_ema", "model", "state_dict_ema", "state_dict"),
    "care": ("state_dict", "model", "state_dict_ema", "model_ema"),
}


def unwrap_checkpoint(obj, family):
    """(state_dict, key or None) of a torch.load result, by the family's preference (module docstring)."""
    if isinstance(obj, dict):
        for key in STATE_DICT_KEYS[family]:
            if key in obj and isinstance(obj[key], dict):
                return obj[key], key
        if obj and all(torch.is_tensor(v) for v in obj.values()):
            return obj, None
    raise ValueError("no state_dict found in checkpoint")


class _Weights(hier._Weights):
    def bn(self, prefix):
        """(weight, bias, running_mean, running_var) of a BatchNorm2d; num_batches_tracked is read too."""
        if prefix + ".num_batches_tracked" in self:
            self[prefix + ".num_batches_tracked"]
        return (self[prefix + ".weight"], self[prefix + ".bias"], self[prefix + ".running_mean"],
                self[prefix + ".running_var"])


def _ln(x, wb, eps=None):
    return F.layer_norm(x, (x.shape[-1],), wb[0], wb[1], LN_EPS if eps is None else eps)


# BatchNorm is module level so that the generator can calibrate running statistics through it.
BN_CALIBRATE = None  # callable(stats tuple, x NCHW) or None


def batch_norm(x, stats):
    if BN_CALIBRATE is not None:
        BN_CALIBRATE(stats, x)
    w, b, m, v = stats
    return F.batch_norm(x, m, v, w, b, training=False, eps=BN_EPS)


def _nchw(t):  # [B, H, W, C] -> [B, C, H, W]
    return t.permute(0, 3, 1, 2)


def _nhwc(t):
    return t.permute(0, 2, 3, 1)


# ---- records -------------------------------------------------------------------------------------
class Group:
    """Heads [h0, h1) of a layer attending inside windows (wh, ww) that tile a padded grid (Hp, Wp), the
    image grid (H, W) sitting at offset (top, left) in it. Probabilities either explicit A [nW, hg, n, n]
    or factored (qf [nW, hg, n, d], kf [nW, hg, n, d], s [nW, hg, n, 1]): A_ij = (qf_i . kf_j) s_i."""

    def __init__(self, h0, h1, grid, padded, offset, window, A=None, factors=None, label=None):
        self.h0, self.h1 = h0, h1
        self.grid, self.padded, self.offset, self.window = tuple(grid), tuple(padded), tuple(offset), tuple(window)
        self.A, self.factors, self.label = A, factors, label

    def locate(self, r, c):
        pr, pc = r + self.offset[0], c + self.offset[1]
        wh, ww = self.window
        return (pr // wh) * (self.padded[1] // ww) + pc // ww, (pr % wh) * ww + pc % ww

    def window_row(self, widx, i):
        if self.A is not None:
            return self.A[widx, :, i, :]
        qf, kf, s = self.factors
        return (qf[widx, :, i, None, :] @ kf[widx].transpose(-2, -1))[:, 0, :] * s[widx, :, i, :]

    def _keys(self, widx):
        """Image (row, col) of the window's keys, and a bool of those inside the image."""
        wh, ww = self.window
        nww = self.padded[1] // ww
        r0, c0 = (widx // nww) * wh, (widx % nww) * ww
        rr = torch.arange(wh).repeat_interleave(ww) + r0 - self.offset[0]
        cc = torch.arange(ww).repeat(wh) + c0 - self.offset[1]
        inside = (rr >= 0) & (rr < self.grid[0]) & (cc >= 0) & (cc < self.grid[1])
        return rr, cc, inside

    def row(self, r, c):
        widx, i = self.locate(r, c)
        vals = self.window_row(widx, i)  # [hg, n]
        rr, cc, inside = self._keys(widx)
        out = torch.zeros(vals.shape[0], *self.grid, dtype=vals.dtype)
        out[:, rr[inside], cc[inside]] = vals[:, inside]
        return out, vals[:, ~inside].sum(dim=-1)

    def region(self, r, c):
        widx, _ = self.locate(r, c)
        rr, cc, inside = self._keys(widx)
        m = torch.zeros(*self.grid, dtype=torch.bool)
        m[rr[inside], cc[inside]] = True
        return m

    def full_matrix(self):
        """[hg, N, N] over image tokens (single-window groups without padding only)."""
        if self.padded != self.grid or self.window != self.grid:
            raise ValueError("full_matrix needs a single unpadded window")
        if self.A is not None:
            return self.A[0]
        qf, kf, s = self.factors
        return (qf[0] @ kf[0].transpose(-2, -1)) * s[0]

    def to_json(self):
        return {"heads": [self.h0, self.h1], "window": list(self.window), "padded_grid": list(self.padded),
                "offset": list(self.offset), **({"stripe": self.label} if self.label else {})}


class Record:
    """Attention record of one block; see the module docstring."""

    def __init__(self, stage, block, grid, kernel, structure, heads, native, groups, extra=None, window=None):
        self.stage, self.block = stage, block
        self.query_grid = self.key_grid = tuple(grid)
        self.kernel, self.structure = kernel, structure
        self.kind = "none" if kernel == "none" else f"{kernel}-{structure}"
        self.heads, self.native = heads, native
        self.groups = groups
        self.extra = extra or {}
        self.window = None if window is None else tuple(window)
        self.lcm = None  # L2ViT LGA: callable (r, c) -> C_conv row [H, W]
        self.debug = None

    def has_rows(self):
        return bool(self.groups)

    def row(self, r, c):
        H, W = self.query_grid
        if not (0 <= r < H and 0 <= c < W):
            raise IndexError(f"query ({r}, {c}) outside {self.query_grid}")
        return torch.cat([g.row(r, c)[0] for g in self.groups], dim=0)

    def pad_mass(self, r, c):
        return torch.cat([g.row(r, c)[1] for g in self.groups], dim=0)

    def region(self, r, c):
        """[heads, H, W] bool: the keys of the query's stripe / window (image positions)."""
        return torch.cat([g.region(r, c)[None].expand(g.h1 - g.h0, -1, -1) for g in self.groups], dim=0)

    def rows(self, queries):
        return torch.stack([self.row(r, c) for r, c in queries], dim=1)  # [h, Q, kh, kw]

    def rows_lcm(self, queries):
        """[h, Q, kh, kw]: rows of C_conv A (L2ViT LGA layers)."""
        (g,) = self.groups
        A = g.full_matrix()  # [h, N, N]
        out = []
        for r, c in queries:
            crow = self.lcm(r, c).reshape(-1)
            out.append(torch.einsum("i,hij->hj", crow, A).reshape(self.heads, *self.key_grid))
        return torch.stack(out, dim=1)

    def to_json(self):
        d = {"stage": self.stage, "block": self.block, "query_grid": list(self.query_grid),
             "key_grid": list(self.key_grid), "window": None if self.window is None else list(self.window),
             "shift": [0, 0], "kind": self.kind, "kernel": self.kernel, "structure": self.structure,
             "native": self.native,
             "heads": self.heads, **self.extra}
        if self.structure == "cswin":
            d["branches"] = [g.to_json() for g in self.groups]
        elif self.structure == "window":
            d["padded_grid"] = list(self.groups[0].padded)
        return d


def _debug_heads(t, heads):  # [H, W, C] -> [h, H, W, d]
    H, W, C = t.shape
    return t.reshape(H, W, heads, C // heads).permute(2, 0, 1, 3)


# ---- FLatten-CSwin -------------------------------------------------------------------------------
def cswin_stripe(idx, grid, split):
    """(H_sp, W_sp) of a LePEAttention / FocusedLinearAttention branch on the current grid."""
    H, W = grid
    if idx == -1:
        return (H, W)
    if "cswin_branch_swap" in MISTAKES:
        idx = 1 - idx
    return (H, split) if idx == 0 else (split, W)


def cswin_stripe_padding(grid, stripe):
    """(top, bottom, left, right) zero padding so that the stripe tiles the grid (Microsoft CSWin
    segmentation backbone: pad // 2 before, the rest after)."""
    ph = (stripe[0] - grid[0] % stripe[0]) % stripe[0]
    pw = (stripe[1] - grid[1] % stripe[1]) % stripe[1]
    if "cswin_pad_after" in MISTAKES:
        return 0, ph, 0, pw
    return ph // 2, ph - ph // 2, pw // 2, pw - pw // 2


def _parse_cswin_split(v, n):
    if isinstance(v, str):
        v = [int(s) for s in v.split("-")]
    v = [int(s) for s in v]
    if len(v) != n:
        raise ValueError(f"split sizes {v} for {n} stages")
    return v


class CSwinReference:
    def __init__(self, state_dict, arch, dtype=torch.float64):
        if arch["family"] != "flatten_cswin":
            raise ValueError(arch["family"])
        self.arch = dict(arch)
        w = self.w = _Weights(state_dict, dtype)
        self.stem = (w["stage1_conv_embed.0.weight"], w.get("stage1_conv_embed.0.bias"))
        self.stem_norm = w.ln("stage1_conv_embed.2")
        depths = []
        while f"stage{len(depths) + 1}.0.qkv.weight" in w:
            b = 0
            while f"stage{len(depths) + 1}.{b}.qkv.weight" in w:
                b += 1
            depths.append(b)
        n = len(depths)
        self.depths = depths
        heads = list(arch["heads"])
        split = _parse_cswin_split(arch["split_size"], n)
        la_split = _parse_cswin_split(arch["la_split_size"], n)
        if len(heads) != n:
            raise ValueError(f"arch heads {heads} for {n} stages")
        types = hier._parse_attn_types(arch["attn_type"], depths)
        self.p = float(arch.get("focusing_factor", 3))
        self.stages = []
        for si in range(n):
            st = {"merge": None, "blocks": []}
            if si > 0:
                p = f"merge{si}."
                st["merge"] = ((w[p + "conv.weight"], w.get(p + "conv.bias")), w.ln(p + "norm"))
            for bi in range(depths[si]):
                p = f"stage{si + 1}.{bi}."
                t = types[si][bi]
                focused = p + "attns.0.scale" in w
                if focused != (t == "L"):
                    raise ValueError(f"{p}: attn_type says {t}, keys say {'L' if focused else 'S'}")
                branches = 2 if p + "attns.1.get_v.weight" in w else 1
                C = w[p + "qkv.weight"].shape[1]
                blk = {"type": t, "heads": heads[si], "branches": branches,
                       "split": la_split[si] if t == "L" else split[si],
                       "n1": w.ln(p + "norm1"), "n2": w.ln(p + "norm2"),
                       "qkv": w.lin(p + "qkv"), "proj": w.lin(p + "proj"),
                       "fc1": w.lin(p + "mlp.fc1"), "fc2": w.lin(p + "mlp.fc2"),
                       "get_v": [(w[p + f"attns.{b}.get_v.weight"], w.get(p + f"attns.{b}.get_v.bias"))
                                 for b in range(branches)]}
                if branches == 2 and (heads[si] % 2 or C % 2):
                    raise ValueError(f"{p}: two branches need even heads and channels")
                if blk["get_v"][0][0].shape[0] != C // branches:
                    raise ValueError(f"{p}: get_v width disagrees with {branches} branch(es)")
                if t == "L":
                    if branches == 2:
                        raise ValueError(f"{p}: two-branch focused block (la_split_size < resolution): the "
                                         "authors' code fails on it (DWC reshape); undefined")
                    a = p + "attns.0."
                    blk["dwc"] = (w[a + "dwc.weight"], w[a + "dwc.bias"])
                    blk["scale"] = w[a + "scale"]
                    blk["pe"] = w[a + "positional_encoding"]
                    if C // blk["dwc"][0].shape[0] != heads[si]:
                        raise ValueError(f"{p}: dwc implies {C // blk['dwc'][0].shape[0]} heads, arch {heads[si]}")
                st["blocks"].append(blk)
            self.stages.append(st)
        self.norm = w.ln("norm")
        self.head = w.lin("head")
        w.check_all_used()

    @staticmethod
    def _lepe(vp, stripe, get_v):
        """get_v on each stripe of the (padded) V [B, Hp, Wp, Cb] -> [B*nW, n, Cb] in window order."""
        B, Hp, Wp, Cb = vp.shape
        sh, sw = stripe
        if "cswin_lepe_whole_grid" in MISTAKES:
            g = _nhwc(F.conv2d(_nchw(vp), get_v[0], get_v[1], padding=1, groups=Cb))
            return hier.partition_windows(g, stripe)
        x = vp.reshape(B, Hp // sh, sh, Wp // sw, sw, Cb).permute(0, 1, 3, 5, 2, 4).reshape(-1, Cb, sh, sw)
        x = F.conv2d(x, get_v[0], get_v[1], padding=1, groups=Cb)
        return x.reshape(-1, Cb, sh * sw).transpose(1, 2)

    def _branch(self, q, k, v, blk, b, idx, heads, variant):
        """One LePEAttention / FocusedLinearAttention on q, k, v [B, H, W, Cb] -> (out incl. LePE (and DWC)
        [B, H, W, Cb], attention output without LePE / DWC [B, H, W, Cb], Group)."""
        B, H, W, Cb = q.shape
        stripe = cswin_stripe(idx, (H, W), blk["split"])
        t, bo, l, r = cswin_stripe_padding((H, W), stripe)
        pad = (lambda x: F.pad(x, (0, 0, l, r, t, bo))) if (t or bo or l or r) else (lambda x: x)
        qp, kp, vp = pad(q), pad(k), pad(v)
        Hp, Wp = H + t + bo, W + l + r
        qw, kw, vw = (hier.partition_windows(x, stripe) for x in (qp, kp, vp))
        lepe = self._lepe(vp, stripe, blk["get_v"][b])
        h0 = b * heads
        label = {-1: "full", 0: "vertical", 1: "horizontal"}[idx]
        extra = None
        if variant.kernel == "native" and blk["type"] == "L":
            pe = blk["pe"]
            s = math.isqrt(pe.shape[1])
            extra = {"pe_trained_grid": [s, s]}
            pe = hier.resize_positional_encoding(pe, (H, W))
            core, (qf, kf, z), vh = hier.focused_native(qw, kw, vw, heads, blk["scale"], pe, self.p)
            n = kw.shape[1]
            group = Group(h0, h0 + heads, (H, W), (Hp, Wp), (t, l), stripe, factors=(qf, kf, z / n), label=label)
            extra_out = hier.depthwise_conv_heads(vh, (H, W), *blk["dwc"])
        else:
            kernel = "softmax" if variant.kernel == "native" else variant.kernel
            core, A = hier.swapped_kernel(kernel, qw, kw, vw, heads, variant.p)
            group = Group(h0, h0 + heads, (H, W), (Hp, Wp), (t, l), stripe, A=A, label=label)
            extra_out = 0
        out = core + extra_out + lepe

        def back(x):
            return hier.reverse_windows(x, stripe, Hp, Wp)[:, t:t + H, l:l + W, :]

        return back(out), back(core), group, extra

    def _attention(self, y, blk, variant, meta):
        B, H, W, C = y.shape
        qkv = F.linear(y, *blk["qkv"])
        q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
        heads = blk["heads"]
        if blk["branches"] == 2:
            Cb, hb = C // 2, heads // 2
            res = [self._branch(q[..., sl], k[..., sl], v[..., sl], blk, b, b, hb, variant)
                   for b, sl in enumerate((slice(0, Cb), slice(Cb, C)))]
        else:
            res = [self._branch(q, k, v, blk, 0, -1, heads, variant)]
        out = torch.cat([x[0] for x in res], dim=-1)
        core = torch.cat([x[1] for x in res], dim=-1)
        groups = [x[2] for x in res]
        kernel = variant.kernel
        if kernel == "native":
            kernel = "softmax" if blk["type"] == "S" else "focused"
        extra = {"split_size": blk["split"], **(res[0][3] or {})}
        rec = Record(meta[0], meta[1], (H, W), kernel, "cswin", heads, variant.kernel == "native", groups, extra)
        if KEEP_DEBUG:
            rec.debug = {"v_keys": _debug_heads(v[0], heads), "out": _debug_heads(core[0], heads),
                         "v_pad": torch.zeros(heads, C // heads, dtype=y.dtype)}
        return F.linear(out, *blk["proj"]), rec

    def forward(self, img, variant=Variant()):
        if variant.window is not None:
            raise ValueError("FLatten-CSwin has no window option")
        x = _nhwc(F.conv2d(img, *self.stem, stride=CSWIN_STEM[0], padding=CSWIN_STEM[1]))
        x = _ln(x, self.stem_norm)
        records = []
        for si, st in enumerate(self.stages):
            if st["merge"] is not None:
                conv, norm = st["merge"]
                x = _ln(_nhwc(F.conv2d(_nchw(x), *conv, stride=CSWIN_MERGE[0], padding=CSWIN_MERGE[1])), norm)
            for bi, blk in enumerate(st["blocks"]):
                a, rec = self._attention(_ln(x, blk["n1"]), blk, variant, (si, bi))
                records.append(rec)
                x = x + a
                x = x + F.linear(F.gelu(F.linear(_ln(x, blk["n2"]), *blk["fc1"])), *blk["fc2"])
        x = _ln(x, self.norm)
        return F.linear(x.mean(dim=(1, 2)), *self.head), records


# ---- L2ViT ---------------------------------------------------------------------------------------
def lcm_conv_row(r, c, grid, lcm):
    """Row (r, c) of C_conv (see the module docstring) as [H, W]: the adjoint of conv2 . diag . conv1
    applied to the delta at (r, c), averaged over channels."""
    (w1, _), bn, (w2, _) = lcm
    gamma, _, _, var = bn
    C = w1.shape[0]
    a = gamma / torch.sqrt(var + BN_EPS) * LCM_GELU_SLOPE
    e = torch.zeros(1, C, *grid, dtype=w1.dtype)
    e[:, :, r, c] = 1.0
    t = F.conv_transpose2d(e, w2, padding=L2VIT_LCM_PAD, groups=C) * a[None, :, None, None]
    t = F.conv_transpose2d(t, w1, padding=L2VIT_LCM_PAD, groups=C)
    return t[0].mean(dim=0)


def lcm_conv_matrix(grid, lcm):
    """C_conv [N, N] built forwards (for checking lcm_conv_row)."""
    (w1, _), bn, (w2, _) = lcm
    gamma, _, _, var = bn
    C = w1.shape[0]
    N = grid[0] * grid[1]
    a = gamma / torch.sqrt(var + BN_EPS) * LCM_GELU_SLOPE
    e = torch.eye(N, dtype=w1.dtype).reshape(N, 1, *grid).expand(N, C, *grid)
    t = F.conv2d(e, w1, padding=L2VIT_LCM_PAD, groups=C) * a[None, :, None, None]
    t = F.conv2d(t, w2, padding=L2VIT_LCM_PAD, groups=C)
    return t.mean(dim=1).reshape(N, N).T  # column j = response to a delta at token j


class L2ViTReference:
    def __init__(self, state_dict, arch, dtype=torch.float64):
        if arch["family"] != "l2vit":
            raise ValueError(arch["family"])
        self.arch = dict(arch)
        w = self.w = _Weights(state_dict, dtype)
        p = "downsample_layers.0.proj.proj."
        if p + "0.weight" not in w:
            raise ValueError("only the conv stem (conv_stem=True, every released L2ViT) is supported")
        self.stem = (w.lin(p + "0"), w.bn(p + "1"), w.lin(p + "3"), w.bn(p + "4"),
                     w.ln("downsample_layers.0.norm"))
        heads = list(arch["heads"])
        self.window = int(arch["window"])
        self.stages = []
        si = 0
        while f"stages.{si}.0.norm1.weight" in w:
            st = {"down": None, "blocks": []}
            if si > 0:
                p = f"downsample_layers.{si}."
                st["down"] = (w.ln(p + "norm"), w.lin(p + "proj"))
            bi = 0
            while f"stages.{si}.{bi}.norm1.weight" in w:
                p = f"stages.{si}.{bi}."
                lga = p + "local_mp.conv1.weight" in w
                if lga != (bi % 2 == 1):
                    raise ValueError(f"{p}: block kind does not alternate LWA (even) / LGA (odd)")
                blk = {"lga": lga, "heads": heads[si], "cpe0": w.lin(p + "cpe.0.proj"),
                       "n1": w.ln(p + "norm1"), "n2": w.ln(p + "norm2"),
                       "qkv": w.lin(p + "attn.qkv"), "proj": w.lin(p + "attn.proj"),
                       "fc1": w.lin(p + "mlp.fc1"), "fc2": w.lin(p + "mlp.fc2")}
                if lga:
                    blk["temperature"] = w[p + "attn.temperature"]
                    if blk["temperature"].shape[0] != heads[si]:
                        raise ValueError(f"{p}: temperature has {blk['temperature'].shape[0]} heads, arch {heads[si]}")
                    blk["n3"] = w.ln(p + "norm3")
                    blk["lcm"] = (w.lin(p + "local_mp.conv1"), w.bn(p + "local_mp.bn"), w.lin(p + "local_mp.conv2"))
                else:
                    blk["cpe1"] = w.lin(p + "cpe.1.proj")
                st["blocks"].append(blk)
                bi += 1
            self.stages.append(st)
            si += 1
        if len(heads) != len(self.stages):
            raise ValueError(f"arch heads {heads} for {len(self.stages)} stages")
        self.norm = w.ln("norm")
        self.head = w.lin("head")
        w.check_all_used()

    @staticmethod
    def _cpe(x, wb):  # x [B, H, W, C]: x + DWConv3x3(x)
        C = x.shape[-1]
        return x + _nhwc(F.conv2d(_nchw(x), wb[0], wb[1], padding=wb[0].shape[-1] // 2, groups=C))

    @staticmethod
    def _mlp(x, blk):
        return F.linear(F.gelu(F.linear(_ln(x, blk["n2"]), *blk["fc1"])), *blk["fc2"])

    @staticmethod
    def _lcm(x, lcm):
        (w1, b1), bn, (w2, b2) = lcm
        C = x.shape[-1]
        y = F.conv2d(_nchw(x), w1, b1, padding=L2VIT_LCM_PAD, groups=C)
        y = batch_norm(F.gelu(y), bn)
        return _nhwc(F.conv2d(y, w2, b2, padding=L2VIT_LCM_PAD, groups=C))

    def _lwa(self, x, blk, variant, meta):
        B, H, W, C = x.shape
        heads = blk["heads"]
        s = self._cpe(x, blk["cpe0"])
        y = _ln(s, blk["n1"])
        win = variant.window if variant.window is not None else self.window
        pb, pr = (win - H % win) % win, (win - W % win) % win
        y = F.pad(y, (0, 0, 0, pr, 0, pb))
        Hp, Wp = H + pb, W + pr
        xw = hier.partition_windows(y, (win, win))
        qkv = F.linear(xw, *blk["qkv"])
        q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
        kernel = "softmax" if variant.kernel == "native" else variant.kernel
        mask = None
        if "l2vit_mask_padding" in MISTAKES and (pb or pr):
            valid = torch.zeros(1, Hp, Wp, 1, dtype=x.dtype)
            valid[:, :H, :W] = 1
            vw = hier.partition_windows(valid, (win, win))[..., 0] > 0  # [nW, n]
            mask = torch.zeros(vw.shape[0], 1, 1, vw.shape[1], dtype=x.dtype).masked_fill(~vw[:, None, None, :], -1e30)
            mask = mask.repeat(B, 1, 1, 1)
        core, A = hier.swapped_kernel(kernel, q, k, v, heads, variant.p, additive_mask=mask)
        group = Group(0, heads, (H, W), (Hp, Wp), (0, 0), (win, win), A=A)
        rec = Record(meta[0], meta[1], (H, W), kernel, "window", heads, variant.kernel == "native", [group],
                     window=(win, win))
        out = hier.reverse_windows(F.linear(core, *blk["proj"]), (win, win), Hp, Wp)[:, :H, :W]
        if KEEP_DEBUG:
            wq, bq = blk["qkv"]
            vimg = F.linear(y[:, :H, :W], wq[2 * C:], None if bq is None else bq[2 * C:])
            core_img = hier.reverse_windows(core, (win, win), Hp, Wp)[:, :H, :W]
            rec.debug = {"v_keys": _debug_heads(vimg[0], heads), "out": _debug_heads(core_img[0], heads),
                         "v_pad": (bq[2 * C:].reshape(heads, C // heads) if bq is not None
                                   else torch.zeros(heads, C // heads, dtype=x.dtype)) if (pb or pr) else None}
        x = s + out
        if "l2vit_no_cpe1" not in MISTAKES:
            x = self._cpe(x, blk["cpe1"])
        return x + self._mlp(x, blk), rec

    def _lga(self, x, blk, variant, meta):
        B, H, W, C = x.shape
        heads = blk["heads"]
        d = C // heads
        x = self._cpe(x, blk["cpe0"])
        y = _ln(x, blk["n1"]).reshape(B, H * W, C)
        qkv = F.linear(y, *blk["qkv"])
        q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
        if variant.kernel == "native":
            qh, kh, vh = (hier._heads(t, heads) for t in (q, k, v))
            qf, kf = F.relu(qh), F.relu(kh)
            denom = qf @ kf.transpose(-2, -1).sum(dim=-1, keepdim=True)  # [B, h, N, 1]
            if "l2vit_no_clamp" not in MISTAKES:
                denom = torch.clamp(denom, min=L2VIT_CLAMP)
            kv = (kf.transpose(-2, -1) @ vh) * blk["temperature"]
            core = hier._tokens((qf @ kv) / denom)
            group = Group(0, heads, (H, W), (H, W), (0, 0), (H, W),
                          factors=(qf, kf, blk["temperature"][None] / denom))
            kernel = "enhanced"
        else:
            kernel = variant.kernel
            core, A = hier.swapped_kernel(kernel, q, k, v, heads, variant.p)
            group = Group(0, heads, (H, W), (H, W), (0, 0), (H, W), A=A)
        rec = Record(meta[0], meta[1], (H, W), kernel, "global", heads, variant.kernel == "native", [group])
        lcm = blk["lcm"]
        rec.lcm = lambda r, c: lcm_conv_row(r, c, (H, W), lcm)
        rec.lcm_weights = lcm
        rec.extra["lcm_gelu_slope"] = LCM_GELU_SLOPE
        if KEEP_DEBUG:
            rec.debug = {"v_keys": _debug_heads(v[0].reshape(H, W, C), heads),
                         "out": _debug_heads(core[0].reshape(H, W, C), heads), "v_pad": None}
        x = x + F.linear(core, *blk["proj"]).reshape(B, H, W, C)
        if "l2vit_lcm_after_mlp" in MISTAKES:
            x = x + self._mlp(x, blk)
            return x + self._lcm(_ln(x, blk["n3"]), lcm), rec
        x = x + self._lcm(_ln(x, blk["n3"]), lcm)
        return x + self._mlp(x, blk), rec

    def forward(self, img, variant=Variant()):
        (w0, b0), bn1, (w3, b3), bn4, norm0 = self.stem
        m = L2VIT_STEM_MULTIPLE
        img = F.pad(img, (0, (m - img.shape[-1] % m) % m, 0, (m - img.shape[-2] % m) % m))
        x = F.relu(batch_norm(F.conv2d(img, w0, b0, stride=2, padding=1), bn1))
        x = batch_norm(F.conv2d(x, w3, b3, stride=2, padding=1), bn4)
        x = _ln(_nhwc(x), norm0)
        records = []
        for si, st in enumerate(self.stages):
            if st["down"] is not None:
                norm, (dw, db) = st["down"]
                swap = "l2vit_down_norm_after_conv" in MISTAKES and dw.shape[0] == dw.shape[1]
                if not swap:
                    x = _ln(x, norm)
                g = _nchw(x)
                g = F.pad(g, (0, g.shape[-1] % 2, 0, g.shape[-2] % 2))
                x = _nhwc(F.conv2d(g, dw, db, stride=2))
                if swap:
                    x = _ln(x, norm)
            for bi, blk in enumerate(st["blocks"]):
                fn = self._lga if blk["lga"] else self._lwa
                x, rec = fn(x, blk, variant, (si, bi))
                records.append(rec)
        x = _ln(x, self.norm)
        return F.linear(x.mean(dim=(1, 2)), *self.head), records


# ---- CARE ----------------------------------------------------------------------------------------
class CAREReference:
    def __init__(self, state_dict, arch, dtype=torch.float64):
        if arch["family"] != "care":
            raise ValueError(arch["family"])
        self.arch = dict(arch)
        w = self.w = _Weights(state_dict, dtype)
        self.stem = (w.lin("stem.0"), w.bn("stem.1"))
        hd = list(arch["att_head_dim"])
        self.stages = []
        si = 0
        while f"stages.{si}.blocks.0.inter_layer.inter1_norm.weight" in w:
            st = {"down": None, "blocks": []}
            if f"stages.{si}.downsample.0.weight" in w:
                st["down"] = (w.bn(f"stages.{si}.downsample.0"), w.lin(f"stages.{si}.downsample.1"))
            elif si > 0:
                raise ValueError(f"stage {si} has no downsample")
            bi = 0
            while f"stages.{si}.blocks.{bi}.inter_layer.inter1_norm.weight" in w:
                p = f"stages.{si}.blocks.{bi}."
                t, il = p + "token_mixer.", p + "inter_layer."
                att = t + "qk.weight" in w
                blk = {"att": att, "dw3": w.lin(t + "dwconv1"), "dw7": w.lin(t + "dwconv2")}
                gc = blk["dw3"][0].shape[0]
                blk["gc"] = gc
                if att:
                    blk["qk"] = w.lin(t + "qk")
                    if gc % hd[si]:
                        raise ValueError(f"{p}: gc {gc} not a multiple of att_head_dim {hd[si]}")
                    blk["heads"] = gc // hd[si]
                else:
                    blk["strip"] = (w.lin(t + "dwconvatt_1"), w.lin(t + "dwconvatt_2"))
                    blk["heads"] = 0
                blk["last"] = p + "gamma" not in w
                blk["gamma"] = None if blk["last"] else w[p + "gamma"]
                blk["inter1"] = (w.bn(il + "inter1_norm"), w.lin(il + "inter1_fc1"), w.lin(il + "inter1_conv"),
                                 w.lin(il + "inter1_fc2"))
                blk["inter2"] = (w.bn(il + "inter2_norm"), w.lin(il + "inter2_fc1"), w.lin(il + "inter2_conv"),
                                 None if blk["last"] else w.lin(il + "inter2_fc2"))
                if blk["last"] and il + "inter2_fc2.weight" in w:
                    raise ValueError(f"{p}: last block (no gamma) with inter2_fc2")
                st["blocks"].append(blk)
                bi += 1
            self.stages.append(st)
            si += 1
        if len(hd) != len(self.stages):
            raise ValueError(f"att_head_dim {hd} for {len(self.stages)} stages")
        self.heads_fc = [(w.ln(f"{h}.norm"), w.lin(f"{h}.fc")) for h in ("head", "dist_head")]
        w.check_all_used()

    @staticmethod
    def _dw(x, wb, padding):
        return F.conv2d(x, wb[0], wb[1], padding=padding, groups=x.shape[1])

    @staticmethod
    def _inter_part(x, parts, act):
        bn, fc1, conv, fc2 = parts
        y = act(F.conv2d(batch_norm(x, bn), *fc1))
        y = F.conv2d(y, conv[0], conv[1], padding=1, groups=y.shape[1])
        return y if fc2 is None else F.conv2d(y, *fc2)

    def _block(self, x, blk, variant, meta):
        B, D, H, W = x.shape
        gc = blk["gc"]
        m = D - 3 * gc
        mem, att, c3, c7 = x[:, :m], x[:, m:m + gc], x[:, m + gc:m + 2 * gc], x[:, m + 2 * gc:]
        c3 = self._dw(c3, blk["dw3"], 1)
        c7 = self._dw(c7, blk["dw7"], 3)
        extra = {"channels": {"memory": [0, m], "attention": [m, m + gc], "dwconv3": [m + gc, m + 2 * gc],
                              "dwconv7": [m + 2 * gc, D]}}
        if blk["att"]:
            heads, N = blk["heads"], H * W
            qk = F.conv2d(att, *blk["qk"]).reshape(B, 2 * gc, N)
            q, k, v = qk[:, :gc].transpose(1, 2), qk[:, gc:].transpose(1, 2), att.reshape(B, gc, N).transpose(1, 2)
            if variant.kernel == "native":
                qf, kf, vh = (hier._heads(t, heads) for t in (q, k, v))
                qf, kf = F.elu(qf) + 1.0, F.elu(kf) + 1.0
                z = 1.0 / (qf @ kf.mean(dim=-2, keepdim=True).transpose(-2, -1) + CARE_Z_EPS)
                kv = (kf.transpose(-2, -1) @ vh) / N
                out = hier._tokens((qf @ kv) * z)
                group = Group(0, heads, (H, W), (H, W), (0, 0), (H, W), factors=(qf, kf, z / N))
                kernel = "elu_linear"
            else:
                kernel = variant.kernel
                out, A = hier.swapped_kernel(kernel, q, k, v, heads, variant.p)
                group = Group(0, heads, (H, W), (H, W), (0, 0), (H, W), A=A)
            rec = Record(meta[0], meta[1], (H, W), kernel, "global", heads, variant.kernel == "native", [group],
                         extra)
            if KEEP_DEBUG:
                rec.debug = {"v_keys": _debug_heads(v[0].reshape(H, W, gc), heads),
                             "out": _debug_heads(out[0].reshape(H, W, gc), heads), "v_pad": None}
            att = out.transpose(1, 2).reshape(B, gc, H, W)
        else:
            (w1, b1), (w2, b2) = blk["strip"]
            att = (F.conv2d(att, w1, b1, padding=(CARE_STRIP // 2, 0), groups=gc)
                   + F.conv2d(att, w2, b2, padding=(0, CARE_STRIP // 2), groups=gc))
            rec = Record(meta[0], meta[1], (H, W), "none", "none", 0, True, [], extra)
        act = F.relu if "care_inter_relu" in MISTAKES else F.gelu
        feats = torch.cat([att, c3, c7], dim=1)
        feats = self._inter_part(feats, blk["inter1"], act) + feats
        cat = torch.cat([mem, feats], dim=1)
        out = self._inter_part(cat, blk["inter2"], act)
        if not blk["last"]:
            out = out + cat
            return x + out * blk["gamma"].reshape(1, -1, 1, 1), rec
        return out, rec

    def forward(self, img, variant=Variant()):
        if variant.window is not None:
            raise ValueError("CARE has no window option")
        (sw, sb), sbn = self.stem
        x = batch_norm(F.conv2d(img, sw, sb, stride=sw.shape[-1]), sbn)
        records = []
        for si, st in enumerate(self.stages):
            if st["down"] is not None:
                bn, (dw, db) = st["down"]
                swap = "care_down_norm_after_conv" in MISTAKES and dw.shape[0] == dw.shape[1]
                if not swap:
                    x = batch_norm(x, bn)
                x = F.conv2d(x, dw, db, stride=dw.shape[-1])
                if swap:
                    x = batch_norm(x, bn)
            for bi, blk in enumerate(st["blocks"]):
                x, rec = self._block(x, blk, variant, (si, bi))
                records.append(rec)
        outs = []
        for norm, fc in self.heads_fc:
            y = F.gelu(x.mean(dim=(2, 3)))
            outs.append(F.linear(_ln(y, norm, eps=CARE_HEAD_LN_EPS), *fc))
        if "care_single_head" in MISTAKES:
            return outs[0], records
        return (outs[0] + outs[1]) / 2, records


def build(state_dict, arch, dtype=torch.float64):
    fam = arch["family"]
    if fam == "flatten_cswin":
        return CSwinReference(state_dict, arch, dtype)
    if fam == "l2vit":
        return L2ViTReference(state_dict, arch, dtype)
    if fam == "care":
        return CAREReference(state_dict, arch, dtype)
    raise ValueError(f"unknown family {fam!r}")
