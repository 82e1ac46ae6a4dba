#!/usr/bin/python3
"""Generate attnscope's TorchScript cases: small random models of families attnscope does not implement
natively, exported with scripts/export_torchscript.py, plus inputs and reference outputs.

Usage: /usr/bin/python3 tests/python/make_torchscript_cases.py OUTDIR

The models are defined here (the exporter imports this file through --factory). The reference output
comes from the plain eager model exactly as built (timm-style attention on its fused path,
nn.MultiheadAttention called with need_weights=False, so torch 1.13's native fast path where it
applies); the reference attention rows are recomputed in float64 from the inputs each attention module
receives (forward pre-hooks on the eager model), not taken from the exported file. Deterministic
(fixed seeds), a few seconds on 2 CPU cores.

OUTDIR/cases.json is a list of objects:
  name, model (<model>.pt, TorchScript written by the exporter), input (<name>.input.npy, float32
  [1,3,H,W], already normalised: fed to forward as is), output (<name>.output.npy, float32 [1, N]),
  rows (<name>.rows.npy, float32 [L, heads, Q, T]: row q of every layer's and head's attention),
  queries (token indices: class token, a register/distillation token where there is one, patches),
  prefix_tokens, grid [gh, gw], heads, layers (L); informative extras: tokens (T), size [H, W],
  prefix_names, kinds (per layer), output_kind ("logits"/"embedding"), patch_size.
OUTDIR/no_metadata.pt: a plain torch.jit.trace of a model, without attnscope.json (must be refused).
"""

import contextlib
import io
import json
import os
import sys
import tempfile
import time
from collections import OrderedDict

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import torch
import numpy as np
from torch import nn

from fixture_tools import write_cases

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTER = os.path.join(HERE, "..", "..", "scripts", "export_torchscript.py")


# --------------------------------------------------------------------------------------------
# Family 1: timm-style ViT with differently named attention (blocks.N.mixer, class SelfAttention),
# fused_attn=True by default, class token + register tokens, optional separate q/k/v projections.
# --------------------------------------------------------------------------------------------
class SelfAttention(nn.Module):
    def __init__(self, dim, num_heads, separate_qkv=False):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.fused_attn = True  # like timm with F.scaled_dot_product_attention available
        if separate_qkv:
            self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        else:
            self.qkv = nn.Linear(dim, dim * 3)
        self.attn_drop = nn.Dropout(0.1)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(0.1)

    def forward(self, x):
        B, N, C = x.shape
        if hasattr(self, "qkv"):
            q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        else:
            q, k, v = [p(x).reshape(B, N, self.num_heads, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v)]
        if self.fused_attn:  # stands in for F.scaled_dot_product_attention: never touches attn_drop
            w = torch.einsum("bhqd,bhkd->bhqk", q, k).mul(self.scale)
            x = torch.einsum("bhqk,bhkd->bhqd", torch.softmax(w, dim=-1), v)
        else:
            q = q * self.scale
            attn = q @ k.transpose(-2, -1)
            attn = attn.softmax(dim=-1)
            attn = self.attn_drop(attn)
            x = attn @ v
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))


class MixerBlock(nn.Module):
    def __init__(self, dim, heads, separate_qkv=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.mixer = SelfAttention(dim, heads, separate_qkv)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class MixerViT(nn.Module):
    def __init__(self, dim=48, heads=3, depth=3, patch=8, grid=(5, 4), classes=7, dist=False, reg=0,
                 separate_qkv_blocks=()):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.5)
        self.dist_token = nn.Parameter(torch.randn(1, 1, dim) * 0.5) if dist else None
        self.reg_token = nn.Parameter(torch.randn(1, reg, dim) * 0.5) if reg else None
        self.pos_embed = nn.Parameter(torch.randn(1, grid[0] * grid[1], dim) * 0.5)
        self.blocks = nn.Sequential(*[MixerBlock(dim, heads, i in separate_qkv_blocks) for i in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)
        with torch.no_grad():  # sharper attention than the default init gives
            for m in self.modules():
                if isinstance(m, SelfAttention):
                    for p in ([m.qkv] if hasattr(m, "qkv") else [m.q, m.k]):
                        p.weight.mul_(4.0)

    def forward(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2) + self.pos_embed
        prefix = [self.cls_token.expand(x.shape[0], -1, -1)]
        if self.dist_token is not None:
            prefix.append(self.dist_token.expand(x.shape[0], -1, -1))
        if self.reg_token is not None:
            prefix.append(self.reg_token.expand(x.shape[0], -1, -1))
        x = self.blocks(torch.cat(prefix + [x], dim=1))
        return self.head(self.norm(x)[:, 0])


def make_mixer_vit():
    torch.manual_seed(101)
    return MixerViT(dim=48, heads=3, depth=3, patch=8, grid=(5, 4), classes=7, reg=2, separate_qkv_blocks=(1,))


def make_mixer_deit():
    torch.manual_seed(202)
    return MixerViT(dim=32, heads=2, depth=2, patch=8, grid=(4, 4), classes=5, dist=True)


# --------------------------------------------------------------------------------------------
# Family 2: CLIP-like pre-norm transformer on nn.MultiheadAttention (OpenAI CLIP's sequence-first
# layout in some blocks, batch_first=True in another), output an L2-free projected embedding.
# --------------------------------------------------------------------------------------------
class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, width, heads, batch_first):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads, batch_first=batch_first)
        self.ln_1 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict([("c_fc", nn.Linear(width, width * 4)), ("gelu", QuickGELU()),
                                              ("c_proj", nn.Linear(width * 4, width))]))
        self.ln_2 = nn.LayerNorm(width)

    def attention(self, x):  # x: [B, T, C]
        y = self.ln_1(x)
        if not self.attn.batch_first:
            y = y.transpose(0, 1)
        y = self.attn(y, y, y, need_weights=False, attn_mask=None)[0]
        return y if self.attn.batch_first else y.transpose(0, 1)

    def forward(self, x):
        x = x + self.attention(x)
        return x + self.mlp(self.ln_2(x))


class ClipLikeVisual(nn.Module):
    def __init__(self, width=32, heads=4, layers=3, patch=8, grid=(4, 6), out_dim=24, batch_first=(False, True, False)):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, patch, patch, bias=False)
        self.class_embedding = nn.Parameter(torch.randn(width) * 0.5)
        self.positional_embedding = nn.Parameter(torch.randn(1 + grid[0] * grid[1], width) * 0.5)
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = nn.Sequential(*[ResidualAttentionBlock(width, heads, batch_first[i]) for i in range(layers)])
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(torch.randn(width, out_dim) * width ** -0.5)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.MultiheadAttention):
                    m.in_proj_weight.mul_(3.0)
                    m.in_proj_bias.normal_(0, 0.1)

    def forward(self, images):
        x = self.conv1(images).flatten(2).transpose(1, 2)
        cls = self.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding
        x = self.transformer(self.ln_pre(x))
        return self.ln_post(x[:, 0]) @ self.proj


def make_clip_like():
    torch.manual_seed(303)
    return ClipLikeVisual()


# --------------------------------------------------------------------------------------------
# Models the exporter must refuse
# --------------------------------------------------------------------------------------------
class InlineAttention(nn.Module):
    """Attention computed inline (as with F.scaled_dot_product_attention): no attn_drop to hook."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1) * (C // self.num_heads) ** -0.5).softmax(-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class AlwaysFusedAttention(SelfAttention):
    """Looks timm-style (has attn_drop, fused_attn) but its explicit path is keyed on another flag."""

    def forward(self, x):
        fused, self.fused_attn = self.fused_attn, True
        try:
            return super().forward(x)
        finally:
            self.fused_attn = fused


class TinyUnsupported(nn.Module):
    def __init__(self, attn_cls):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, 16, 8, 8)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 16))
        self.attn = attn_cls(16, 2)
        self.head = nn.Linear(16, 3)

    def forward(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.head(self.attn(x)[:, 0])


def make_inline_attention():
    torch.manual_seed(404)
    return TinyUnsupported(InlineAttention)


def make_always_fused():
    torch.manual_seed(505)
    return TinyUnsupported(AlwaysFusedAttention)


# --------------------------------------------------------------------------------------------
# Independent reference: the plain eager model's output, attention recomputed from module inputs
# --------------------------------------------------------------------------------------------
def softmax_attention(q, k, scale):
    return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1)


def reference(model, image):
    """(output [1, N] float32, [L, heads, T, T] float64 attention in forward order)."""
    mats, handles = [], []

    def self_attention_hook(m, inputs):
        x = inputs[0].double()
        B, N, C = x.shape
        lin = lambda p, t: t @ p.weight.double().T + p.bias.double()  # noqa: E731
        if hasattr(m, "qkv"):
            q, k, _ = lin(m.qkv, x).reshape(B, N, 3, m.num_heads, C // m.num_heads).permute(2, 0, 3, 1, 4)
        else:
            q, k = [lin(p, x).reshape(B, N, m.num_heads, C // m.num_heads).transpose(1, 2) for p in (m.q, m.k)]
        mats.append(softmax_attention(q, k, (C // m.num_heads) ** -0.5))

    def mha_hook(m, inputs):
        q_in, k_in = inputs[0].double(), inputs[1].double()
        if not m.batch_first:
            q_in, k_in = q_in.transpose(0, 1), k_in.transpose(0, 1)
        B, N, C = q_in.shape
        h, d = m.num_heads, C // m.num_heads
        w, b = m.in_proj_weight.double(), m.in_proj_bias.double()
        q = (q_in @ w[:C].T + b[:C]).reshape(B, N, h, d).transpose(1, 2)
        k = (k_in @ w[C:2 * C].T + b[C:2 * C]).reshape(B, -1, h, d).transpose(1, 2)
        mats.append(softmax_attention(q, k, d ** -0.5))

    for m in model.modules():
        if isinstance(m, SelfAttention):
            handles.append(m.register_forward_pre_hook(self_attention_hook))
        elif isinstance(m, nn.MultiheadAttention):
            handles.append(m.register_forward_pre_hook(mha_hook))
    try:
        with torch.no_grad():
            out = model(image)
    finally:
        for h in handles:
            h.remove()
    return out, torch.stack([m[0] for m in mats])


def queries_for(prefix, gh, gw):
    q = [0] + ([1] if prefix > 1 else [])
    if prefix > 2:
        q.append(prefix - 1)
    q += [prefix, prefix + (gh // 2) * gw + gw // 2, prefix + gh * gw - 1]
    return q


def load_exporter():
    import importlib.util
    spec = importlib.util.spec_from_file_location("export_torchscript", os.path.abspath(EXPORTER))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_exporter(exporter, argv):
    err = io.StringIO()
    out = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = exporter.main(argv)
    return rc, out.getvalue(), err.getvalue()


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = argv[1]
    os.makedirs(out_dir, exist_ok=True)
    t0 = time.time()
    torch.set_num_threads(1)
    exporter = load_exporter()
    this = os.path.abspath(__file__)
    cases = []

    with tempfile.TemporaryDirectory() as tmp:
        # (case name, model factory, size, export arguments besides --factory/--out/--size)
        clip = make_clip_like()
        torch.save({"epoch": 3, "model": clip.state_dict()}, os.path.join(tmp, "clip.pth"))
        deit = make_mixer_deit()
        torch.save(deit, os.path.join(tmp, "deit.pt"))  # whole pickled module (classes of this __main__)
        with open(os.path.join(tmp, "classes.txt"), "w") as f:
            f.write("".join(f"class {i}\n" for i in range(7)))
        specs = [
            ("mixer_vit_reg2", make_mixer_vit(), (40, 32),
             ["--factory", f"{this}:make_mixer_vit", "--class-names", os.path.join(tmp, "classes.txt"),
              "--mean", "0.5", "0.5", "0.5", "--std", "0.5", "0.5", "0.5", "--name", "mixer ViT (2 registers)"]),
            ("clip_like_mha", clip, (32, 48),
             ["--factory", f"{this}:make_clip_like", "--weights", os.path.join(tmp, "clip.pth"), "--key", "model",
              "--output", "embedding", "--mean", "0.48145466", "0.4578275", "0.40821073",
              "--std", "0.26862954", "0.26130258", "0.27577711"]),
            ("mixer_deit_dist", deit, (32, 32),
             ["--pickled", os.path.join(tmp, "deit.pt"), "--patch", "8"]),
        ]
        for name, model, (H, W), extra in specs:
            pt = name + ".pt"
            size = ["--size", str(H), str(W)] if H != W else ["--size", str(H)]
            rc, _, err = run_exporter(exporter, extra + size + ["--out", os.path.join(out_dir, pt)])
            assert rc == 0, (name, err)
            model.eval()
            image = torch.randn(1, 3, H, W, generator=torch.Generator().manual_seed(7 + len(cases)))
            output, mats = reference(model, image)

            extra_files = {"attnscope.json": ""}
            loaded = torch.jit.load(os.path.join(out_dir, pt), _extra_files=extra_files)
            meta = json.loads(extra_files["attnscope.json"])
            layers = meta["layers"]
            L, h, T = mats.shape[0], mats.shape[1], mats.shape[-1]
            prefix, (gh, gw) = layers[0]["prefix_tokens"], layers[0]["grid"]
            assert meta["format"] == "attnscope-torchscript" and meta["version"] == 1, meta
            assert meta["input_size"] == [H, W] and meta["patch_size"] == 8, meta
            assert len(layers) == L and all(l["heads"] == h and l["prefix_tokens"] + gh * gw == T for l in layers), meta
            assert (gh, gw) == (H // 8, W // 8), meta
            # sanity of the fixture itself: the exported file agrees with the eager reference
            with torch.no_grad():
                got_out, got_attn = loaded(image)
            assert isinstance(got_attn, tuple) and len(got_attn) == L, name
            err_out = (got_out - output).abs().max().item()
            err_att = (torch.stack([a[0] for a in got_attn]).double() - mats).abs().max().item()
            assert err_out < 1e-4 and err_att < 1e-5, (name, err_out, err_att)
            assert output.max() - output.min() > 0.1, name
            assert mats.max() > 3.0 / T, (name, mats.max().item())  # not uniform

            q = queries_for(prefix, gh, gw)
            rows = mats[:, :, q, :]  # [L, h, Q, T]
            np.save(os.path.join(out_dir, name + ".input.npy"), image.numpy().astype(np.float32))
            np.save(os.path.join(out_dir, name + ".output.npy"), output.numpy().astype(np.float32))
            np.save(os.path.join(out_dir, name + ".rows.npy"), np.ascontiguousarray(rows.numpy().astype(np.float32)))
            cases.append({
                "name": name, "model": pt, "input": name + ".input.npy", "output": name + ".output.npy",
                "rows": name + ".rows.npy", "queries": q, "prefix_tokens": prefix, "grid": [gh, gw],
                "heads": h, "layers": L, "tokens": T, "size": [H, W], "prefix_names": layers[0]["prefix_names"],
                "kinds": [l["kind"] for l in layers], "output_kind": meta["output"], "patch_size": meta["patch_size"],
            })
            print(f"{name:18s} {meta['output']:9s} N={output.shape[1]:2d} L={L} h={h} T={T} "
                  f"prefix={layers[0]['prefix_names']} grid={gh}x{gw} traced-vs-eager {err_out:.1e}/{err_att:.1e}")

        # The exporter refuses attention it cannot capture, saying what a model must satisfy.
        for factory, expect in (("make_inline_attention", "unsupported attention module(s): attn (InlineAttention)"),
                                ("make_always_fused", "attn_drop saw 0 call(s)")):
            bad = os.path.join(tmp, factory + ".pt")
            rc, _, err = run_exporter(exporter, ["--factory", f"{this}:{factory}", "--size", "32", "--out", bad])
            assert rc == 1 and expect in err and "what a model must satisfy" in err, (factory, rc, err)
            assert not os.path.exists(bad), factory
            print(f"refused {factory[5:]:16s} {err.splitlines()[0][:90]}")

    # A TorchScript file without attnscope.json (attnscope must refuse it).
    plain = make_mixer_vit().eval()
    with torch.no_grad():
        traced = torch.jit.trace(plain, torch.randn(1, 3, 40, 32), check_trace=False)
    torch.jit.save(traced, os.path.join(out_dir, "no_metadata.pt"))

    return write_cases(out_dir, cases, t0, " + no_metadata.pt")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
