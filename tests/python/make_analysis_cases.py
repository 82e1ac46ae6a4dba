#!/usr/bin/python3
"""Reference values for attnscope's analyses: Grad-CAM, attention rollout, rank and spectrum, f_p.

Usage: /usr/bin/python3 tests/python/make_analysis_cases.py OUTDIR

Independent of the C++ code: the models run in reference_vit.py (written from
../shared/reference/attention-variants.md), in float64, and every analysis is written here from
its definition:
- Grad-CAM as jacobgil/pytorch-grad-cam does it for a ViT: a hook keeps the target layer's output
  (the reference's LayerNorm call is wrapped, as a forward hook would), every weight requires grad,
  logit[class].backward(), then reshape_transform (drop the prefix tokens, [C, gh, gw]), weights =
  mean of the gradient over the grid, cam = ReLU(sum_c w_c A_c), scale_cam_image ((cam - min) /
  (max + 1e-7)), and the resize to the input (bilinear, half-pixel centres, as cv2's INTER_LINEAR).
- Rollout as jacobgil/vit-explain: full T x T products, discard of the lowest entries except flat
  index 0, (A + I) / 2, rows renormalised (vit-explain's own division broadcasts over columns).
- Ranks with numpy.linalg.matrix_rank on the float32 matrix; singular values with numpy's SVD.
- f_p from the formula f_p(x) = ||x|| / ||x^p|| * x^p on ReLU'd features.

OUTDIR/cases.json holds {"models": {...}, "gradcam": [...], "rollout": [...], "spectrum": [...],
"focusing": {...}}; tensors are .npy files next to it (float32 unless noted).
"""

import json
import os
import sys

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import torch
import numpy as np
import torch.nn.functional as F

import reference_vit as ref
import safetensors_io
from fixture_tools import output_folder
from make_parity_cases import make_state  # random timm-layout weights

# name: (state kwargs, heads for --arch or None)
MODELS = {
    "gc_vit": (dict(seed=21, dim=64, depth=3, patch=16, grid=5, heads=2, qkv_std=1.5), 2),
    "gc_distilled": (dict(seed=22, dim=48, depth=2, patch=16, grid=4, heads=3, dist=True), 3),
    "gc_focused": (dict(seed=23, dim=64, depth=2, patch=16, grid=6, heads=2, attn="focused", dwc_k=5, pe=None), None),
}


def save(out_dir, name, array, dtype=np.float32):
    np.save(os.path.join(out_dir, name), np.ascontiguousarray(np.asarray(array, dtype=dtype)))
    return name


def write_models(out):
    """MODELS as float32 safetensors in `out`: ({name: {"file", "heads"}}, {name: float64 reference model})."""
    entries, models = {}, {}
    for name, (kw, heads) in MODELS.items():
        path = name + ".safetensors"
        safetensors_io.save_file(make_state(**kw), os.path.join(out, path), metadata={"format": "pt"},
                                 dtype=torch.float32)
        models[name] = ref.load_model(os.path.join(out, path), heads=heads, dtype=torch.float64)
        entries[name] = {"file": path, "heads": heads}
    return entries, models


def input_maker(out, gen):
    """input_for(model, (H, W)) -> (its .npy name in `out`, the float64 tensor): one random input per pair."""
    inputs = {}

    def input_for(model, size):
        key = (model, size)
        if key not in inputs:
            x = torch.randn(1, 3, size[0], size[1], generator=gen)
            file = save(out, f"input_{model}_{size[0]}x{size[1]}.npy", x)
            inputs[key] = (file, x.to(torch.float64))
        return inputs[key]

    return input_for


def settings(variant="softmax", p=3.0, dwc=True, anchors=0):
    return ref.Settings(variant=variant, p=p, window=0, anchors=anchors, dwc=dwc, norm="all")


# ------------------------------------------------------------------------------------------------
# Grad-CAM
# ------------------------------------------------------------------------------------------------
def layer_output_hook(model, block, point):
    """Wrap the reference's LayerNorm call so that the output of blocks[block].<point> is kept and its
    gradient retained: what register_forward_hook + tensor hooks do in pytorch-grad-cam."""
    target = model.blocks[block]["n1" if point == "norm1" else "n2"]
    kept = {}
    original = model._ln

    def hooked(x, wb):
        y = original(x, wb)
        if wb is target:
            if y.requires_grad:
                y.retain_grad()
            kept["activation"] = y
        return y

    model._ln = hooked
    return kept, lambda: setattr(model, "_ln", original)


def reference_grad_cam(model, img, s, block, point, target_class):
    for t in model.sd.values():
        if t.is_floating_point():
            t.requires_grad_(True)  # as a torch.nn.Module's parameters: the whole graph is recorded
    kept, release = layer_output_hook(model, block, point)
    try:
        logits = model.forward(img, s)
    finally:
        release()
    cls = int(logits[0].argmax()) if target_class < 0 else target_class
    logits[0, cls].backward()
    a, g = kept["activation"], kept["activation"].grad
    P = model.num_prefix
    _, _, H, W = img.shape
    gh, gw = H // model.patch[0], W // model.patch[1]
    reshape = lambda t: t[:, P:, :].reshape(1, gh, gw, t.shape[2]).permute(0, 3, 1, 2)  # [1, C, gh, gw]
    a, g = reshape(a.detach()), reshape(g)
    weights = g.mean(dim=(2, 3))
    cam = torch.relu((weights[:, :, None, None] * a).sum(dim=1))[0]
    scaled = cam - cam.min()
    scaled = scaled / (scaled.max() + 1e-7)
    upsampled = F.interpolate(scaled[None, None], size=(H, W), mode="bilinear", align_corners=False)[0, 0]
    for t in model.sd.values():
        t.requires_grad_(False)
        t.grad = None
    return cls, float(logits[0, cls]), cam, scaled, upsampled


# ------------------------------------------------------------------------------------------------
# Rollout
# ------------------------------------------------------------------------------------------------
def reference_rollout(matrices, fusion, discard_ratio, query):
    T = matrices[0].shape[-1]
    result = torch.eye(T, dtype=torch.float64)
    for attention in matrices:  # [1, h, T, T]
        fused = {"mean": lambda a: a.mean(dim=1), "max": lambda a: a.max(dim=1)[0],
                 "min": lambda a: a.min(dim=1)[0]}[fusion](attention)[0].clone()
        flat = fused.view(-1)
        _, indices = flat.topk(int(flat.numel() * discard_ratio), largest=False)
        indices = indices[indices != 0]
        flat[indices] = 0
        a = (fused + torch.eye(T, dtype=fused.dtype)) / 2
        a = a / a.sum(dim=-1, keepdim=True)
        result = a @ result
    return result[query]


# ------------------------------------------------------------------------------------------------
# f_p
# ------------------------------------------------------------------------------------------------
def f_p(x, p):
    x = torch.relu(x)
    xp = x ** p
    return x.norm(dim=-1, keepdim=True) / xp.norm(dim=-1, keepdim=True) * xp


def layer_qk(model, img, s, block):
    kept, release = layer_output_hook(model, block, "norm1")
    try:
        with torch.no_grad():
            model.forward(img, s)
    finally:
        release()
    q, k, _ = model.blocks[block]["attn"].qkv(kept["activation"])
    return q.detach(), k.detach()


def focus_study(q, k, head, p, ps, bins, top_k):
    """All-channel norms (the default): f_p over the concatenated heads of each token."""
    B, h, T, d = q.shape
    tokens = lambda t: t.transpose(1, 2).reshape(B, T, h * d)
    heads = lambda t: t.reshape(B, T, h, d).transpose(1, 2)
    qb, kb = torch.relu(q) + 1e-6, torch.relu(k) + 1e-6
    focus = lambda t, p: heads(f_p(tokens(t), p))[0, head]

    def histogram(qs, ks):
        cos = (qs / qs.norm(dim=-1, keepdim=True)) @ (ks / ks.norm(dim=-1, keepdim=True)).T
        idx = (cos.clamp(0, 1) * bins).long().clamp(max=bins - 1)
        return torch.bincount(idx.reshape(-1), minlength=bins)

    before_q, before_k = qb[0, head], kb[0, head]
    after_q, after_k = focus(qb, p), focus(kb, p)
    vb, va = torch.cat([before_q, before_k]), torch.cat([after_q, after_k])
    axis = vb.argmax(dim=-1)
    counts = torch.bincount(axis, minlength=d)
    axis_cos = lambda v: torch.zeros(d, dtype=v.dtype).index_add_(0, axis, v.max(dim=-1)[0] / v.norm(dim=-1)) / counts.clamp(min=1)
    entropy, top = [], []
    for pp in ps:
        scores = focus(qb, pp) @ focus(kb, pp).T
        rows = scores / scores.sum(dim=-1, keepdim=True)
        entropy.append(float((-(rows * rows.log()).sum(dim=-1)).mean()))
        top.append(float(rows.topk(top_k, dim=-1)[0].sum(dim=-1).mean()))
    return {"histogram_before": histogram(before_q, before_k), "histogram_after": histogram(after_q, after_k),
            "axis_counts": counts, "axis_cos_before": axis_cos(vb), "axis_cos_after": axis_cos(va),
            "entropy": entropy, "top_k_mass": top}


def main(argv):
    out = output_folder(argv, __doc__.strip().splitlines()[2])
    if out is None:
        return 2
    gen = torch.Generator().manual_seed(5)
    cases = {"gradcam": [], "rollout": [], "spectrum": [], "focusing": {}}
    cases["models"], models = write_models(out)
    input_for = input_maker(out, gen)

    # ---- Grad-CAM: (model, input size, variant, block, point, class)
    for i, (model_name, size, variant, block, point, target) in enumerate([
        ("gc_vit", (64, 96), "softmax", 2, "norm1", -1),  # default layer, non-square grid 4 x 6
        ("gc_vit", (64, 96), "softmax", 1, "norm1", 3),
        ("gc_vit", (80, 80), "softmax", 2, "norm2", 7),  # after the last attention: zero patch gradients
        ("gc_vit", (80, 80), "linear", 1, "norm2", -1),
        ("gc_distilled", (64, 64), "softmax", 1, "norm1", -1),  # two prefix tokens
        ("gc_focused", (96, 96), "focused", 1, "norm1", 2),
    ]):
        model = models[model_name]
        file, img = input_for(model_name, size)
        cls, logit, cam, scaled, up = reference_grad_cam(model, img, settings(variant), block, point, target)
        tag = f"gradcam{i}"
        cases["gradcam"].append({
            "model": model_name, "input": file, "variant": variant, "layer": f"blocks.{block}.{point}",
            "class": target, "expected_class": cls, "logit": logit,
            "cam": save(out, tag + ".cam.npy", cam.detach()), "scaled": save(out, tag + ".scaled.npy", scaled.detach()),
            "upsampled": save(out, tag + ".upsampled.npy", up.detach()),
            "zero_gradient": bool(cam.abs().max() == 0 and scaled.abs().max() == 0)})

    # ---- Rollout
    for i, (model_name, size, variant, fusion, discard) in enumerate([
        ("gc_vit", (64, 96), "softmax", "mean", 0.0),
        ("gc_vit", (64, 96), "softmax", "max", 0.5),
        ("gc_vit", (80, 80), "softmax", "min", 0.9),
        ("gc_distilled", (64, 64), "linear", "mean", 0.3),
        ("gc_focused", (96, 96), "focused", "mean", 0.2),
    ]):
        model = models[model_name]
        file, img = input_for(model_name, size)
        with torch.no_grad():
            _, mats = model.forward(img, settings(variant), record=True)
        row = reference_rollout(mats, fusion, discard, 0)
        cases["rollout"].append({"model": model_name, "input": file, "variant": variant, "fusion": fusion,
                                 "discard": discard, "row": save(out, f"rollout{i}.row.npy", row)})

    # ---- Spectrum: numpy rank and singular values of every layer's and head's matrix
    for i, (model_name, size, variant, dwc) in enumerate([
        ("gc_vit", (160, 160), "linear", True),  # T = 101 tokens > d = 32
        ("gc_vit", (128, 160), "softmax", True),
        ("gc_vit", (160, 160), "enhanced", True),
        ("gc_focused", (96, 96), "focused", True),   # DWC band on: full rank
        ("gc_focused", (96, 96), "focused", False),  # without it: at most d
    ]):
        model = models[model_name]
        file, img = input_for(model_name, size)
        with torch.no_grad():
            _, mats = model.forward(img, settings(variant, dwc=dwc), record=True, with_dwc_band=True)
        ranks, values = [], []
        for layer, m in enumerate(mats):
            for head in range(m.shape[1]):
                matrix = m[0, head].numpy()
                ranks.append(int(np.linalg.matrix_rank(matrix.astype(np.float32))))
                values.append(np.linalg.svd(matrix, compute_uv=False))
        cases["spectrum"].append({"model": model_name, "input": file, "variant": variant, "dwc": dwc,
                                  "heads": int(mats[0].shape[1]), "head_dim": model.blocks[0]["attn"].head_dim,
                                  "ranks": ranks, "singular_values": save(out, f"spectrum{i}.values.npy", np.stack(values))})

    # ---- f_p
    vectors = torch.rand(12, 5, generator=gen, dtype=torch.float64) - 0.2
    focusing = {"vectors": save(out, "fp_vectors.npy", vectors, np.float64), "ps": [1.0, 2.0, 3.0, 5.0, 8.0]}
    focusing["focused"] = save(out, "fp_focused.npy", torch.stack([f_p(vectors, p) for p in focusing["ps"]]), np.float64)
    query = torch.tensor([0.45, 0.02, 0.97], dtype=torch.float64)
    keys = torch.tensor([[0.15, 0.79, 0.94], [0.35, 0.63, 0.36], [1.00, 0.51, 0.25], [0.37, 0.78, 0.32]],
                        dtype=torch.float64)
    before = keys @ query
    after = f_p(keys, 3.0) @ f_p(query[None], 3.0)[0]
    focusing["example_before"] = (before / before.sum()).tolist()
    focusing["example_after"] = (after / after.sum()).tolist()
    file, img = input_for("gc_vit", (80, 80))
    q, k = layer_qk(models["gc_vit"], img, settings("softmax"), 1)
    ps = [float(p) for p in range(1, 11)]
    study = focus_study(q, k, head=1, p=3.0, ps=ps, bins=50, top_k=10)
    focusing["study"] = {"model": "gc_vit", "input": file, "layer": 1, "head": 1, "p": 3.0, "bins": 50, "top_k": 10,
                         "ps": ps, "entropy": study["entropy"], "top_k_mass": study["top_k_mass"],
                         "histogram_before": study["histogram_before"].tolist(),
                         "histogram_after": study["histogram_after"].tolist(),
                         "axis_counts": study["axis_counts"].tolist(),
                         "axis_cos_before": study["axis_cos_before"].tolist(),
                         "axis_cos_after": study["axis_cos_after"].tolist()}
    cases["focusing"] = focusing

    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
