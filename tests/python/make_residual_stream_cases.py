#!/usr/bin/python3
"""Generate the residual-stream cases (issue 35): small random ViTs in the layouts attnscope reads, inputs,
and what ViT-Prisma's folded HookedViT and TransformerLens's patching give on them (reference_residual_stream.py,
float64): direct logit attribution, the patch logit lens, zero and mean head ablation, activation patching.

Usage: /usr/bin/python3 tests/python/make_residual_stream_cases.py OUTDIR

Independent of the C++ sources. Models (random weights from make_parity_cases.make_state, timm layout unless said):
  plain      ViT, class token, 3 blocks, 4 heads
  distilled  DeiT with dist_token and head_dist
  dinov2     DINOv2 hub layout: class token with a position, 2 register tokens without, LayerScale, no head
             (the output is the normed class token): read out along the output's own direction (its norm)
  clip       OpenAI CLIP visual layout (conv1 without bias, ln_pre, ln_post, proj, QuickGELU, eps 1e-5):
             read out along a random direction of the embedding space (a prompt's embedding)
  focused    FLatten focused attention with its 3x3 DWC on V, run as trained (p = 3, DWC on)
  gap        global average pooling with fc_norm and no final norm

OUTDIR/cases.json: a list of {name, model, heads, variant {kernel, p, window, dwc}, tokens, prefix, target,
baseline, files...}; target/baseline: {"kind": "class", "class": C} | {"kind": "direction", "direction": FILE}
| {"kind": "norm", "direction": FILE: the output's unit vector DLA reads the norm along} (baseline null: ld is the
target alone). Arrays (float32 .npy):
  input, corrupt [1,3,H,W]; mean_images [n,3,H,W]
  output [1,K]: the model's output on input
  dla_heads, dla_head_scales [L,h]; dla_attn_bias [L]; dla (labels, values, scales in the json): DLA of
    `target` on input; each value's scale is what a float32 error of its input (the component, or the head's
    z), relative to that input's largest entry, is multiplied by: over the read-out's tokens, the token's
    weight (pooling share / final scale) times max|input| times |direction|_1 (a head: |W_O_h direction|_1)
  lens, lens_scales [L+1,T,K]
  ablate_heads [[l,h],...]; zero_output [1,K], zero_rows [L,h,Q,T] at `queries`; means [n,T,d]; mean_output,
    mean_rows
  patch_heads [L,h], patch_resid [L,T], ld_clean, ld_corrupt (json)
"""

import json
import os
import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch

import reference_residual_stream as ref
import reference_vit
import safetensors_io
from fixture_tools import Init, output_folder, write_cases
from make_parity_cases import make_state


def timm_file(sd):
    return dict(sd)


def dinov2_file(sd):
    """DINOv2 hub keys: register_tokens for reg_token, a mask_token, pos_embed over the class token and patches."""
    out = {k: v for k, v in sd.items() if k != "reg_token"}
    out["register_tokens"] = sd["reg_token"]
    out["mask_token"] = torch.zeros(1, sd["cls_token"].shape[-1])
    return out


def clip_file(sd, depth):
    """OpenAI CLIP's visual tower keys (model.py VisionTransformer)."""
    out = {
        "conv1.weight": sd["patch_embed.proj.weight"],
        "class_embedding": sd["cls_token"].reshape(-1),
        "positional_embedding": sd["pos_embed"][0],
        "ln_pre.weight": sd["norm_pre.weight"], "ln_pre.bias": sd["norm_pre.bias"],
        "ln_post.weight": sd["norm.weight"], "ln_post.bias": sd["norm.bias"],
        "proj": sd["head.weight"].T.contiguous(),
    }
    names = {"norm1": "ln_1", "attn.qkv.weight": "attn.in_proj_weight", "attn.qkv.bias": "attn.in_proj_bias",
             "attn.proj": "attn.out_proj", "norm2": "ln_2", "mlp.fc1": "mlp.c_fc", "mlp.fc2": "mlp.c_proj"}
    for i in range(depth):
        for key, value in sd.items():
            prefix = f"blocks.{i}."
            if not key.startswith(prefix):
                continue
            rest = key[len(prefix):]
            for old, new in names.items():
                if rest.startswith(old):
                    rest = new + rest[len(old):]
                    break
            out[f"transformer.resblocks.{i}.{rest}"] = value
    return out


def build_models():
    """name -> (timm-layout state, file writer, heads, eps, activation, pos_prefix, settings dict, target kind)."""
    models = {}
    sd = make_state(seed=21, dim=64, depth=3, patch=16, grid=4, heads=4, qkv_std=1.5)
    models["plain"] = (sd, timm_file, 4, 1e-6, "gelu", None, None, "class")
    sd = make_state(seed=22, dim=48, depth=2, patch=16, grid=4, heads=3, dist=True, qkv_std=1.5)
    models["distilled"] = (sd, timm_file, 3, 1e-6, "gelu", None, None, "class")
    sd = make_state(seed=23, dim=64, depth=2, patch=16, grid=4, heads=2, reg=2, layerscale=True, qkv_std=1.5)
    sd["pos_embed"] = torch.cat([sd["pos_embed"][:, :1], sd["pos_embed"][:, 3:]], dim=1)  # class token + patches
    for k in ("head.weight", "head.bias"):
        del sd[k]
    models["dinov2"] = (sd, dinov2_file, 2, 1e-6, "gelu", 1, None, "norm")
    sd = make_state(seed=24, dim=128, depth=2, patch=16, grid=4, heads=2, qkv_std=1.5)
    r = Init(124)
    sd["norm_pre.weight"], sd["norm_pre.bias"] = r.normal([128], 0.1, 1.0), r.normal([128], 0.05)
    sd["head.weight"] = r.normal([24, 128], 1.0 / 128 ** 0.5)
    for k in ("head.bias", "patch_embed.proj.bias"):
        del sd[k]
    models["clip"] = (sd, lambda s: clip_file(s, 2), 2, 1e-5, "quick_gelu", None, None, "direction")
    sd = make_state(seed=25, dim=64, depth=2, patch=16, grid=4, heads=2, attn="focused", dwc_k=3)
    models["focused"] = (sd, timm_file, 2, 1e-6, "gelu", None,
                         dict(variant="focused", p=3.0, window=0, anchors=0, dwc=True, norm="all"), "class")
    sd = make_state(seed=26, dim=64, depth=2, patch=16, grid=4, heads=4, cls=False, pos_prefix=False, norm=False,
                    fc_norm=True, qkv_std=1.5)
    models["gap"] = (sd, timm_file, 4, 1e-6, "gelu", None, None, "class")
    return models


ABLATED = {"plain": [[0, 1], [2, 3]], "distilled": [[1, 0]], "dinov2": [[0, 1]], "clip": [[1, 1]],
           "focused": [[0, 0], [1, 1]], "gap": [[1, 2]]}


def save(out_dir, name, array):
    np.save(os.path.join(out_dir, name), np.ascontiguousarray(np.asarray(array, dtype=np.float32)))
    return name


def main(argv):
    out_dir = output_folder(argv, __doc__.strip().splitlines()[4])
    if out_dir is None:
        return 2
    t0 = time.time()
    cases = []
    for ci, (name, (sd, to_file, heads, eps, activation, pos_prefix, settings, target_kind)) in enumerate(
            build_models().items()):
        model_file = name + ".safetensors"
        safetensors_io.save_file(to_file(sd), os.path.join(out_dir, model_file),
                                 metadata={"format": "pt", "num_heads": str(heads)})
        variant = None if settings is None else reference_vit.Settings.from_dict(settings)
        model = ref.FoldedViT(sd, heads, eps, activation, pos_prefix, variant)
        g = torch.Generator().manual_seed(3500 + ci)
        H = W = 64
        image, corrupt = torch.randn(1, 3, H, W, generator=g), torch.randn(1, 3, H, W, generator=g)
        mean_images = torch.randn(3, 3, H, W, generator=g)
        output, cache = model.run(image)
        corrupt_output, _ = model.run(corrupt)
        if to_file is timm_file:
            # The folded model computes the model: reference_vit.py's unfolded forward on the same weights.
            unfolded = reference_vit.ViTReference(sd, heads=heads, dtype=torch.float64)
            direct = unfolded.forward(image.to(torch.float64), variant or reference_vit.Settings())
            assert torch.allclose(direct, output, rtol=0, atol=1e-10), (name, (direct - output).abs().max())
        K = output.shape[1]
        # The read-out target and the patching baseline.
        if target_kind == "class":
            C = int(output[0].argmax())
            C2 = int(corrupt_output[0].argmax())
            if C2 == C:
                C2 = int(corrupt_output[0].argsort(descending=True)[1])
            target, baseline = ("class", C), ("class", C2)
            target_json = {"kind": "class", "class": C}
            baseline_json = {"kind": "class", "class": C2}
            t = torch.zeros(K, dtype=torch.float64)
            t[C] = 1.0
        elif target_kind == "direction":
            d = Init(4000 + ci).normal([K], 1.0).to(torch.float64)
            target, baseline = ("direction", d), None
            target_json = {"kind": "direction", "direction": save(out_dir, name + ".direction.npy", d.numpy())}
            baseline_json = None
            t = d
        else:
            target, baseline = ("norm",), None
            t = (output[0] / output[0].norm()).to(torch.float32).to(torch.float64)  # as stored: both sides read one t
            # The direction DLA reads the norm along: the output's own unit vector (the C++ side derives it from its
            # float32 output; the file lets it compare the attribution along the very same direction).
            target_json = {"kind": "norm", "direction": save(out_dir, name + ".direction.npy", t.numpy())}
            baseline_json = None

        dla = model.direct_logit_attribution(cache, t)
        readout = float(output[0] @ t)  # the target read off the output (the norm: along its stored unit vector)
        residual = readout - sum(dla["values"])
        assert abs(residual) < 1e-9 * (1 + abs(readout)), (name, residual)  # the decomposition is exact in float64
        lens, lens_scales = model.logit_lens(cache)
        # The lens's last layer at the read-out tokens is the output without bias (a check of the reference).
        if not model.pooled:
            bias = model.state["head.b_H"] if not model.distilled else (model.state["head.b_H"] + model.state["head_dist.b_H"]) / 2
            if not model.distilled:
                assert torch.allclose(lens[-1, 0] + bias, output[0], atol=1e-9), name

        ablated = ABLATED[name]
        P = model.P
        T = cache[("resid_pre", 0)].shape[1]
        queries = [0, P + (T - P) // 2, T - 1]
        zero_output, zero_cache = model.run(image, ref.ablation_hooks(ablated, [None] * len(ablated)))
        means = ref.mean_head_outputs(model, mean_images, ablated)
        mean_output, mean_cache = model.run(image, ref.ablation_hooks(ablated, list(means)))
        rows = lambda c: torch.stack([c[("pattern", l)][0][:, queries] for l in range(model.depth)])
        patching = ref.activation_patching(model, image, corrupt, target, baseline)

        prefix = name + "."
        entry = {
            "name": name, "model": model_file, "heads": heads, "tokens": T, "prefix": P, "output_dim": K,
            "variant": {"kernel": settings["variant"] if settings else "native", "p": 3.0, "window": None,
                        "dwc": bool(settings and settings["dwc"])},
            "target": target_json, "baseline": baseline_json,
            "input": save(out_dir, prefix + "input.npy", image.numpy()),
            "corrupt": save(out_dir, prefix + "corrupt.npy", corrupt.numpy()),
            "mean_images": save(out_dir, prefix + "mean_images.npy", mean_images.numpy()),
            "output": save(out_dir, prefix + "output.npy", output.numpy()),
            "readout": readout,
            "dla_labels": dla["labels"], "dla_values": dla["values"], "dla_scales": dla["scales"],
            "dla_heads": save(out_dir, prefix + "dla_heads.npy", dla["heads"].numpy()),
            "dla_head_scales": save(out_dir, prefix + "dla_head_scales.npy", dla["head_scales"].numpy()),
            "dla_attn_bias": save(out_dir, prefix + "dla_attn_bias.npy", dla["attn_bias"].numpy()),
            "lens": save(out_dir, prefix + "lens.npy", lens.numpy()),
            "lens_scales": save(out_dir, prefix + "lens_scales.npy", lens_scales.numpy()),
            "ablate_heads": ablated, "queries": queries,
            "zero_output": save(out_dir, prefix + "zero_output.npy", zero_output.numpy()),
            "zero_rows": save(out_dir, prefix + "zero_rows.npy", rows(zero_cache).numpy()),
            "means": save(out_dir, prefix + "means.npy", means.numpy()),
            "mean_output": save(out_dir, prefix + "mean_output.npy", mean_output.numpy()),
            "mean_rows": save(out_dir, prefix + "mean_rows.npy", rows(mean_cache).numpy()),
            "patch_heads": save(out_dir, prefix + "patch_heads.npy", patching["heads"].numpy()),
            "patch_resid": save(out_dir, prefix + "patch_resid.npy", patching["resid"].numpy()),
            "ld_clean": patching["ld_clean"], "ld_corrupt": patching["ld_corrupt"],
        }
        cases.append(entry)
        print(f"{name:10s} T={T:3d} K={K:3d} read-out {readout:+.4f} ld {patching['ld_clean']:+.3f} / "
              f"{patching['ld_corrupt']:+.3f} zero-ablation change {float((zero_output - output).abs().max()):.3f}")
    return write_cases(out_dir, cases, t0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
