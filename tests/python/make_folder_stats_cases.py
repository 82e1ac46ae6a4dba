#!/usr/bin/python3
"""Reference values for attnscope's statistics over a folder: attention distance and entropy per head,
DINO's masks and their Jaccard index, the effective receptive field, linear CKA between two models.

Usage: /usr/bin/python3 tests/python/make_folder_stats_cases.py OUTDIR

Independent of the C++ code. The models run in float64 in the existing references (reference_vit.py for a
timm ViT with class and distillation tokens and a FLatten ViT, reference_representations.py for a DINOv2
with registers, reference_hier.py for a timm Swin); every statistic is written here from its anchor's code
(read with the search tool):
  * mean distance: sayakpaul/probing-vits compute_distance_matrix / compute_mean_attention_dist (the
    attention cut to [prefix:, prefix:], distance = patch_size * ||(row, col) - (row', col')||, sum over
    keys, mean over queries), then the mean over images. Entropy: -sum_j A ln A over every key (0 ln 0 = 0),
    mean over every query, then over images.
  * masks: facebookresearch/dino visualize_attention.py (attentions[0, :, 0, prefix:], sort, val / sum,
    cumsum > 1 - threshold, put back with argsort(idx)); Jaccard as in dino issue #54 (masks upsampled
    nearest by the patch size, |A & B| / |A | B|, best head per image).
  * ERF: DingXiaoH/RepLKNet-pytorch erf/visualize_erf.py get_input_grad (ReLU(out[:, :, h // 2, w // 2]).sum(),
    autograd.grad w.r.t. the normalised samples, ReLU, sum over batch and channels, mean over images) and
    erf/analyze_erf.py get_rectangle on log10(map + 1) for 0.2, 0.3, 0.5, 0.99.
  * CKA: google-research representation_similarity demo: gram_linear(x) = x x^T, center_gram (biased),
    cka = <Kc, Lc> / (||Kc|| ||Lc||); one example per image, the block output flattened over tokens and
    channels (prefix tokens included).

Inputs are PNGs at each model's native size, run with --resize none and ImageNet's mean and std.

OUTDIR/cases.json: {"models": {name: {file, heads, size, folder}}, "mean", "std",
  "cases": [{name, analysis, model, args, expected: {...}, ...}]}, per analysis:
  headstats   stats: [[layer, head, mean_distance, entropy]]
  dino-masks  image, masks (.npy uint8 [heads, gh, gw]), margin (smallest |cumsum - (1 - mass)|)
  dino-eval   masks_folder, jaccard_per_head [heads], jaccard
  erf         erf (.npy float64 [H, W]), ratios [4] (null where no square reaches the threshold)
  cka         compare (model name), cka (.npy float64 [LA, LB]); the minibatch case (one batch of every image)
              is the demo's cka(..., debiased=True)
"""

import functools
import json
import math
import os
import sys
import time

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

import reference_hier
import reference_representations as rep
import reference_vit as ref
import safetensors_io
from fixture_tools import output_folder, write_cases
from make_hier_cases import swin_state
from make_hub_cases import png_pixels
from make_parity_cases import make_state
from make_representation_cases import dinov2_state

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
IMAGES = 4  # per folder
SWIN_ARCH = {"family": "swin", "heads": [1, 2, 2, 4], "window": 4, "depths": [2, 2, 2, 1],
             "embed_dims": [16, 32, 64, 128], "patch_size": 4, "mlp_ratios": [4, 4, 4, 4], "num_classes": 10,
             "img_size": 128}
ERF_THRESHOLDS = (0.2, 0.3, 0.5, 0.99)


def save(out, name, array, dtype=np.float32):
    np.save(os.path.join(out, name), np.ascontiguousarray(np.asarray(array, dtype=dtype)))
    return name


# ---- models: img [1, 3, H, W] float64 (normalised) -> {attn: [L] [h, T, T], blocks: [L] [T, C] or
# [H, W, C], prefix, patch (pixels per query step, per layer)} ------------------------------------------
def vit_forward(model):
    """A reference_vit model in its native attention, block by block (as ViTReference.forward)."""
    def forward(img):
        x, gh, gw = model.embed(img)
        ctx = ref._Ctx()
        ctx.with_dwc_band = False
        kind = model.blocks[0]["attn"].kind
        ctx.settings = ref.Settings(variant="focused" if kind == "focused" else "softmax")
        ctx.gh, ctx.gw, ctx.num_prefix, ctx.mask = gh, gw, model.num_prefix, None
        attn, blocks = [], []
        for b in model.blocks:
            a, m = b["attn"](model._ln(x, b["n1"]), ctx, want_matrix=True)
            attn.append(m[0])
            x = model.after_attention(x, b, a, gh, gw)
            blocks.append(x[0])
        return {"attn": attn, "blocks": blocks, "prefix": model.num_prefix, "grid": (gh, gw),
                "patch": [model.patch[0]] * len(blocks)}
    return forward


def dinov2_forward(sd, heads, patch):
    def forward(img):
        f = rep.dinov2_features(sd, img, heads)
        return {"attn": f["attn"], "blocks": f["blocks"], "prefix": f["num_prefix"], "grid": f["grid"],
                "patch": [patch] * len(f["blocks"])}
    return forward


def swin_forward(model, side):
    """timm Swin: each block's output [H, W, C] and its attention as a full [h, N, N] matrix in image order."""
    def forward(img):
        _, records = model.forward(img)
        f = rep.swin_features(model, img)
        attn, blocks, patch = [], [], []
        for rec, out, grid in zip(records, f["blocks"], f["grids"]):
            H, W = rec.query_grid
            rows = [rec.row(r, c).reshape(rec.heads, -1) for r in range(H) for c in range(W)]
            attn.append(torch.stack(rows, dim=1))  # [h, N, N]
            blocks.append(out.reshape(grid[0], grid[1], -1))
            patch.append(side // W)
        return {"attn": attn, "blocks": blocks, "prefix": 0, "grid": f["grid"], "patch": patch}
    return forward


def write_models(out):
    models, forwards = {}, {}
    vit = make_state(seed=61, dim=64, depth=3, patch=16, grid=6, heads=4, dist=True, qkv_std=1.5)
    safetensors_io.save_file(vit, os.path.join(out, "fs_vit.safetensors"), metadata={"format": "pt"},
                             dtype=torch.float32)
    models["fs_vit"] = {"file": "fs_vit.safetensors", "heads": 4, "size": [96, 96], "family": "softmax vit"}
    forwards["fs_vit"] = vit_forward(ref.load_model(os.path.join(out, "fs_vit.safetensors"), heads=4,
                                                    dtype=torch.float64))

    flat = make_state(seed=62, dim=64, depth=3, patch=16, grid=6, heads=2, attn="focused", dwc_k=5, pe=None)
    safetensors_io.save_file(flat, os.path.join(out, "fs_flatten.safetensors"), metadata={"format": "pt"},
                             dtype=torch.float32)
    # heads from the file (the DWC's channels are a head's): it is also --compare-model, which takes no --arch.
    models["fs_flatten"] = {"file": "fs_flatten.safetensors", "heads": None, "size": [96, 96],
                            "family": "flatten vit"}
    forwards["fs_flatten"] = vit_forward(ref.load_model(os.path.join(out, "fs_flatten.safetensors"), heads=2,
                                                        dtype=torch.float64))

    dino = dinov2_state(63, 128, 3, 2, 14, 6, 4, (0.2, 1.2))
    torch.save(dino, os.path.join(out, "fs_dinov2_reg.pth"))
    dino32 = {k: v.to(torch.float32) if v.is_floating_point() else v for k, v in dino.items()}
    models["fs_dinov2_reg"] = {"file": "fs_dinov2_reg.pth", "heads": None, "size": [84, 84],
                               "family": "dinov2 registers"}
    forwards["fs_dinov2_reg"] = dinov2_forward(dino32, 2, 14)

    swin, _ = swin_state(64, SWIN_ARCH, 16, SWIN_ARCH["depths"], 128)
    safetensors_io.save_file(swin, os.path.join(out, "fs_swin.safetensors"),
                             metadata={"format": "pt", "attnscope_arch": json.dumps(SWIN_ARCH)})
    models["fs_swin"] = {"file": "fs_swin.safetensors", "heads": None, "size": [128, 128], "family": "swin"}
    forwards["fs_swin"] = swin_forward(reference_hier.build(swin, SWIN_ARCH), 128)
    return models, forwards


def write_folder(out, folder, size, seed):
    """IMAGES PNGs in out/folder; their normalised tensors [1, 3, H, W] float64 in name order."""
    os.makedirs(os.path.join(out, folder), exist_ok=True)
    images = []
    for i in range(IMAGES):
        pixels = png_pixels(seed + i, *size)
        Image.fromarray(pixels, mode="RGB").save(os.path.join(out, folder, f"img_{i}.png"), format="PNG")
        x = torch.from_numpy(pixels).to(torch.float64).permute(2, 0, 1)[None] / 255.0
        mean = torch.tensor(MEAN, dtype=torch.float64)[:, None, None]
        std = torch.tensor(STD, dtype=torch.float64)[:, None, None]
        images.append((x - mean) / std)
    return images


# ---- probing-vits ----------------------------------------------------------------------------------
def anchor_distance_matrix(patch_size, num_patches, length):
    """probing-vits' compute_distance_matrix, loop for loop."""
    distance_matrix = np.zeros((num_patches, num_patches))
    for i in range(num_patches):
        for j in range(num_patches):
            if i == j:
                continue
            xi, yi = int(i / length), i % length
            xj, yj = int(j / length), j % length
            distance_matrix[i, j] = patch_size * np.linalg.norm([xi - xj, yi - yj])
    return distance_matrix


@functools.lru_cache(maxsize=None)  # the same matrix for every image and block of a grid
def compute_distance_matrix(patch_size, num_patches, length):
    """The same matrix at numpy's speed (Swin's 32 x 32 grid is a million loop steps); checked against the
    loop on a small grid in main()."""
    index = np.arange(num_patches)
    rows, cols = index // length, index % length
    return patch_size * np.sqrt((rows[:, None] - rows[None]) ** 2 + (cols[:, None] - cols[None]) ** 2.0)


def compute_mean_attention_dist(patch_size, attention_weights, num_prefix, length):
    """[heads]: attention_weights [heads, T, T] (probing-vits with num_cls_tokens = the prefix tokens; the
    grid length is given, Swin's grids being square here too)."""
    attention_weights = attention_weights[..., num_prefix:, num_prefix:]
    num_patches = attention_weights.shape[-1]
    assert length ** 2 == num_patches
    distance_matrix = compute_distance_matrix(patch_size, num_patches, length)
    mean_distances = attention_weights * distance_matrix[None]
    mean_distances = np.sum(mean_distances, axis=-1)
    return np.mean(mean_distances, axis=-1)


def entropy(attention_weights):
    a = torch.from_numpy(attention_weights)
    return (-torch.xlogy(a, a).sum(-1).mean(-1)).numpy()


def headstats_case(case, runs):
    distance, ent = None, None
    for run in runs:
        d = [compute_mean_attention_dist(run["patch"][l], a.numpy(), run["prefix"], math.isqrt(
            a.shape[-1] - run["prefix"])) for l, a in enumerate(run["attn"])]
        e = [entropy(a.numpy()) for a in run["attn"]]
        distance = d if distance is None else [x + y for x, y in zip(distance, d)]
        ent = e if ent is None else [x + y for x, y in zip(ent, e)]
    n = len(runs)
    if runs[0]["prefix"] > 0:
        # Two wrong readings, for the test to show it tells them apart: the prefix queries kept (only the
        # prefix keys dropped), and the patch rows renormalised.
        wrong_rows, wrong_norm = 0, 0
        for run in runs:
            P, a = run["prefix"], run["attn"][-1].numpy()
            length = math.isqrt(a.shape[-1] - P)
            D = compute_distance_matrix(run["patch"][-1], length * length, length)
            wrong_rows = wrong_rows + (a[:, :, P:] * D[None, [0] * P + list(range(length * length))]).sum(-1).mean(-1)
            patch = a[:, P:, P:]
            wrong_norm = wrong_norm + ((patch / patch.sum(-1, keepdims=True)) * D[None]).sum(-1).mean(-1)
        case["wrong_last_layer"] = {"prefix_rows_kept": (wrong_rows / len(runs)).tolist(),
                                    "rows_renormalised": (wrong_norm / len(runs)).tolist()}
    case["stats"] = [[l, h, float(distance[l][h] / n), float(ent[l][h] / n)]
                     for l in range(len(distance)) for h in range(len(distance[l]))]


# ---- dino ------------------------------------------------------------------------------------------
def th_attn(attn_layer, prefix, grid, threshold):
    """visualize_attention.py's th_attn [nh, gh, gw] and the smallest gap to the cut (float64)."""
    nh = attn_layer.shape[0]
    attentions = attn_layer[:, 0, prefix:].reshape(nh, -1)
    val, idx = torch.sort(attentions)
    val /= torch.sum(val, dim=1, keepdim=True)
    cumval = torch.cumsum(val, dim=1)
    margin = (cumval - (1 - threshold)).abs().min().item()
    th = cumval > (1 - threshold)
    idx2 = torch.argsort(idx)
    for head in range(nh):
        th[head] = th[head][idx2[head]]
    return th.reshape(nh, *grid).to(torch.uint8), margin


def masks_case(out, case, run, layer, mass):
    masks, margin = th_attn(run["attn"][layer].clone(), run["prefix"], run["grid"], mass)
    assert margin > 1e-4, (case["name"], margin)
    case["margin"] = margin
    case["expected"] = {"masks": save(out, case["name"] + ".masks.npy", masks.numpy(), np.uint8)}
    return masks


def object_masks(out, folder, size, seed):
    """One ground-truth mask per image of the folder: an ellipse, in out/folder (same names)."""
    os.makedirs(os.path.join(out, folder), exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    H, W = size
    masks = []
    yy, xx = torch.meshgrid(torch.arange(H, dtype=torch.float64), torch.arange(W, dtype=torch.float64),
                            indexing="ij")
    for i in range(IMAGES):
        cy, cx = (torch.rand(2, generator=g) * 0.5 + 0.25).tolist()
        ry, rx = (torch.rand(2, generator=g) * 0.25 + 0.15).tolist()
        m = (((yy - cy * H) / (ry * H)) ** 2 + ((xx - cx * W) / (rx * W)) ** 2) <= 1.0
        Image.fromarray((m.numpy() * 255).astype(np.uint8), mode="L").save(
            os.path.join(out, folder, f"img_{i}.png"), format="PNG")
        masks.append(m)
    return masks


def jaccard_case(case, runs, objects, patch, mass):
    """dino issue #54: per image and head J = |A & B| / |A | B| with the mask upsampled by the patch."""
    per_image = []
    for run, obj in zip(runs, objects):
        masks, margin = th_attn(run["attn"][-1].clone(), run["prefix"], run["grid"], mass)
        assert margin > 1e-4, (case["name"], margin)
        up = F.interpolate(masks[None].float(), scale_factor=patch, mode="nearest")[0] > 0
        inter = (up & obj[None]).flatten(1).sum(1).double()
        union = (up | obj[None]).flatten(1).sum(1).double()
        per_image.append(inter / union)
    j = torch.stack(per_image)  # [images, heads]
    case["jaccard_per_head"] = j.mean(0).tolist()
    case["jaccard"] = j.max(1).values.mean().item()


# ---- RepLKNet ERF ----------------------------------------------------------------------------------
def feature_map(run, layer):
    """[1, C, h, w]: block `layer`'s output on the grid (a ViT's patch tokens reshaped)."""
    block = run["blocks"][layer]
    if block.dim() == 3:  # [H, W, C]
        return block.permute(2, 0, 1)[None]
    gh, gw = run["grid"]
    return block[run["prefix"]:].reshape(gh, gw, -1).permute(2, 0, 1)[None]


def get_input_grad(forward, samples, layer):
    outputs = feature_map(forward(samples), layer)
    out_size = outputs.size()
    central_point = F.relu(outputs[:, :, out_size[2] // 2, out_size[3] // 2]).sum()
    grad = torch.autograd.grad(central_point, samples)
    grad = grad[0]
    grad = F.relu(grad)
    aggregated = grad.sum((0, 1))
    return aggregated.detach().numpy()


def get_rectangle(data, thresh):
    h, w = data.shape
    all_sum = np.sum(data)
    for i in range(1, h // 2):
        selected_area = data[h // 2 - i:h // 2 + 1 + i, w // 2 - i:w // 2 + 1 + i]
        area_sum = np.sum(selected_area)
        if area_sum / all_sum > thresh:
            return i * 2 + 1, (i * 2 + 1) / h * (i * 2 + 1) / w
    return None


def erf_case(out, case, forward, images, layer):
    total = None
    for img in images:
        samples = img.clone().requires_grad_(True)
        contribution = get_input_grad(forward, samples, layer)
        total = contribution if total is None else total + contribution
    data = total / len(images)
    case["expected"] = {"erf": save(out, case["name"] + ".erf.npy", data, np.float64)}
    logged = np.log10(data + 1)
    logged = logged / np.max(logged)
    ratios = []
    for t in ERF_THRESHOLDS:
        found = get_rectangle(logged, t)
        ratios.append(None if found is None else found[1])
    case["ratios"] = ratios
    case["sum"] = float(data.sum())


# ---- CKA (representation_similarity demo) ------------------------------------------------------------
def gram_linear(x):
    return x.dot(x.T)


def center_gram(gram, unbiased=False):
    gram = gram.copy()
    if unbiased:
        # The demo's U-statistic (Szekely and Rizzo 2014): the unbiased HSIC up to a factor of n.
        n = gram.shape[0]
        np.fill_diagonal(gram, 0)
        means = np.sum(gram, 0, dtype=np.float64) / (n - 2)
        means -= np.sum(means) / (2 * (n - 1))
        gram -= means[:, None]
        gram -= means[None, :]
        np.fill_diagonal(gram, 0)
    else:
        means = np.mean(gram, 0, dtype=np.float64)
        means -= np.mean(means) / 2
        gram -= means[:, None]
        gram -= means[None, :]
    return gram


def cka(gram_x, gram_y, debiased=False):
    gram_x = center_gram(gram_x, unbiased=debiased)
    gram_y = center_gram(gram_y, unbiased=debiased)
    scaled_hsic = gram_x.ravel().dot(gram_y.ravel())
    return scaled_hsic / (np.linalg.norm(gram_x) * np.linalg.norm(gram_y))


def cka_case(out, case, runs_a, runs_b, debiased=False):
    """debiased: Nguyen et al.'s minibatch estimator over one batch of every image, which is the demo's
    cka(..., debiased=True)."""
    def examples(runs, layer):
        return np.stack([r["blocks"][layer].detach().reshape(-1).numpy() for r in runs])
    la, lb = len(runs_a[0]["blocks"]), len(runs_b[0]["blocks"])
    result = np.array([[cka(gram_linear(examples(runs_a, i)), gram_linear(examples(runs_b, j)), debiased)
                        for j in range(lb)] for i in range(la)])
    case["expected"] = {"cka": save(out, case["name"] + ".cka.npy", result, np.float64)}


def main(argv):
    out = output_folder(argv, __doc__)
    if out is None:
        return 2
    started = time.time()
    assert np.array_equal(compute_distance_matrix(16, 35, 7), anchor_distance_matrix(16, 35, 7))
    models, forwards = write_models(out)
    folders, runs = {}, {}
    for seed, name in enumerate(models):
        folder = name + "_images"
        models[name]["folder"] = folder
        folders[name] = write_folder(out, folder, models[name]["size"], 100 + 10 * seed)
        with torch.no_grad():
            runs[name] = [forwards[name](img) for img in folders[name]]
    # fs_vit and fs_flatten share a size: CKA runs both on fs_vit's folder.
    with torch.no_grad():
        flatten_on_vit = [forwards["fs_flatten"](img) for img in folders["fs_vit"]]

    cases = []
    for name in models:
        case = {"name": name + "_headstats", "analysis": "headstats", "model": name, "args": []}
        headstats_case(case, runs[name])
        cases.append(case)

    for name, layer, mass, args in (("fs_vit", 2, 0.6, []), ("fs_flatten", 1, 0.5, ["--layer", "1", "--mass", "0.5"]),
                                    ("fs_dinov2_reg", 2, 0.6, [])):
        case = {"name": name + "_dino_masks", "analysis": "dino-masks", "model": name, "args": args,
                "image": models[name]["folder"] + "/img_1.png"}
        masks_case(out, case, runs[name][1], layer, mass)
        cases.append(case)

    for name, seed in (("fs_vit", 7), ("fs_dinov2_reg", 8)):
        case = {"name": name + "_dino_eval", "analysis": "dino-eval", "model": name, "args": [],
                "masks_folder": name + "_objects"}
        objects = object_masks(out, case["masks_folder"], models[name]["size"], seed)
        jaccard_case(case, runs[name], objects, 16 if name == "fs_vit" else 14, 0.6)
        cases.append(case)

    for name, layer, args in (("fs_vit", -1, []), ("fs_flatten", -1, []), ("fs_dinov2_reg", 1, ["--layer", "1"]),
                              ("fs_swin", -1, [])):
        case = {"name": name + "_erf", "analysis": "erf", "model": name, "args": args}
        erf_case(out, case, forwards[name], folders[name], layer)
        cases.append(case)

    for a, b, runs_b in (("fs_vit", "fs_flatten", flatten_on_vit), ("fs_dinov2_reg", "fs_dinov2_reg", None),
                         ("fs_swin", "fs_swin", None)):
        case = {"name": f"{a}_{b}_cka", "analysis": "cka", "model": a, "compare": b, "args": []}
        cka_case(out, case, runs[a], runs_b if runs_b is not None else runs[b])
        cases.append(case)
    case = {"name": "fs_vit_fs_flatten_minibatch_cka", "analysis": "cka", "model": "fs_vit", "compare": "fs_flatten",
            "args": ["--cka-estimator", "minibatch", "--cka-batch", str(IMAGES)]}
    cka_case(out, case, runs["fs_vit"], flatten_on_vit, debiased=True)
    cases.append(case)

    with open(os.path.join(out, "cases.json"), "w") as fh:
        json.dump({"models": models, "mean": MEAN, "std": STD, "cases": cases}, fh, indent=1)
    print(f"{len(cases)} cases in {out} ({time.time() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
