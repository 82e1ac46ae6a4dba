#!/usr/bin/python3
"""Reference values for attnscope's representation analyses: feature PCA, patch similarity, token norms.

Usage: /usr/bin/python3 tests/python/make_representation_cases.py OUTDIR

Independent of the C++ code: the features come from reference_representations.py (float64 forwards written
from timm's, DINOv2's and timm Swin's code) and every analysis is written there from its anchor
(sklearn's PCA, dinov2 issue #23, scikit-image's threshold_otsu, dino-vit-features' extract_descriptors,
chunk_cosine_sim and find_correspondences). The weights are random (the same generators as the other parity
fixtures); inputs are PNGs at each model's native size, run with --resize none and ImageNet's mean and std.

OUTDIR/cases.json: {"models": {name: {file, heads, family}}, "mean": [3], "std": [3],
  "cases": [{name, analysis, model, image, args (extra CLI arguments), expected: {file: .npy}, ...checks}],
  "math": {pca: {input, scores, explained}, otsu: {values, threshold}}}
Per analysis the case holds what the C++ test compares (see tests/test_representations.cpp):
  pca         scores, rgb [gh, gw, 3], explained [3], components (indices whose eigengap is at least 1% of the
              largest eigenvalue: only those are compared up to sign); with a foreground: mask, threshold,
              foreground_scores / foreground_rgb, foreground_components
  similarity  similarity [gh, gw] (and similarity_image2, best_buddies [[r1, c1, r2, c2]], buddy_margin: the
              smallest gap between a nearest and a second-nearest similarity, asserted > 1e-5)
  norms       norms [blocks, tokens] (or per stage), threshold, log_bin_width, outliers [[layer, token, row, col,
              norm]], class_mass [layers], neighbours [outliers of the last block]
photo_dinov2_reg.pth is a DINOv2-with-registers-shaped model (224 x 224, patch 14, 4 registers, random weights
with small layer scales, so its features stay close to the patch embedding) for looking at real photos.
"""

import json
import os
import sys

try:
    import torch
except ImportError:  # e.g. a pyenv python3 first on PATH: Debian's python3-torch lives in /usr/bin/python3
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_hier  # noqa: E402
import reference_representations as rep  # noqa: E402
import safetensors_io  # noqa: E402
from make_hier_cases import swin_state  # noqa: E402  (random timm-layout Swin weights)
from make_hub_cases import DinoVisionTransformer, Init, png_pixels, position_values, randomize  # noqa: E402
from make_parity_cases import make_state  # noqa: E402  (random timm-layout ViT weights)

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SWIN_ARCH = {"family": "swin", "heads": [1, 2, 2, 4], "window": 4, "depths": [2, 2, 2, 1],
             "embed_dims": [16, 32, 64, 128], "patch_size": 4, "mlp_ratios": [4, 4, 4, 4], "num_classes": 10,
             "img_size": 128}


def save(out, name, array, dtype=np.float32):
    np.save(os.path.join(out, name), np.ascontiguousarray(np.asarray(array, dtype=dtype)))
    return name


@torch.no_grad()
def dinov2_state(seed, C, depth, heads, patch, M, registers, layer_scale):
    r = Init(seed)
    model = DinoVisionTransformer(M * patch, patch, C, depth, heads, registers, True, 0.0)
    randomize(model, r)
    model.cls_token.copy_(r.normal(model.cls_token.shape, 0.5))
    model.pos_embed.copy_(position_values(r, 1, M, C)[None])
    if registers:
        model.register_tokens.copy_(r.normal(model.register_tokens.shape, 0.7))
    model.mask_token.copy_(r.normal(model.mask_token.shape, 0.1))
    for blk in model.blocks:
        blk.ls1.gamma.copy_(r.uniform([C], *layer_scale))
        blk.ls2.gamma.copy_(r.uniform([C], *layer_scale))
    return {k: v.clone().contiguous() for k, v in model.state_dict().items()}


def write_models(out):
    """The models as files, and a features function (image float64 [1, 3, H, W] -> features) for each."""
    models, features = {}, {}
    vit = make_state(seed=41, dim=64, depth=3, patch=16, grid=6, heads=4, qkv_std=1.5)
    safetensors_io.save_file(vit, os.path.join(out, "rep_vit.safetensors"), metadata={"format": "pt"},
                             dtype=torch.float32)
    vit32 = {k: v.to(torch.float32) for k, v in vit.items()}
    models["rep_vit"] = {"file": "rep_vit.safetensors", "heads": 4, "family": "timm vit", "size": [96, 96]}
    features["rep_vit"] = lambda img: rep.timm_vit_features(vit32, img, 4)

    dino = dinov2_state(42, 128, 3, 2, 14, 6, 4, (0.2, 1.2))
    torch.save(dino, os.path.join(out, "rep_dinov2_reg.pth"))
    models["rep_dinov2_reg"] = {"file": "rep_dinov2_reg.pth", "heads": None, "family": "dinov2 registers",
                                "size": [84, 84]}
    features["rep_dinov2_reg"] = lambda img: rep.dinov2_features(dino, img, 2)

    swin, _ = swin_state(43, SWIN_ARCH, 16, SWIN_ARCH["depths"], 128)
    safetensors_io.save_file(swin, os.path.join(out, "rep_swin.safetensors"),
                             metadata={"format": "pt", "attnscope_arch": json.dumps(SWIN_ARCH)})
    swin_model = reference_hier.build(swin, SWIN_ARCH)
    models["rep_swin"] = {"file": "rep_swin.safetensors", "heads": None, "family": "swin", "size": [128, 128]}
    features["rep_swin"] = lambda img: rep.swin_features(swin_model, img)

    photo = dinov2_state(44, 192, 4, 3, 14, 16, 4, (0.05, 0.2))
    torch.save(photo, os.path.join(out, "photo_dinov2_reg.pth"))
    return models, features


def write_image(out, name, seed, size):
    pixels = png_pixels(seed, *size)
    Image.fromarray(pixels, mode="RGB").save(os.path.join(out, name), format="PNG")
    x = torch.from_numpy(pixels).to(torch.float64).permute(2, 0, 1)[None] / 255.0
    return (x - torch.tensor(MEAN, dtype=torch.float64)[:, None, None]) / torch.tensor(STD, dtype=torch.float64)[
        :, None, None]


def comparable_components(eigenvalues, k=3):
    """The components whose eigenvalue is at least 1% of the largest away from its neighbours'."""
    eig = list(eigenvalues)
    out = []
    for i in range(k):
        gaps = [eig[i - 1] - eig[i]] if i > 0 else []
        gaps.append(eig[i] - eig[i + 1])
        if min(gaps) >= 1e-2 * eig[0]:
            out.append(i)
    return out


def pca_case(out, case, features, layer, foreground=None, flip=False):
    f = features
    gh, gw = f["grid"] if layer is None else f.get("grids", [f["grid"]] * len(f["blocks"]))[layer]
    rows = (f["norm"] if layer is None else f["blocks"][layer])[f["num_prefix"]:].numpy()
    result = rep.feature_pca(rows, foreground, flip)
    name = case["name"]
    case["expected"] = {"scores": save(out, name + ".scores.npy", result["scores"].reshape(gh, gw, 3)),
                        "rgb": save(out, name + ".rgb.npy", result["rgb"].reshape(gh, gw, 3))}
    case["explained"] = result["explained"].tolist()
    case["components"] = comparable_components(result["eigenvalues"])
    assert 0 in case["components"], (name, result["eigenvalues"])
    if foreground is not None:
        split, threshold = result["split_values"], result["threshold"]
        # Far from the threshold: a float32 run puts every patch on the same side.
        assert np.abs(split - threshold).min() > 1e-3, (name, np.abs(split - threshold).min())
        case["threshold"] = threshold
        case["expected"]["mask"] = save(out, name + ".mask.npy", result["mask"].reshape(gh, gw), np.uint8)
        case["expected"]["foreground_scores"] = save(out, name + ".fg_scores.npy",
                                                     result["foreground_scores"].reshape(gh, gw, 3))
        case["expected"]["foreground_rgb"] = save(out, name + ".fg_rgb.npy", result["foreground_rgb"].reshape(gh, gw, 3))
        case["foreground_components"] = comparable_components(result["foreground_eigenvalues"])
        assert 0 in case["foreground_components"], name


def similarity_case(out, case, features, layer, facet, query, features2=None):
    f = features
    gh, gw = f.get("grids", [f["grid"]] * len(f["blocks"]))[layer]
    d1 = rep.descriptors(f, layer, facet)
    q = query[0] * gw + query[1]
    sim = rep.chunk_cosine_sim(d1[q][None], d1)[0]
    case["expected"] = {"similarity": save(out, case["name"] + ".similarity.npy", sim.reshape(gh, gw).numpy())}
    if features2 is not None:
        gh2, gw2 = features2.get("grids", [features2["grid"]] * len(features2["blocks"]))[layer]
        d2 = rep.descriptors(features2, layer, facet)
        sim2 = rep.chunk_cosine_sim(d1[q][None], d2)[0]
        case["expected"]["similarity_image2"] = save(out, case["name"] + ".similarity2.npy",
                                                     sim2.reshape(gh2, gw2).numpy())
        pairs, margin = rep.best_buddies(d1, d2)
        assert margin > 1e-5, (case["name"], margin)
        case["best_buddies"] = [[i // gw, i % gw, j // gw2, j % gw2] for i, j in pairs]
        case["buddy_margin"] = margin


def norms_case(out, case, features, threshold=None):
    report = rep.norm_report(features, threshold)
    name = case["name"]
    norms = [n.numpy() for n in report["norms"]]
    if len({n.shape[0] for n in norms}) == 1:
        case["expected"] = {"norms": save(out, name + ".norms.npy", np.stack(norms))}
    else:
        case["expected"] = {}
        grids = features["grids"]
        stage = 0
        begin = 0
        while begin < len(norms):
            end = begin
            while end < len(norms) and grids[end] == grids[begin]:
                end += 1
            case["expected"][f"norms_stage{stage}"] = save(out, f"{name}.norms_stage{stage}.npy",
                                                          np.stack(norms[begin:end]))
            stage += 1
            begin = end
    case["threshold"] = report["threshold"]
    case["log_bin_width"] = report["log_bin_width"]
    case["outliers"] = [list(o) for o in report["outliers"]]
    case["class_mass"] = report["class_mass"]
    case["neighbours"] = report["neighbours"]


def math_cases(out):
    g = torch.Generator().manual_seed(45)
    rows = (torch.randn(60, 24, generator=g) * torch.linspace(3.0, 0.1, 24)).to(torch.float32)
    scores, _, ratio, eig = rep.pca_fit_transform(rows.numpy().astype(np.float64))
    values = torch.cat([torch.randn(300, generator=g) * 0.3, torch.randn(60, generator=g) * 0.2 + 2.5])
    return {"pca": {"input": save(out, "math_pca_input.npy", rows.numpy()),
                    "scores": save(out, "math_pca_scores.npy", scores, np.float64),
                    "explained": ratio.tolist()},
            "otsu": {"values": save(out, "math_otsu_values.npy", values.numpy(), np.float64),
                     "threshold": rep.threshold_otsu(values.numpy())}}


def main(argv):
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    models, forward = write_models(out)
    cases = []
    feats = {}

    def features_of(model, image_seed):
        key = (model, image_seed)
        if key not in feats:
            name = f"{model}_{image_seed}.png"
            img = write_image(out, name, image_seed, models[model]["size"])
            with torch.no_grad():
                feats[key] = (name, forward[model](img))
        return feats[key]

    def add(name, analysis, model, args, build, image_seed=1):
        image, f = features_of(model, image_seed)
        case = {"name": name, "analysis": analysis, "model": model, "image": image, "args": args}
        build(case, f)
        cases.append(case)

    second = lambda model: features_of(model, 2)  # noqa: E731
    for model, last in (("rep_vit", 2), ("rep_dinov2_reg", 2)):
        add(f"{model}_pca", "pca", model, [], lambda c, f: pca_case(out, c, f, None))
        add(f"{model}_pca_layer1", "pca", model, ["--layer", "1"], lambda c, f: pca_case(out, c, f, 1))
        add(f"{model}_similarity_key", "similarity", model, ["--query", "2,3", "--image2", second(model)[0]],
            lambda c, f, m=model: similarity_case(out, c, f, last, "key", (2, 3), second(m)[1]))
        add(f"{model}_similarity_token", "similarity", model,
            ["--query", "4,1", "--facet", "token", "--layer", "1", "--image2", second(model)[0]],
            lambda c, f, m=model: similarity_case(out, c, f, 1, "token", (4, 1), second(m)[1]))
        add(f"{model}_similarity_query", "similarity", model, ["--query", "0,5", "--facet", "query", "--layer", "0"],
            lambda c, f: similarity_case(out, c, f, 0, "query", (0, 5)))
        add(f"{model}_similarity_value", "similarity", model, ["--query", "5,0", "--facet", "value", "--layer", "-2"],
            lambda c, f: similarity_case(out, c, f, last - 1, "value", (5, 0)))
        add(f"{model}_norms", "norms", model, [], lambda c, f: norms_case(out, c, f))
    add("rep_vit_pca_foreground", "pca", "rep_vit", ["--layer", "0", "--pca-foreground", "otsu"],
        lambda c, f: pca_case(out, c, f, 0, "otsu"))
    add("rep_vit_pca_foreground_flip", "pca", "rep_vit", ["--pca-foreground", "0.45", "--pca-flip"],
        lambda c, f: pca_case(out, c, f, None, 0.45, True))
    add("rep_vit_norms_given", "norms", "rep_vit", ["--norm-threshold", "9.5"],
        lambda c, f: norms_case(out, c, f, 9.5))
    add("rep_swin_pca", "pca", "rep_swin", [], lambda c, f: pca_case(out, c, f, None))
    add("rep_swin_pca_layer2", "pca", "rep_swin", ["--layer", "2"], lambda c, f: pca_case(out, c, f, 2))
    add("rep_swin_similarity_key_shifted", "similarity", "rep_swin", ["--query", "5,7", "--layer", "3"],
        lambda c, f: similarity_case(out, c, f, 3, "key", (5, 7)))
    add("rep_swin_similarity_token", "similarity", "rep_swin",
        ["--query", "6,2", "--facet", "token", "--layer", "4", "--image2", second("rep_swin")[0]],
        lambda c, f: similarity_case(out, c, f, 4, "token", (6, 2), second("rep_swin")[1]))
    add("rep_swin_norms", "norms", "rep_swin", [], lambda c, f: norms_case(out, c, f))

    with open(os.path.join(out, "cases.json"), "w") as fh:
        json.dump({"models": models, "mean": MEAN, "std": STD, "cases": cases, "math": math_cases(out)}, fh,
                  indent=1)


if __name__ == "__main__":
    main(sys.argv)
