#!/usr/bin/python3
"""Reference values for attnscope's attribution methods: the CAM family, attention relevance,
gradient rollout, integrated gradients and deletion / insertion curves.

Usage: /usr/bin/python3 tests/python/make_attribution_cases.py OUTDIR

Independent of the C++ code: the models run in reference_vit.py (float64), and every method is
written here from its published code (read with the project's search tools; the packages are not
installed on this machine):
- jacobgil/pytorch-grad-cam (base_cam.py, grad_cam*.py, xgrad_cam.py, layer_cam.py, hirescam.py,
  eigen_cam.py, utils/svd_on_activations.py, score_cam.py, utils/image.py): activations and gradients
  of the target layer go through the ViT reshape_transform (prefix tokens dropped, [1, C, gh, gw]),
  are float32 numpy arrays, get_cam_weights / get_cam_image per method, np.maximum(cam, 0),
  scale_cam_image ((x - min) / (max + 1e-7)), cv2.resize to the input (bilinear, half-pixel centres,
  which F.interpolate(align_corners=False) equals when enlarging), scaled once more by
  aggregate_multi_layers. EigenCAM: numpy's SVD of the centred float32 activations, VT[0] as LAPACK
  signs it. Score-CAM: nn.UpsamplingBilinear2d (align_corners=True), per-channel min-max with
  1e-8, input * mask in batches of 16, ClassifierOutputTarget's logit, softmax over channels.
- Chefer et al.'s relevance as Transformer-MM-Explainability's ViT notebook (generate_relevance):
  R = I; R += mean_heads((grad * attn).clamp(min=0)) @ R per block; the class token's row.
- Gradient rollout as jacobgil/vit-explain's vit_grad_rollout.py, with this project's two
  documented departures: each layer's attention is paired with its own gradient (vit-explain's
  backward hooks append gradients last layer first, so its zip pairs layer i with layer L-1-i),
  and rows are renormalised with keepdim (as attnscope's rollout); the discard keeps entry (0, 0).
- Attention probabilities as part of the graph: each layer's output is A @ v with A the (equivalent)
  matrix, FLatten's DWC term added outside it, so dScore/dA is defined for every variant.
- Integrated gradients by Captum's riemann_trapezoid rule from a zero baseline.
- Deletion / insertion: cells in the order of a given map (stable, largest first), replaced by the
  Gaussian-blurred image (sigma = the patch size, radius ceil(3 sigma), reflect padding), softmax
  probability of the class after each of `steps` steps, trapezoid AUC.

OUTDIR/cases.json holds {"models": {...}, "cam": [...], "relevance": [...], "ig": [...],
"faithfulness": [...]}; tensors are .npy files next to it.
"""

import dataclasses
import json
import math
import os
import sys

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import torch
import numpy as np
import torch.nn.functional as F

import reference_vit as ref
from fixture_tools import output_folder
# The DeiT-shaped models Grad-CAM is tested on, and how their files and inputs are written.
from make_analysis_cases import input_maker, save, settings, write_models

# ------------------------------------------------------------------------------------------------
# pytorch-grad-cam, on numpy float32 arrays [1, C, gh, gw]
# ------------------------------------------------------------------------------------------------
def reshape_transform(tokens, num_prefix, gh, gw):
    """The ViT tutorial's reshape: tokens [1, T, C] -> [1, C, gh, gw] without the prefix tokens."""
    return tokens[:, num_prefix:, :].reshape(1, gh, gw, tokens.shape[2]).permute(0, 3, 1, 2)


def scale_cam_image(cam, target_size=None):
    result = []
    for img in cam:
        img = img - np.min(img)
        img = img / (1e-7 + np.max(img))
        if target_size is not None:  # cv2.resize(img, (W, H)), INTER_LINEAR, when enlarging
            t = torch.from_numpy(np.float32(img))[None, None]
            img = F.interpolate(t, size=(target_size[1], target_size[0]), mode="bilinear",
                                align_corners=False)[0, 0].numpy()
        result.append(img)
    return np.float32(result)


def get_2d_projection(activation_batch):
    activation_batch[np.isnan(activation_batch)] = 0
    projections = []
    for activations in activation_batch:
        reshaped = activations.reshape(activations.shape[0], -1).transpose()
        reshaped = reshaped - reshaped.mean(axis=0)
        _, _, vt = np.linalg.svd(reshaped, full_matrices=True)
        projections.append((reshaped @ vt[0, :]).reshape(activations.shape[1:]))
    return np.float32(projections)


def cam_weights(method, a, g):
    if method == "gradcam":
        return np.mean(g, axis=(2, 3))
    if method == "gradcam++":
        g2 = g ** 2
        g3 = g2 * g
        sum_a = np.sum(a, axis=(2, 3))
        aij = g2 / (2 * g2 + sum_a[:, :, None, None] * g3 + 0.000001)
        aij = np.where(g != 0, aij, 0)
        return np.sum(np.maximum(g, 0) * aij, axis=(2, 3))
    if method == "xgradcam":
        sum_a = np.sum(a, axis=(2, 3))
        return (g * a / (sum_a[:, :, None, None] + 1e-7)).sum(axis=(2, 3))
    raise ValueError(method)


def cam_image(method, a, g, score_weights=None):
    if method in ("gradcam", "gradcam++", "xgradcam"):
        return (cam_weights(method, a, g)[:, :, None, None] * a).sum(axis=1)
    if method == "layercam":
        return (np.maximum(g, 0) * a).sum(axis=1)
    if method == "hirescam":
        return (g * a).sum(axis=1)
    if method == "eigencam":
        return get_2d_projection(a)
    if method == "scorecam":
        return (score_weights[:, :, None, None] * a).sum(axis=1)
    raise ValueError(method)


class HookedLayerNorm:
    """Keeps the output of one LayerNorm call of the reference (blocks[b].norm1/norm2 or the final
    norm) and retains its gradient: what register_forward_hook plus a tensor hook do."""

    def __init__(self, model, point):
        if point == "norm":
            self.target = model.norm
        else:
            block, name = point.split(".")[1], point.split(".")[2]
            self.target = model.blocks[int(block)]["n1" if name == "norm1" else "n2"]
        self.model, self.kept, self.original = model, None, model._ln

    def __enter__(self):
        def hooked(x, wb):
            y = self.original(x, wb)
            if wb is self.target:
                if y.requires_grad:
                    y.retain_grad()
                self.kept = y
            return y

        self.model._ln = hooked
        return self

    def __exit__(self, *exc):
        self.model._ln = self.original


def requires_grad(model, on):
    for t in model.sd.values():
        if t.is_floating_point():
            t.requires_grad_(on)
            t.grad = None


def reference_cam(model, img, s, method, layer, target_class):
    """pytorch-grad-cam's BaseCAM.forward for one target layer and one image."""
    P = model.num_prefix
    _, _, H, W = img.shape
    gh, gw = H // model.patch[0], W // model.patch[1]
    requires_grad(model, True)
    with HookedLayerNorm(model, layer) as hook:
        logits = model.forward(img, s)
    cls = int(logits[0].argmax()) if target_class < 0 else target_class
    uses_gradients = method not in ("eigencam", "scorecam")
    if uses_gradients:
        logits[0, cls].backward()
    a = np.float32(reshape_transform(hook.kept.detach(), P, gh, gw).numpy())
    g = np.float32(reshape_transform(hook.kept.grad, P, gh, gw).numpy()) if uses_gradients else None
    requires_grad(model, False)
    score_weights = None
    if method == "scorecam":
        with torch.no_grad():
            upsampled = torch.nn.UpsamplingBilinear2d(size=(H, W))(torch.from_numpy(a))
            maxs = upsampled.view(1, upsampled.size(1), -1).max(dim=-1)[0][:, :, None, None]
            mins = upsampled.view(1, upsampled.size(1), -1).min(dim=-1)[0][:, :, None, None]
            upsampled = (upsampled - mins) / (maxs - mins + 1e-8)
            inputs = img[:, None, :, :] * upsampled[:, :, None, :, :].to(img.dtype)
            scores = []
            for tensor in inputs:
                for i in range(0, tensor.size(0), 16):
                    scores.extend(float(o[cls]) for o in model.forward(tensor[i:i + 16], s))
            scores = torch.Tensor(scores).view(1, a.shape[1])
            score_weights = torch.nn.Softmax(dim=-1)(scores).numpy()
    cam = cam_image(method, a, g, score_weights)  # [1, gh, gw]
    scaled = scale_cam_image(np.maximum(cam, 0))
    image = scale_cam_image(np.mean(np.maximum(scale_cam_image(np.maximum(cam, 0), (W, H))[:, None], 0), axis=1))
    return cls, float(logits[0, cls]), cam[0], scaled[0], image[0], a[0], g


# ------------------------------------------------------------------------------------------------
# Attention probabilities inside the graph
# ------------------------------------------------------------------------------------------------
def attention_as_matrix(attn, x, ctx, kept):
    """One attention layer computed as out = A @ v (+ FLatten's DWC term), A kept with its gradient."""
    s = ctx.settings
    q, k, v = attn.qkv(x)
    fn = {"softmax": attn._softmax, "window": attn._softmax, "linear": attn._linear, "focused": attn._focused,
          "enhanced": attn._enhanced, "anchor": attn._anchor}[s.variant]
    without_dwc, mat = fn(q, k, v, _Ctx(dataclasses.replace(s, dwc=False), ctx.gh, ctx.gw, ctx.num_prefix), True)
    mat.retain_grad()
    kept.append(mat)
    out = mat @ v
    if s.variant == "focused" and s.dwc:  # the DWC term: what the module adds on top of its matrix
        out = out + (fn(q, k, v, ctx, False)[0] - without_dwc)
    return F.linear(attn._tokens(out), attn.proj_w, attn.proj_b)


class _Ctx:
    """What reference_vit's attention functions read (global attention: no window mask)."""

    def __init__(self, s, gh, gw, num_prefix):
        self.settings, self.gh, self.gw, self.num_prefix, self.mask = s, gh, gw, num_prefix, None


def forward_keeping_attention(model, img, s):
    """ViTReference.forward with every attention as A @ v; returns (logits, [A per layer])."""
    x, gh, gw = model.embed(img)
    ctx = _Ctx(s, gh, gw, model.num_prefix)
    kept = []
    for b in model.blocks:
        a = attention_as_matrix(b["attn"], model._ln(x, b["n1"]), ctx, kept)
        x = model.after_attention(x, b, a, gh, gw)
    return model.pool_and_head(x), kept


def attention_gradients(model, img, s, target_class):
    requires_grad(model, True)
    logits, attentions = forward_keeping_attention(model, img, s)
    with torch.no_grad():
        assert torch.allclose(logits, model.forward(img, s), atol=1e-9), "A @ v forward differs from the model"
    cls = int(logits[0].argmax()) if target_class < 0 else target_class
    logits[0, cls].backward()
    grads = [a.grad.detach() for a in attentions]
    requires_grad(model, False)
    return cls, float(logits[0, cls]), [a.detach() for a in attentions], grads


def chefer_relevance(attentions, grads, num_prefix):
    T = attentions[0].shape[-1]
    R = torch.eye(T, dtype=attentions[0].dtype)
    for cam, grad in zip(attentions, grads):
        cam = (grad[0] * cam[0]).clamp(min=0).mean(dim=0)
        R = R + cam @ R
    row = R[0]
    patches = row[num_prefix:]
    return row, (patches - patches.min()) / (patches.max() - patches.min())


def gradient_rollout(attentions, grads, num_prefix, discard_ratio):
    T = attentions[0].shape[-1]
    result = torch.eye(T, dtype=attentions[0].dtype)
    for attention, grad in zip(attentions, grads):  # each layer with its own gradient
        fused = (attention * grad).mean(axis=1)[0]
        fused[fused < 0] = 0
        flat = fused.view(-1)
        _, indices = flat.topk(int(flat.numel() * discard_ratio), largest=False)
        flat[indices[indices != 0]] = 0
        a = (fused + torch.eye(T, dtype=fused.dtype)) / 2
        a = a / a.sum(dim=-1, keepdim=True)
        result = a @ result
    row = result[0]
    return row, row[num_prefix:] / row[num_prefix:].max()


# ------------------------------------------------------------------------------------------------
# Integrated gradients and faithfulness
# ------------------------------------------------------------------------------------------------
def integrated_gradients(model, img, s, target_class, steps, baseline):
    alphas = torch.linspace(0, 1, steps, dtype=img.dtype)
    weights = torch.full((steps,), 1.0 / (steps - 1), dtype=img.dtype)
    weights[0] = weights[-1] = 0.5 / (steps - 1)
    with torch.no_grad():
        logits = model.forward(img, s)
    cls = int(logits[0].argmax()) if target_class < 0 else target_class
    total = torch.zeros_like(img)
    for alpha, weight in zip(alphas, weights):
        point = (baseline + alpha * (img - baseline)).detach().requires_grad_(True)
        model.forward(point, s)[0, cls].backward()
        total += weight * point.grad
    attributions = ((img - baseline) * total)[0]
    with torch.no_grad():
        gap = float(attributions.sum() - (model.forward(img, s)[0, cls] - model.forward(baseline, s)[0, cls]))
    pixels = attributions.abs().sum(dim=0)
    ph, pw = model.patch
    H, W = pixels.shape
    patches = pixels.reshape(H // ph, ph, W // pw, pw).sum(dim=(1, 3))
    scaled = patches - patches.min()
    return cls, attributions, pixels, patches, scaled / (scaled.max() + 1e-7), gap


def gaussian_blur(img, sigma):
    def along(x, side, rows):
        radius = min(int(math.ceil(3 * sigma)), side - 1)
        offsets = torch.arange(-radius, radius + 1, dtype=torch.float64)
        kernel = torch.exp(-offsets ** 2 / (2 * sigma * sigma))
        kernel = (kernel / kernel.sum()).to(x.dtype)
        C = x.shape[1]
        w = kernel.view(1, 1, -1, 1) if rows else kernel.view(1, 1, 1, -1)
        pad = (0, 0, radius, radius) if rows else (radius, radius, 0, 0)
        return F.conv2d(F.pad(x, pad, mode="reflect"), w.expand(C, 1, *w.shape[2:]), groups=C)

    return along(along(img, img.shape[2], True), img.shape[3], False)


def deletion_insertion(model, img, s, cell_map, target_class, steps, sigma):
    gh, gw = cell_map.shape
    _, _, H, W = img.shape
    order = np.argsort(-cell_map.reshape(-1), kind="stable")
    rank = np.empty(gh * gw, dtype=np.int64)
    rank[order] = np.arange(gh * gw)
    rows = np.arange(H) * gh // H  # the grids here tile the image exactly
    cols = np.arange(W) * gw // W
    pixel_rank = torch.from_numpy(rank[rows[:, None] * gw + cols[None, :]])
    blurred = gaussian_blur(img, sigma)
    n = gh * gw
    steps = min(steps, n)
    counts = [int(math.floor(i * n / steps + 0.5)) for i in range(steps + 1)]
    fraction = [c / n for c in counts]
    curves = {}
    with torch.no_grad():
        for kind in ("deletion", "insertion"):
            probs = []
            for c in counts:
                removed = pixel_rank < c
                if kind == "insertion":
                    removed = ~removed
                image = torch.where(removed[None, None], blurred, img)
                probs.append(float(model.forward(image, s).softmax(dim=-1)[0, target_class]))
            auc = sum((fraction[i] - fraction[i - 1]) * (probs[i] + probs[i - 1]) / 2 for i in range(1, len(probs)))
            curves[kind] = {"probability": probs, "auc": auc}
    return fraction, curves


def main(argv):
    out = output_folder(argv, __doc__.strip().splitlines()[2])
    if out is None:
        return 2
    gen = torch.Generator().manual_seed(7)
    cases = {"cam": [], "relevance": [], "ig": [], "faithfulness": []}
    cases["models"], models = write_models(out)
    input_for = input_maker(out, gen)

    # ---- CAM family: every method on (model, input size, variant, layer, class)
    methods = ["gradcam", "gradcam++", "xgradcam", "layercam", "eigencam", "hirescam", "scorecam"]
    setups = [
        ("gc_vit", (64, 96), "softmax", "blocks.2.norm1", -1),  # the default layer, 4 x 6 grid
        ("gc_vit", (80, 80), "softmax", "blocks.1.norm2", 3),
        ("gc_distilled", (64, 64), "softmax", "blocks.1.norm1", 2),  # two prefix tokens
        ("gc_focused", (96, 96), "focused", "blocks.1.norm1", -1),
    ]
    for i, (model_name, size, variant, layer, target) in enumerate(setups):
        file, img = input_for(model_name, size)
        for method in methods:
            cls, logit, cam, scaled, image, a, g = reference_cam(models[model_name], img, settings(variant), method,
                                                                 layer, target)
            tag = f"cam{i}_{method.replace('+', 'p')}"
            case = {"model": model_name, "input": file, "variant": variant, "layer": layer,
                    "method": method, "class": target, "expected_class": cls, "logit": logit,
                    "cam": save(out, tag + ".cam.npy", cam), "scaled": save(out, tag + ".scaled.npy", scaled),
                    "image": save(out, tag + ".image.npy", image),
                    # The layer's patch activations [C, gh, gw] (and their gradients): what the map is
                    # computed from, so the test can bound its error by the method's conditioning.
                    "activations": save(out, tag + ".activations.npy", a)}
            if g is not None:
                case["gradients"] = save(out, tag + ".gradients.npy", g[0])
            cases["cam"].append(case)

    # ---- Relevance and gradient rollout (the attention's own gradient, every variant as A @ v)
    for i, (model_name, size, variant, target, discard) in enumerate([
        ("gc_vit", (64, 96), "softmax", -1, 0.0),
        ("gc_vit", (80, 80), "linear", 4, 0.3),
        ("gc_distilled", (64, 64), "softmax", 1, 0.0),
        ("gc_focused", (96, 96), "focused", -1, 0.5),  # DWC outside the matrix
        ("gc_vit", (64, 64), "anchor", 2, 0.0),  # pooled anchors (anchors=6 below)
    ]):
        file, img = input_for(model_name, size)
        s = settings(variant)
        if variant == "anchor":
            s = dataclasses.replace(s, anchors=6)
        cls, logit, attentions, grads = attention_gradients(models[model_name], img, s, target)
        P = models[model_name].num_prefix
        row, normalised = chefer_relevance(attentions, grads, P)
        rollout_row, mask = gradient_rollout(attentions, grads, P, discard)
        tag = f"relevance{i}"
        cases["relevance"].append({
            "model": model_name, "input": file, "variant": variant, "anchors": s.anchors, "class": target,
            "expected_class": cls, "logit": logit, "discard": discard,
            "row": save(out, tag + ".row.npy", row), "normalised": save(out, tag + ".normalised.npy", normalised),
            "rollout_row": save(out, tag + ".rollout_row.npy", rollout_row),
            "rollout_mask": save(out, tag + ".rollout_mask.npy", mask),
            "gradient_norm_first": float(grads[0].abs().sum())})

    # ---- Integrated gradients from the zero baseline
    for i, (model_name, size, variant, target, steps) in enumerate([
        ("gc_vit", (64, 96), "softmax", -1, 24),
        ("gc_focused", (96, 96), "focused", 3, 16),
    ]):
        file, img = input_for(model_name, size)
        cls, attributions, pixels, patches, scaled, gap = integrated_gradients(
            models[model_name], img, settings(variant), target, steps, torch.zeros_like(img))
        tag = f"ig{i}"
        cases["ig"].append({"model": model_name, "input": file, "variant": variant, "class": target,
                            "expected_class": cls, "steps": steps, "completeness_gap": gap,
                            "attributions": save(out, tag + ".attributions.npy", attributions),
                            "pixels": save(out, tag + ".pixels.npy", pixels),
                            "patches": save(out, tag + ".patches.npy", patches),
                            "scaled": save(out, tag + ".scaled.npy", scaled)})

    # ---- Deletion and insertion curves of given maps (a reference Grad-CAM map, a random one)
    for i, (model_name, size, variant, steps, map_source) in enumerate([
        ("gc_vit", (64, 96), "softmax", 24, "cam"),  # 24 cells, one per step
        ("gc_vit", (80, 80), "softmax", 7, "random"),  # 25 cells in 7 steps (rounded counts)
        ("gc_focused", (96, 96), "focused", 10, "cam"),
    ]):
        model = models[model_name]
        file, img = input_for(model_name, size)
        s = settings(variant)
        gh, gw = size[0] // model.patch[0], size[1] // model.patch[1]
        if map_source == "cam":
            cell_map = reference_cam(model, img, s, "gradcam", f"blocks.{len(model.blocks) - 1}.norm1", -1)[3]
        else:
            cell_map = torch.rand(gh, gw, generator=gen).numpy()
        cell_map = np.float32(cell_map)
        with torch.no_grad():
            cls = int(model.forward(img, s)[0].argmax())
        fraction, curves = deletion_insertion(model, img, s, cell_map, cls, steps, float(model.patch[0]))
        cases["faithfulness"].append({"model": model_name, "input": file, "variant": variant, "steps": steps,
                                      "class": cls, "map": save(out, f"faithfulness{i}.map.npy", cell_map),
                                      "fraction": fraction, "deletion": curves["deletion"],
                                      "insertion": curves["insertion"]})

    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
