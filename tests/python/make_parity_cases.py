#!/usr/bin/python3
"""Generate attnscope's parity cases: small random timm-layout ViTs, inputs, and the reference outputs.

Usage: /usr/bin/python3 tests/python/make_parity_cases.py OUTDIR

Independent reference written from ../shared/reference/attention-variants.md (see
reference_vit.py); nothing here is derived from the C++ sources. Deterministic (fixed seeds), runs in
a few seconds on 2 CPU cores. The reference runs in float64 from the weights exactly as saved (F32, or
rounded to F16/BF16 for two cases) and the float32 input, then its outputs are stored as float32.

OUTDIR/cases.json is a list of objects:
  name, model (<model>.safetensors, may be shared by cases), input (<name>.input.npy, float32
  [1,3,H,W]), arch ({"heads": h}, only for plain-qkv models, omitted for the one case where the C++
  side must infer heads = C/64), settings {variant, p, window, anchors, dwc, norm}, queries (token
  indices), logits (<name>.logits.npy, float32 [1, classes]), rows (<name>.rows.npy, float32
  [L, h, Q, T]: row q of every layer's and head's attention matrix), matrix (<name>.matrix.npy, float32
  [h, T, T], the last layer's equivalent matrix: with FLatten's DWC band where the DWC ran); informative extras: grid [gh, gw], num_prefix, tokens, weights_dtype.
"""

import math
import os
import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import torch
import numpy as np

import reference_vit as ref
import safetensors_io
from fixture_tools import Init, output_folder, replaced, write_cases

CLASSES = 10


# --------------------------------------------------------------------------------------------
# Random timm-layout state dicts
# --------------------------------------------------------------------------------------------
def smooth_field(r, grid, channels):
    """[grid*grid, channels] low-frequency random field (unit std), row-major over the grid."""
    yy, xx = torch.meshgrid(torch.arange(grid) / grid, torch.arange(grid) / grid, indexing="ij")
    freq = torch.randint(0, 3, (channels, 3, 2), generator=r.g).float()
    phase = r.uniform([channels, 3], 0.0, 2 * math.pi)
    amp = r.normal([channels, 3], 1.0)
    arg = math.pi * (freq[..., 0, None, None] * yy + freq[..., 1, None, None] * xx) + phase[..., None, None]
    field = (amp[..., None, None] * torch.cos(arg)).sum(dim=1)  # [channels, grid, grid]
    field = field.reshape(channels, grid * grid).T
    return field / field.std()


def make_state(seed, dim, depth, patch, grid, heads=None, cls=True, dist=False, reg=0,
               pos_prefix=True, norm=True, fc_norm=False, layerscale=False, qkv_bias=True,
               attn="plain", dwc_k=5, pe=None, lcm_blocks=(), anchors_m=6, mlp_ratio=4, qkv_std=1.2,
               pos_smooth=1.0):
    """Random weights with activations in a sane range (attention neither uniform nor one-hot).

    Linear weights have std ~ qkv_std / sqrt(C) etc. (0.1-0.2 here); the patch part of pos_embed is
    a smooth random field over the grid (like a trained one) plus noise, so neighbouring tokens are
    correlated and pooled anchors stay distinct.
    """
    r = Init(seed)
    C = dim
    sd = {}
    ln = lambda p: sd.update({p + ".weight": r.normal([C], 0.1, 1.0), p + ".bias": r.normal([C], 0.05)})
    lin = lambda p, o, i, std, bias=True: sd.update(
        {p + ".weight": r.normal([o, i], std), **({p + ".bias": r.normal([o], 0.02)} if bias else {})})
    sd["patch_embed.proj.weight"] = r.normal([C, 3, patch, patch], 1.0 / math.sqrt(3 * patch * patch))
    sd["patch_embed.proj.bias"] = r.normal([C], 0.02)
    n_prefix = 0
    if cls:
        sd["cls_token"] = r.normal([1, 1, C], 0.5)
        n_prefix += 1
    if dist:
        sd["dist_token"] = r.normal([1, 1, C], 0.5)
        n_prefix += 1
    if reg:
        sd["reg_token"] = r.normal([1, reg, C], 0.5)
        n_prefix += reg
    n = grid * grid
    pos = r.normal([1, (n_prefix if pos_prefix else 0) + n, C], 0.2)
    pos[0, pos.shape[1] - n:] += pos_smooth * smooth_field(r, grid, C)
    sd["pos_embed"] = pos
    d = C // heads
    hidden = C * mlp_ratio
    for i in range(depth):
        p = f"blocks.{i}."
        ln(p + "norm1")
        if attn == "anchor":
            sd[p + "attn.x_to_emb.weight"] = r.normal([2 * C, C], 1.2 / math.sqrt(C))
            sd[p + "attn.dist_anchor_B.weight"] = r.normal([anchors_m, d], 1.0)
            lin(p + "attn.to_out.0", C, C, 0.6 / math.sqrt(C))
        else:
            lin(p + "attn.qkv", 3 * C, C, qkv_std / math.sqrt(C), bias=qkv_bias)
            lin(p + "attn.proj", C, C, 0.6 / math.sqrt(C))
        if attn == "focused":
            sd[p + "attn.dwc.weight"] = r.normal([d, 1, dwc_k, dwc_k], 0.15)
            sd[p + "attn.dwc.bias"] = r.normal([d], 0.02)
            sd[p + "attn.scale"] = r.normal([1, 1, C], 0.5)
            if pe == "T":
                sd[p + "attn.positional_encoding"] = r.normal([1, n_prefix + n, C], 0.3)
            elif pe == "N":
                sd[p + "attn.positional_encoding"] = r.normal([1, n, C], 0.3)
        if attn == "enhanced":
            sd[p + "attn.temperature"] = r.uniform([heads, 1, 1], 0.1, 0.6)
            if i in lcm_blocks:
                ln(p + "norm3")
                sd[p + "local_mp.conv1.weight"] = r.normal([C, 1, 7, 7], 0.08)
                sd[p + "local_mp.conv1.bias"] = r.normal([C], 0.02)
                sd[p + "local_mp.bn.weight"] = r.normal([C], 0.1, 1.0)
                sd[p + "local_mp.bn.bias"] = r.normal([C], 0.1)
                sd[p + "local_mp.bn.running_mean"] = r.normal([C], 0.2)
                sd[p + "local_mp.bn.running_var"] = r.uniform([C], 0.3, 2.0)
                sd[p + "local_mp.bn.num_batches_tracked"] = torch.tensor(1234, dtype=torch.int64)
                sd[p + "local_mp.conv2.weight"] = r.normal([C, 1, 7, 7], 0.08)
                sd[p + "local_mp.conv2.bias"] = r.normal([C], 0.02)
        if layerscale:
            sd[p + "ls1.gamma"] = r.uniform([C], 0.1, 1.0)
            sd[p + "ls2.gamma"] = r.uniform([C], 0.1, 1.0)
        ln(p + "norm2")
        lin(p + "mlp.fc1", hidden, C, 1.0 / math.sqrt(C))
        lin(p + "mlp.fc2", C, hidden, 0.5 / math.sqrt(hidden))
    if norm:
        ln("norm")
    if fc_norm:
        ln("fc_norm")
    lin("head", CLASSES, C, 1.0 / math.sqrt(C))
    if dist:
        lin("head_dist", CLASSES, C, 1.0 / math.sqrt(C))
    return sd


# --------------------------------------------------------------------------------------------
# Model and case table
# --------------------------------------------------------------------------------------------
# name: (state kwargs, heads for arch or None, weights dtype)
MODELS = {
    "vit_softmax": (dict(seed=1, dim=64, depth=2, patch=16, grid=7, heads=2, qkv_std=1.7), 2, torch.float32),
    "deit_distilled": (dict(seed=2, dim=48, depth=2, patch=16, grid=4, heads=3, dist=True), 3, torch.float32),
    "vit_gap_fcnorm": (dict(seed=3, dim=64, depth=2, patch=16, grid=6, heads=4, cls=False, pos_prefix=False,
                            norm=False, fc_norm=True), 4, torch.float32),
    "vit_patch8": (dict(seed=4, dim=32, depth=3, patch=8, grid=8, heads=2), 2, torch.float32),
    "vit_interp": (dict(seed=5, dim=48, depth=2, patch=16, grid=6, heads=2), 2, torch.float32),
    "vit_layerscale": (dict(seed=6, dim=64, depth=2, patch=16, grid=5, heads=2, layerscale=True), 2, torch.float32),
    "vit_registers": (dict(seed=7, dim=64, depth=2, patch=16, grid=5, heads=2, reg=4, pos_prefix=False),
                      2, torch.float32),
    "vit_focused_pe_t": (dict(seed=8, dim=64, depth=2, patch=16, grid=6, heads=2, attn="focused", dwc_k=5,
                              pe="T"), None, torch.float32),
    "vit_focused_pe_n": (dict(seed=9, dim=48, depth=2, patch=16, grid=5, heads=3, attn="focused", dwc_k=3,
                              pe="N"), None, torch.float32),
    "vit_enhanced_lcm": (dict(seed=10, dim=64, depth=3, patch=16, grid=6, heads=4, attn="enhanced",
                              lcm_blocks=(0, 2)), None, torch.float32),
    "vit_anchor": (dict(seed=11, dim=64, depth=2, patch=16, grid=6, heads=4, attn="anchor", anchors_m=6),
                   None, torch.float32),
    "vit_qkv_nobias": (dict(seed=12, dim=64, depth=2, patch=16, grid=5, heads=4, qkv_bias=False), 4, torch.float32),
    "vit_c128_noarch": (dict(seed=13, dim=128, depth=2, patch=16, grid=4, heads=2), None, torch.float32),
    "vit_f16": (dict(seed=14, dim=64, depth=2, patch=16, grid=5, heads=2), 2, torch.float16),
    "vit_enhanced_bf16": (dict(seed=15, dim=64, depth=2, patch=16, grid=5, heads=2, attn="enhanced",
                               lcm_blocks=(1,)), None, torch.bfloat16),
}


def S(variant="softmax", p=3.0, window=0, anchors=0, dwc=False, norm="all"):
    return dict(variant=variant, p=p, window=window, anchors=anchors, dwc=dwc, norm=norm)


# name: (model, input (H, W), settings)
CASES = [
    ("softmax_cls", "vit_softmax", (112, 112), S()),
    ("distilled", "deit_distilled", (64, 64), S()),
    ("gap_fcnorm", "vit_gap_fcnorm", (96, 96), S()),
    ("patch8", "vit_patch8", (64, 64), S()),
    ("interp_nonsquare", "vit_interp", (64, 112), S()),
    ("layerscale", "vit_layerscale", (80, 80), S()),
    ("registers", "vit_registers", (80, 80), S()),
    ("qkv_nobias", "vit_qkv_nobias", (80, 80), S()),
    ("infer_heads_c128", "vit_c128_noarch", (64, 64), S()),
    ("f16_weights", "vit_f16", (80, 80), S()),
    # swaps on the softmax model (7x7 grid)
    ("swap_linear", "vit_softmax", (112, 112), S("linear")),
    ("swap_focused_p3_all", "vit_softmax", (112, 112), S("focused", p=3, norm="all")),
    ("swap_focused_p2_head", "vit_softmax", (112, 112), S("focused", p=2, norm="head")),
    ("swap_enhanced", "vit_softmax", (112, 112), S("enhanced")),
    ("window_w3", "vit_softmax", (112, 112), S("window", window=3)),
    ("window_w3_linear", "vit_softmax", (112, 112), S("linear", window=3)),
    ("window_w3_focused", "vit_softmax", (112, 112), S("focused", p=3, window=3)),
    ("window_w2_enhanced", "vit_softmax", (112, 112), S("enhanced", window=2)),
    ("window_w7_global", "vit_softmax", (112, 112), S("window", window=7)),
    ("anchor_pooled_m5", "vit_softmax", (112, 112), S("anchor", anchors=5)),
    ("anchor_pooled_m7", "vit_softmax", (112, 112), S("anchor", anchors=7)),
    ("window_default_patch8", "vit_patch8", (64, 64), S("window", window=0)),
    ("window_w3_nonsquare", "vit_interp", (64, 112), S("window", window=3)),
    ("anchor_pooled_nonsquare_m5", "vit_interp", (64, 112), S("anchor", anchors=5)),
    ("distilled_focused", "deit_distilled", (64, 64), S("focused", p=3)),
    # native focused (FLatten)
    ("focused_native_dwc_on", "vit_focused_pe_t", (96, 96), S("focused", p=3, dwc=True)),
    ("focused_native_dwc_off", "vit_focused_pe_t", (96, 96), S("focused", p=3, dwc=False)),
    ("focused_native_as_softmax", "vit_focused_pe_t", (96, 96), S("softmax", dwc=True)),
    ("focused_native_peN_dwc", "vit_focused_pe_n", (80, 80), S("focused", p=3, dwc=True)),
    ("focused_native_peN_dwc_head_w3", "vit_focused_pe_n", (80, 80),
     S("focused", p=2, window=3, dwc=True, norm="head")),
    # native enhanced (L2ViT LGA + LCM)
    ("enhanced_native_lcm", "vit_enhanced_lcm", (96, 96), S("enhanced")),
    ("enhanced_native_as_softmax", "vit_enhanced_lcm", (96, 96), S("softmax")),
    ("bf16_weights_enhanced", "vit_enhanced_bf16", (80, 80), S("enhanced")),
    # native anchor (AnchorFormer)
    ("anchor_native_all", "vit_anchor", (96, 96), S("anchor", anchors=0)),
    ("anchor_native_top3", "vit_anchor", (96, 96), S("anchor", anchors=3)),
    ("anchor_native_as_softmax", "vit_anchor", (96, 96), S("softmax")),
]

ROW_SUM_ONE = ("softmax", "window", "linear", "anchor")


def queries_for(num_prefix, gh, gw):
    mid = num_prefix + (gh // 2) * gw + gw // 2
    if num_prefix:
        return [0, num_prefix, mid]
    return [0, mid, gh * gw - 1]


def check_anchor_margins(model, img, settings):
    """For top-mass anchor selection, make sure no near-tie could flip the choice in float32."""
    margins = []
    orig = ref.Attention._anchor

    def spy(self, q, k, v, ctx, want):
        s = ctx.settings
        if self.kind == "anchor" and 0 < s.anchors < self.anchor_u.shape[0]:
            a = ((q @ self.anchor_u.T) * self.scale).softmax(dim=-1)
            mass = torch.sort(a.sum(dim=-2), dim=-1, descending=True).values
            margins.append(((mass[..., s.anchors - 1] - mass[..., s.anchors]) / mass[..., 0]).min().item())
        return orig(self, q, k, v, ctx, want)

    with replaced(ref.Attention, "_anchor", spy):
        model.forward(img, settings)
    return min(margins) if margins else None


def check_enhanced_kink(model, img, settings):
    """Rows of enhanced attention whose sum_j S_ij is near the clamp_min(., 100) kink would make the
    float32 comparison fragile; return (min relative distance to 100, fraction of clamped rows)."""
    dist, clamped, total = [], 0, 0
    orig = ref.Attention._enhanced

    def spy(self, q, k, v, ctx, want):
        nonlocal clamped, total
        sc = self._masked_scores(torch.relu(q), torch.relu(k), ctx.mask)
        sums = sc.sum(dim=-1)
        dist.append(((sums - 100.0).abs() / 100.0).min().item())
        clamped += int((sums < 100.0).sum())
        total += sums.numel()
        return orig(self, q, k, v, ctx, want)

    with replaced(ref.Attention, "_enhanced", spy):
        model.forward(img, settings)
    return min(dist), clamped / total


def main(argv):
    out_dir = output_folder(argv, __doc__.strip().splitlines()[2])
    if out_dir is None:
        return 2
    ref.CHECK_MATRIX = True
    t0 = time.time()

    models = {}
    for name, (kw, heads, dtype) in MODELS.items():
        sd = make_state(**kw)
        path = os.path.join(out_dir, name + ".safetensors")
        safetensors_io.save_file(sd, path, metadata={"format": "pt"}, dtype=dtype)
        loaded, meta = safetensors_io.load_file(path, with_metadata=True)  # the rounded weights
        assert meta == {"format": "pt"} and set(loaded) == set(sd)
        for k in sd:
            assert loaded[k].shape == sd[k].shape, k
            if dtype == torch.float32 or not sd[k].is_floating_point():
                assert torch.equal(loaded[k], sd[k]), k
            else:
                assert loaded[k].dtype == dtype and torch.equal(loaded[k], sd[k].to(dtype)), k
        models[name] = (ref.ViTReference(loaded, heads=heads, dtype=torch.float64), heads)

    cases = []
    for ci, (name, mname, (H, W), sdict) in enumerate(CASES):
        model, heads = models[mname]
        settings = ref.Settings.from_dict(sdict)
        g = torch.Generator().manual_seed(1000 + ci)
        img32 = torch.randn(1, 3, H, W, generator=g)
        img = img32.to(torch.float64)
        with torch.no_grad():
            logits, mats = model.forward(img, settings, record=True)
            _, equivalent = model.forward(img, settings, record=True, with_dwc_band=True)
            fast = model.forward(img, settings)  # the non-recording path must agree
        assert torch.allclose(fast, logits, rtol=0, atol=1e-10), name
        gh, gw = H // model.patch[0], W // model.patch[1]
        P = model.num_prefix
        T = P + gh * gw
        q = queries_for(P, gh, gw)
        rows = torch.stack([m[0][:, q, :] for m in mats])  # [L, h, Q, T]
        matrix = equivalent[-1][0]  # the last layer's equivalent matrix (with FLatten's DWC band)
        assert rows.shape == (len(mats), model.heads[0], len(q), T), (name, rows.shape)
        for arr in (logits, rows, matrix):
            assert torch.isfinite(arr).all(), name
        if settings.variant in ROW_SUM_ONE or settings.variant == "focused":
            err = max((m[0].sum(-1) - 1).abs().max().item() for m in mats)
            assert err < 1e-4, (name, err)
        note = ""
        if settings.variant == "enhanced":
            kink, frac = check_enhanced_kink(model, img, settings)
            assert kink > 1e-3, (name, kink)
            note = f" clamp_min(.,100) active in {100 * frac:.0f}% of rows"
        spread = (logits.max() - logits.min()).item()
        assert spread > 0.1, (name, spread)
        margin = check_anchor_margins(model, img, settings) if settings.variant == "anchor" else None
        if margin is not None:
            assert margin > 1e-3, (name, margin)
            note = f" anchor-mass margin {margin:.3g}"

        np.save(os.path.join(out_dir, name + ".input.npy"), img32.numpy().astype(np.float32))
        np.save(os.path.join(out_dir, name + ".logits.npy"), logits.numpy().astype(np.float32))
        np.save(os.path.join(out_dir, name + ".rows.npy"), np.ascontiguousarray(rows.numpy().astype(np.float32)))
        np.save(os.path.join(out_dir, name + ".matrix.npy"),
                np.ascontiguousarray(matrix.numpy().astype(np.float32)))
        entry = {"name": name, "model": mname + ".safetensors", "input": name + ".input.npy"}
        if heads is not None:
            entry["arch"] = {"heads": heads}
        entry.update({
            "settings": settings.to_dict(), "queries": q,
            "logits": name + ".logits.npy", "rows": name + ".rows.npy", "matrix": name + ".matrix.npy",
            "grid": [gh, gw], "num_prefix": P, "tokens": T,
            "weights_dtype": {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}[MODELS[mname][2]],
        })
        cases.append(entry)
        print(f"{name:32s} T={T:3d} h={model.heads[0]} logits[{logits.min():+.3f},{logits.max():+.3f}]{note}")

    return write_cases(out_dir, cases, t0, f", {len(models)} models")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
