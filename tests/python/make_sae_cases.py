#!/usr/bin/python3
"""Generate attnscope's sparse-autoencoder (SAE) loading cases: tiny random SAEs written exactly as four
libraries save them, with inputs and the libraries' outputs computed in float64 by reference_sae.py
(written from each library's source; see its docstring for repos, commits and files).

Usage: /usr/bin/python3 tests/python/make_sae_cases.py OUTDIR ->
  OUTDIR/<case>/  the SAE as its library saves it:
      saev                 sae.pt  (one compact JSON header line + torch.save'd state dict)
      prisma               weights.pt (plain state dict) + config.json (VisionModelSAERunnerConfig.save_config)
      saelens              cfg.json + sae_weights.safetensors (v6 layout; one case in the flat v5 layout)
      dictionary_learning  ae.pt + config.json ({"trainer": {...}, "buffer": {...}})
    x.npy               float32 [20, d_in]   activations
    features.npy        float32 [20, d_sae]  the library's encode(x)
    reconstruction.npy  float32 [20, d_in]   decode(encode(x)), with the library's de-normalisation
    (saelens_expected_average also features_folded.npy / reconstruction_folded.npy: the outputs once the
     norm_scaling_factor given in cases.json is folded in, as SAE.from_pretrained does)
  OUTDIR/hostile/legacy_pickled_config.pt          Prisma trainer checkpoint: {"cfg": <pickled
      vit_prisma.sae.config.VisionModelSAERunnerConfig object>, "state_dict": {...}}
  OUTDIR/hostile/legacy_saelens_pickled_config.pt  old SAELens: {"cfg": <pickled
      sae_lens.training.config.LanguageModelSAERunnerConfig>, "state_dict": {...}}
  OUTDIR/cases.json: list of {name, format, open, architecture, activation, d_in, d_sae, hook, k,
      normalisation, ...}; "open" is relative to the case folder.

Biases are set so that 10-35% of the features fire on x, with every firing decision (threshold, gate,
k-th vs (k+1)-th value) at least MARGIN away from its boundary, so float32 and float64 agree.
"""

import collections
import json
import math
import os
import sys
import time
import types

import debian_torch  # noqa: F401  (first: runs the script under Debian's python3-torch)
import numpy as np
import torch

import reference_sae as ref
import safetensors_io
from fixture_tools import Init, output_folder, write_cases

N = 20
MARGIN = 1e-4
MODEL = "open-clip:laion/CLIP-ViT-B-32-DataComp.XL-s13B-b90K"
LAYER = 1
HOOK = f"blocks.{LAYER}.hook_resid_post"


# --------------------------------------------------------------------------------------------- helpers

def activations(init, d_in):
    """Residual-stream-like rows: a shared mean direction plus per-dimension noise."""
    mean = init.normal((d_in,), 0.7)
    scale = init.uniform((d_in,), 0.6, 1.4)
    return mean + init.normal((N, d_in), 1.0) * scale


def decoder_rows(init, d_sae, d_in, unit=True):
    w = init.normal((d_sae, d_in), 1.0)
    w = w / w.norm(dim=1, keepdim=True)
    if not unit:
        w = w * init.uniform((d_sae, 1), 0.5, 1.6)
    return w


def encoder_from(init, w_dec, noise=0.3):
    """[d_in, d_sae]: the decoder's transpose plus noise, as trained SAEs roughly are."""
    w = w_dec.T * 1.2 + init.normal(tuple(w_dec.T.shape), noise / math.sqrt(w_dec.shape[1]))
    return w.contiguous()  # row-major; the writers choose each library's layout


def firing_bias(init, h0, boundary=0.0, lo=0.10, hi=0.35):
    """Per-feature bias b such that h0 + b > boundary for 10-35% of the rows, with the boundary halfway
    between two consecutive values of h0 (the largest possible distance to it)."""
    n, d = h0.shape
    s = torch.sort(h0, dim=0, descending=True).values
    fire = torch.clamp((init.uniform((d,), lo, hi) * n).round().long(), 1, n - 1)
    cols = torch.arange(d)
    mid = 0.5 * (s[fire - 1, cols] + s[fire, cols])
    return boundary - mid


def topk_gap(h, k):
    s = torch.sort(h, dim=-1, descending=True).values
    return float((s[:, k - 1] - s[:, k]).min())


def check_margins(name, sae, x, kind):
    """Every firing decision at least MARGIN from its boundary (kind: what decides firing)."""
    pre = ref.pre_activations(sae, x)
    if kind == "relu":
        return
    if kind == "threshold":
        thr = sae.threshold if sae.threshold is not None else sae.t["threshold"]
        m = float((pre["h"] - thr).abs().min())
    elif kind == "jumprelu":
        m = float((pre["h"] - sae.t["threshold"]).abs().min())
    elif kind == "gate":
        m = float(pre["gate"].abs().min())
    elif kind == "topk":
        m = topk_gap(pre["h"], sae.k)
    elif kind == "topk_post_relu":
        post = torch.relu(pre["h"])
        s = torch.sort(post, dim=-1, descending=True).values
        gaps = s[:, sae.k - 1] - s[:, sae.k]
        m = float(gaps[s[:, sae.k - 1] > 0].min())
    else:
        raise ValueError(kind)
    if not m > MARGIN:
        raise AssertionError(f"{name}: decision margin {m:.3g} <= {MARGIN}")


def save_outputs(folder, x, sae, suffix=""):
    f, x_hat = ref.forward(sae, x)
    if not suffix:
        np.save(os.path.join(folder, "x.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(folder, f"features{suffix}.npy"), f.numpy().astype(np.float32))
    np.save(os.path.join(folder, f"reconstruction{suffix}.npy"), x_hat.numpy().astype(np.float32))
    return float((f > 0).double().mean())


def f32(sd):
    """float32 copies that keep each tensor's strides (torch.save stores them)."""
    return collections.OrderedDict((k, v.to(torch.float32) if v.is_floating_point() else v) for k, v in sd.items())


def transposed_storage(t):
    """Same values, column-major storage (strides (1, rows)): the layout of a parameter made as
    `other.T.clone()` / `w.clone().T`, which training keeps and torch.save writes as it is."""
    return t.T.contiguous().T


def module_state_dict(tensors, children=()):
    """tensors as nn.Module.state_dict() returns them: an OrderedDict that also carries `_metadata`
    ({module path: {"version": 1}}, pickled as the OrderedDict's BUILD state), children in order."""
    root = torch.nn.Module()

    def get(path):
        m = root
        for part in path:
            if part not in m._modules:
                m.add_module(part, torch.nn.Module())
            m = m._modules[part]
        return m

    for name in children:
        get(name.split("."))
    for key, t in tensors.items():
        *path, leaf = key.split(".")
        get(path).register_buffer(leaf, t)  # a buffer and a parameter serialise alike in a state dict
    return root.state_dict()


# ------------------------------------------------------------------------------------------------ saev

SAEV_AUX = {"cls": "AuxK", "params": {"key": "auxk", "k_aux": 512, "alpha": 1 / 32}}
SAEV_NO_SPARSITY = {"cls": "NoSparsity", "params": {"key": "no-sparsity"}}


def saev_header(d_in, d_sae, activation):
    if activation[0] == "Relu":
        l1 = {"cls": "L1Sparsity", "params": {"key": "l1-sparsity", "coeff": 0.0004}}
        act = {"cls": "Relu", "params": {"key": "relu", "sparsity": l1,
                                         "aux": {"cls": "NoAux", "params": {"key": "no-aux"}}}}
    elif activation[0] == "TopK":
        act = {"cls": "TopK", "params": {"key": "top-k", "top_k": activation[1], "sparsity": SAEV_NO_SPARSITY,
                                         "aux": SAEV_AUX}}
    else:
        act = {"cls": "BatchTopK", "params": {"key": "batch-top-k", "top_k": activation[1],
                                              "sparsity": SAEV_NO_SPARSITY, "momentum": 0.1, "aux": SAEV_AUX}}
    cfg = {"d_model": d_in, "d_sae": d_sae, "activation": act, "reinit_blend": 0.8,
           "reinit_enc_dec_tranpose": True, "remove_parallel_grads": True, "normalize_w_dec": True}
    return {"schema": 5, "cfg": cfg, "commit": "unknown", "lib": "0.1.0"}


def write_saev(folder, header, sd):
    # saev.nn.modeling.dump: helpers.jdump(header, fd, option=orjson.OPT_APPEND_NEWLINE) (compact JSON,
    # one line) then torch.save(sae.state_dict(), fd) into the same open file.
    with open(os.path.join(folder, "sae.pt"), "wb") as fd:
        fd.write(json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n")
        torch.save(sd, fd)


def make_saev(name, seed, d_in, d_sae, activation, out):
    init = Init(seed)
    x = activations(init, d_in)
    w_dec = decoder_rows(init, d_sae, d_in)
    w_enc = encoder_from(init, w_dec)
    b_dec = x.mean(0) * 0.5 + init.normal((d_in,), 0.05)
    h0 = x.double() @ w_enc.double()
    kind, k = activation
    thr = None
    if kind == "Relu":
        b_enc = firing_bias(init, h0)
    elif kind == "TopK":
        b_enc = init.normal((d_sae,), 0.3) - h0.mean(0)
    else:
        thr = 0.25
        b_enc = firing_bias(init, h0, boundary=thr)
    sd = collections.OrderedDict([("W_dec", w_dec), ("b_dec", b_dec), ("W_enc", transposed_storage(w_enc)),
                                  ("b_enc", b_enc)])
    if kind == "BatchTopK":
        sd["activation.threshold"] = torch.tensor(thr)
    sd = module_state_dict(f32(sd), children=["activation"])
    header = saev_header(d_in, d_sae, activation)
    sae = ref.build("saev", header, sd)
    check_margins(name, sae, x, {"Relu": "relu", "TopK": "topk", "BatchTopK": "threshold"}[kind])
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    write_saev(folder, header, sd)
    frac = save_outputs(folder, x, sae)
    return {"name": name, "format": "saev", "open": "sae.pt", "architecture": kind,
            "activation": {"Relu": "relu", "TopK": "topk", "BatchTopK": "batchtopk-threshold"}[kind],
            "d_in": d_in, "d_sae": d_sae, "hook": None, "k": k, "normalisation": "none",
            "threshold": thr, "fraction_firing": round(frac, 4)}


# ---------------------------------------------------------------------------------------------- Prisma

PRISMA_FIELDS = [  # VisionModelSAERunnerConfig dataclass fields, in order (save_config = asdict + _dtype/_device)
    "model_class_name", "model_name", "vit_model_cfg", "model_path", "hook_point_layer", "layer_subtype",
    "hook_point_head_index", "context_size", "use_cached_activations", "use_patches_only",
    "cached_activations_path", "image_size", "architecture", "b_dec_init_method", "expansion_factor",
    "from_pretrained_path", "is_transcoder", "transcoder_with_skip_connection", "out_hook_point_layer",
    "layer_out_subtype", "d_out", "_device", "seed", "_dtype", "d_in", "activation_fn_str",
    "activation_fn_kwargs", "cls_token_only", "max_grad_norm", "initialization_method",
    "normalize_activations", "n_batches_in_buffer", "store_batch_size", "num_workers", "num_epochs",
    "verbose", "l1_coefficient", "lp_norm", "lr", "lr_scheduler_name", "lr_warm_up_steps",
    "train_batch_size", "dataset_name", "dataset_path", "dataset_train_path", "dataset_val_path",
    "use_ghost_grads", "feature_sampling_window", "dead_feature_window", "dead_feature_threshold",
    "log_to_wandb", "wandb_project", "wandb_entity", "wandb_log_frequency", "n_validation_runs",
    "n_checkpoints", "checkpoint_path"]


def prisma_config(d_in, expansion, architecture, act, act_kwargs, normalize):
    dataset_path = "/network/scratch/s/sonia.joseph/datasets/kaggle_datasets"
    hook_point = f"blocks.{LAYER}.hook_resid_post"
    values = {
        "model_class_name": "HookedViT", "model_name": MODEL, "vit_model_cfg": None, "model_path": None,
        "hook_point_layer": LAYER, "layer_subtype": "hook_resid_post", "hook_point_head_index": None,
        "context_size": 50, "use_cached_activations": False, "use_patches_only": False,
        "cached_activations_path":
            f"activations/{dataset_path.replace('/', '_')}/{MODEL.replace('/', '_')}/{hook_point}",
        "image_size": 224, "architecture": architecture, "b_dec_init_method": "geometric_median",
        "expansion_factor": expansion, "from_pretrained_path": None, "is_transcoder": False,
        "transcoder_with_skip_connection": True, "out_hook_point_layer": 9, "layer_out_subtype": "hook_mlp_out",
        "d_out": 768, "_device": "cuda", "seed": 42, "_dtype": "float32", "d_in": d_in,
        "activation_fn_str": act, "activation_fn_kwargs": act_kwargs, "cls_token_only": False,
        "max_grad_norm": 1.0, "initialization_method": "encoder_transpose_decoder",
        "normalize_activations": normalize, "n_batches_in_buffer": 20, "store_batch_size": 32,
        "num_workers": 16, "num_epochs": 10, "verbose": False, "l1_coefficient": 1e-05, "lp_norm": 1,
        "lr": 0.0004, "lr_scheduler_name": "cosineannealingwarmup", "lr_warm_up_steps": 200,
        "train_batch_size": 4096, "dataset_name": "imagenet1k", "dataset_path": dataset_path,
        "dataset_train_path": dataset_path + "/ILSVRC/Data/CLS-LOC/train",
        "dataset_val_path": dataset_path + "/ILSVRC/Data/CLS-LOC/val", "use_ghost_grads": False,
        "feature_sampling_window": 1000, "dead_feature_window": 5000, "dead_feature_threshold": 1e-08,
        "log_to_wandb": True, "wandb_project": "clip_b_sae", "wandb_entity": None,
        "wandb_log_frequency": 100, "n_validation_runs": 0, "n_checkpoints": 10,
        "checkpoint_path": "/network/scratch/s/sonia.joseph/checkpoints/clip-b"}
    return {k: values[k] for k in PRISMA_FIELDS}


def prisma_state(init, x, d_in, d_sae, architecture, act, act_kwargs, normalize, transpose_init=False):
    cfg = prisma_config(d_in, d_sae // d_in, architecture, act, act_kwargs, normalize)
    cfg["initialization_method"] = "encoder_transpose_decoder" if transpose_init else "independent"
    w_dec = decoder_rows(init, d_sae, d_in)
    w_enc = encoder_from(init, w_dec)
    xn, _ = ref._norm_in(normalize, x.double(), d_in)
    b_dec = (xn.mean(0) + init.normal((d_in,), 0.05).double()).float()
    zeros = torch.zeros(d_sae)
    if architecture == "standard":
        sd = collections.OrderedDict([("W_dec", w_dec), ("W_enc", w_enc), ("b_enc", zeros), ("b_dec", b_dec)])
        h0 = ref.pre_activations(ref.build("prisma", cfg, sd), x)["h"]
        if act == "topk":
            sd["b_enc"] = (init.normal((d_sae,), 0.3) - h0.mean(0)).float()
        else:
            sd["b_enc"] = firing_bias(init, h0).float()
    else:
        r_mag = init.uniform((d_sae,), -0.3, 0.3)
        sd = collections.OrderedDict([("W_enc", w_enc), ("b_gate", zeros), ("r_mag", r_mag),
                                      ("b_mag", init.uniform((d_sae,), 0.05, 0.4)), ("W_dec", w_dec),
                                      ("b_enc", init.normal((d_sae,), 0.1)), ("b_dec", b_dec)])
        gate0 = ref.pre_activations(ref.build("prisma", cfg, sd), x)["gate"]
        sd["b_gate"] = firing_bias(init, gate0).float()
    if transpose_init:  # W_enc = nn.Parameter(self.W_dec.data.t().clone()): column-major storage
        sd["W_enc"] = transposed_storage(sd["W_enc"])
    children = ["hook_sae_in", "hook_hidden_pre", "hook_hidden_post", "hook_sae_out", "activation_fn"]
    if act == "topk":
        children.append("activation_fn.postact_fn")
    return cfg, module_state_dict(f32(sd), children)


def make_prisma(name, seed, d_in, d_sae, architecture, act, act_kwargs, normalize, out, transpose_init=False):
    init = Init(seed)
    x = activations(init, d_in)
    cfg, sd = prisma_state(init, x, d_in, d_sae, architecture, act, act_kwargs, normalize, transpose_init)
    sae = ref.build("prisma", cfg, sd)
    check_margins(name, sae, x, "gate" if architecture == "gated" else ("topk" if act == "topk" else "relu"))
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    torch.save(sd, os.path.join(folder, "weights.pt"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=4)  # save_config
    frac = save_outputs(folder, x, sae)
    return {"name": name, "format": "prisma", "open": ".", "architecture": architecture,
            "activation": "gated" if architecture == "gated" else act, "d_in": d_in, "d_sae": d_sae,
            "hook": f"blocks.{cfg['hook_point_layer']}.{cfg['layer_subtype']}",
            "k": act_kwargs.get("k") if act == "topk" else None, "normalisation": normalize,
            "weights": "weights.pt", "fraction_firing": round(frac, 4)}


# --------------------------------------------------------------------------------------------- SAELens

def saelens_v6_config(d_in, d_sae, architecture, apply_b_dec, normalize, extra=None):
    cfg = {"d_in": d_in, "d_sae": d_sae, "dtype": "float32", "device": "cpu",
           "apply_b_dec_to_input": apply_b_dec, "normalize_activations": normalize,
           "reshape_activations": "none",
           "metadata": {"sae_lens_version": "6.18.0", "sae_lens_training_version": "6.18.0",
                        "model_name": MODEL, "hook_name": HOOK, "hook_head_index": None,
                        "context_size": 50, "prepend_bos": False, "seqpos_slice": [None],
                        "model_from_pretrained_kwargs": {}}}
    cfg.update(extra or {})
    cfg["architecture"] = architecture
    return cfg


def saelens_v5_config(d_in, d_sae, k):
    """SAELens <= 5 flat layout of an older top-k SAE: architecture "standard" + activation_fn_str "topk"."""
    return {"architecture": "standard", "d_in": d_in, "d_sae": d_sae, "dtype": "float32", "device": "cpu",
            "model_name": MODEL, "hook_name": HOOK, "hook_layer": LAYER, "hook_head_index": None,
            "activation_fn_str": "topk", "activation_fn_kwargs": {"k": k}, "apply_b_dec_to_input": True,
            "finetuning_scaling_factor": False, "sae_lens_training_version": "3.19.1", "prepend_bos": False,
            "dataset_path": "imagenet-1k", "dataset_trust_remote_code": False, "context_size": 50,
            "normalize_activations": "none", "neuronpedia_id": None, "model_from_pretrained_kwargs": {},
            "seqpos_slice": [None]}


def make_saelens(name, seed, d_in, d_sae, architecture, out, apply_b_dec=True, normalize="none", k=None,
                 rescale=False, v5=False):
    init = Init(seed)
    x = activations(init, d_in)
    if v5:
        cfg = saelens_v5_config(d_in, d_sae, k)
    else:
        extra = {"k": k, "rescale_acts_by_decoder_norm": rescale} if architecture == "topk" else None
        cfg = saelens_v6_config(d_in, d_sae, architecture, apply_b_dec, normalize, extra)
    w_dec = decoder_rows(init, d_sae, d_in, unit=not rescale)
    w_enc = encoder_from(init, w_dec)
    xn, _ = ref._norm_in(normalize, x.double(), d_in)
    b_dec = (xn.mean(0) * (1.0 if apply_b_dec else 0.3) + init.normal((d_in,), 0.05).double()).float()
    zeros = torch.zeros(d_sae)
    if architecture == "gated":
        sd = collections.OrderedDict([("b_dec", b_dec), ("W_dec", w_dec), ("W_enc", w_enc), ("b_gate", zeros),
                                      ("r_mag", init.uniform((d_sae,), -0.3, 0.3)),
                                      ("b_mag", init.uniform((d_sae,), 0.05, 0.4))])
        gate0 = ref.pre_activations(ref.build("saelens", cfg, sd), x)["gate"]
        sd["b_gate"] = firing_bias(init, gate0).float()
        kind = "gate"
    else:
        sd = collections.OrderedDict([("b_dec", b_dec), ("W_dec", w_dec), ("W_enc", w_enc), ("b_enc", zeros)])
        if architecture == "jumprelu":
            sd["threshold"] = init.uniform((d_sae,), 0.1, 0.5)
        sae0 = ref.build("saelens", cfg, sd)
        h0 = ref.pre_activations(sae0, x)["h"]
        if architecture == "topk" or v5:
            scale = w_dec.double().norm(dim=-1) if rescale else 1.0
            sd["b_enc"] = ((init.normal((d_sae,), 0.3).double() - h0.mean(0)) / scale).float()
            kind = "topk"
        elif architecture == "jumprelu":
            sd["b_enc"] = firing_bias(init, h0, boundary=sd["threshold"].double()).float()
            kind = "jumprelu"
        else:
            sd["b_enc"] = firing_bias(init, h0).float()
            kind = "relu"
    sd = f32(sd)
    sae = ref.build("saelens", cfg, sd)
    check_margins(name, sae, x, kind)
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    safetensors_io.save_file(sd, os.path.join(folder, "sae_weights.safetensors"))
    with open(os.path.join(folder, "cfg.json"), "w") as f:
        json.dump(cfg, f)  # SAE.save_model
    frac = save_outputs(folder, x, sae)
    case = {"name": name, "format": "saelens", "open": ".",
            "architecture": ref.saelens_normalised_config(cfg)["architecture"],
            "activation": {"standard": "relu", "topk": "topk", "jumprelu": "jumprelu", "gated": "gated"}[
                ref.saelens_normalised_config(cfg)["architecture"]],
            "d_in": d_in, "d_sae": d_sae, "hook": HOOK, "k": k, "normalisation": normalize,
            "apply_b_dec_to_input": apply_b_dec, "cfg_layout": "v5" if v5 else "v6",
            "fraction_firing": round(frac, 4)}
    if architecture == "topk":
        case["rescale_acts_by_decoder_norm"] = rescale
    if normalize == "expected_average_only_in":
        # ActivationScaler.estimate_scaling_factor: sqrt(d_in) / mean L2 norm of the training activations
        s = float(math.sqrt(d_in) / x.double().norm(dim=-1).mean())
        folded = ref.build("saelens", cfg, sd, norm_scaling_factor=s)
        check_margins(name + " (folded)", folded, x, kind)
        save_outputs(folder, x, folded, suffix="_folded")
        case["norm_scaling_factor"] = s
        case["note"] = ("features/reconstruction: SAE.load_from_disk (the module ignores "
                        "expected_average_only_in); *_folded: after fold_activation_norm_scaling_factor("
                        "norm_scaling_factor), as SAE.from_pretrained does with pretrained_saes.yaml's value")
    return case


# --------------------------------------------------------------------------------- dictionary_learning

def dl_config(cls, d_in, d_sae, k=None, extra=None):
    trainer_class = {"AutoEncoder": "StandardTrainer", "AutoEncoderTopK": "TopKTrainer",
                     "BatchTopKSAE": "BatchTopKTrainer", "JumpReluAutoEncoder": "JumpReluTrainer",
                     "GatedAutoEncoder": "GatedSAETrainer",
                     "MatryoshkaBatchTopKSAE": "MatryoshkaBatchTopKTrainer"}[cls]
    trainer = {"trainer_class": trainer_class, "dict_class": cls, "lr": 0.0003, "steps": 20000,
               "seed": 0, "activation_dim": d_in, "dict_size": d_sae}
    if k is not None:
        trainer["k"] = k
    trainer.update(extra or {})
    trainer.update({"device": "cuda:0", "layer": LAYER, "lm_name": "facebook/dinov2-small",
                    "wandb_name": f"{trainer_class}-dinov2-small-resid_post_layer_{LAYER}_trainer_0",
                    "submodule_name": f"resid_post_layer_{LAYER}"})
    buffer = {"d_submodule": d_in, "io": "out", "n_ctxs": 3000, "ctx_len": 257, "refresh_batch_size": 32,
              "out_batch_size": 4096, "device": "cuda:0"}
    return {"trainer": trainer, "buffer": buffer}


def make_dl(name, seed, d_in, d_sae, cls, out, k=None):
    init = Init(seed)
    x = activations(init, d_in)
    xd = x.double()
    w_dec = decoder_rows(init, d_sae, d_in, unit=(cls != "AutoEncoder"))  # [d_sae, d_in]
    w_enc = encoder_from(init, w_dec)  # [d_in, d_sae]
    b_dec = (x.mean(0) + init.normal((d_in,), 0.05)).float()
    extra = None
    if cls == "AutoEncoder":
        h0 = (xd - b_dec.double()) @ w_enc.double()
        sd = {"bias": b_dec, "encoder.weight": w_enc.T, "encoder.bias": firing_bias(init, h0).float(),
              "decoder.weight": w_dec.T}
        extra = {"l1_penalty": 0.04, "warmup_steps": 1000, "resample_steps": None,
                 "sparsity_warmup_steps": 2000, "decay_start": None}
        kind = "relu"
    elif cls in ("AutoEncoderTopK", "BatchTopKSAE"):
        h0 = (xd - b_dec.double()) @ w_enc.double()
        thr = 0.3
        if cls == "AutoEncoderTopK":
            b_enc = (init.normal((d_sae,), 0.3).double() - h0.mean(0)).float()
            thr_stored = torch.tensor(0.2)
            kind = "topk_post_relu"
        else:
            b_enc = firing_bias(init, h0, boundary=thr).float()
            thr_stored = torch.tensor(thr)
            kind = "threshold"
        sd = {"b_dec": b_dec, "k": torch.tensor(k, dtype=torch.int), "threshold": thr_stored.float(),
              "decoder.weight": w_dec.T, "encoder.weight": w_enc.T, "encoder.bias": b_enc}
        extra = {"auxk_alpha": 1 / 32, "warmup_steps": 1000, "decay_start": None, "threshold_beta": 0.999,
                 "threshold_start_step": 1000}
        if cls == "BatchTopKSAE":
            extra["top_k_aux"] = d_in // 2
    elif cls == "MatryoshkaBatchTopKSAE":
        h0 = (xd - b_dec.double()) @ w_enc.double()
        thr = 0.3
        groups = [d_sae // 8, d_sae // 4, d_sae - d_sae // 8 - d_sae // 4]
        sd = {"W_enc": w_enc, "b_enc": firing_bias(init, h0, boundary=thr).float(), "W_dec": w_dec,
              "b_dec": b_dec, "k": torch.tensor(k, dtype=torch.int), "threshold": torch.tensor(thr).float(),
              "group_sizes": torch.tensor(groups)}
        extra = {"auxk_alpha": 1 / 32, "warmup_steps": 1000, "decay_start": None, "threshold_beta": 0.999,
                 "threshold_start_step": 1000, "top_k_aux": d_in // 2,
                 "group_fractions": [g / d_sae for g in groups], "group_weights": [1 / 3] * 3,
                 "group_sizes": groups}
        kind = "threshold"
    elif cls == "JumpReluAutoEncoder":
        h0 = xd @ w_enc.double()
        thr = init.uniform((d_sae,), 0.1, 0.5)
        sd = {"W_enc": w_enc, "b_enc": firing_bias(init, h0, boundary=thr.double()).float(), "W_dec": w_dec,
              "b_dec": b_dec, "threshold": thr}
        extra = {"bandwidth": 0.001, "sparsity_penalty": 1.0, "sparsity_warmup_steps": 2000, "target_l0": 20}
        kind = "jumprelu"
    elif cls == "GatedAutoEncoder":
        x_enc = (xd - b_dec.double()) @ w_enc.double()
        sd = {"decoder_bias": b_dec, "r_mag": init.uniform((d_sae,), -0.3, 0.3),
              "gate_bias": firing_bias(init, x_enc).float(), "mag_bias": init.uniform((d_sae,), 0.05, 0.4),
              "encoder.weight": w_enc.T, "decoder.weight": w_dec.T}
        extra = {"l1_penalty": 0.1, "warmup_steps": 1000, "sparsity_warmup_steps": 2000, "decay_start": None}
        kind = "gate"
    else:
        raise ValueError(cls)
    # encoder.weight = w.clone().T / decoder.weight.T.clone(); W_enc = W_dec.data.clone().T: column-major
    for key in ("encoder.weight", "W_enc"):
        if key in sd:
            sd[key] = transposed_storage(sd[key])
    if "decoder.weight" in sd:  # nn.Linear's own (row-major) weight, normalised in place
        sd["decoder.weight"] = sd["decoder.weight"].contiguous()
    # training.py saves {k: v.cpu() for k, v in ae.state_dict().items()}: a plain dict, strides kept
    sd = {key: (v.float() if v.is_floating_point() else v) for key, v in sd.items()}
    cfg = dl_config(cls, d_in, d_sae, k, extra)
    sae = ref.build("dictionary_learning", cfg, sd)
    check_margins(name, sae, x, kind)
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    torch.save(sd, os.path.join(folder, "ae.pt"))  # training.py: t.save({k: v.cpu() ...}, "ae.pt")
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=4)
    frac = save_outputs(folder, x, sae)
    case = {"name": name, "format": "dictionary_learning", "open": ".", "architecture": cls,
            "activation": {"AutoEncoder": "relu", "AutoEncoderTopK": "topk", "BatchTopKSAE": "batchtopk-threshold",
                           "MatryoshkaBatchTopKSAE": "batchtopk-threshold", "JumpReluAutoEncoder": "jumprelu",
                           "GatedAutoEncoder": "gated"}[cls],
            "d_in": d_in, "d_sae": d_sae, "hook": cfg["trainer"]["submodule_name"], "k": k,
            "normalisation": "none", "fraction_firing": round(frac, 4)}
    if cls in ("AutoEncoderTopK", "BatchTopKSAE", "MatryoshkaBatchTopKSAE"):
        case["threshold"] = float(sd["threshold"])
    if cls == "AutoEncoder":
        case["note"] = ("decoder columns are not unit norm: features follow from_pretrained(normalize_decoder="
                        "True), i.e. raw features times the decoder column norms")
    return case


# --------------------------------------------------------------------------------------------- hostile

def fake_class(module, name, fields):
    """A dataclass-like class that pickles as module.name (as the real library class would)."""
    parts = module.split(".")
    created = []
    for i in range(1, len(parts) + 1):
        mod_name = ".".join(parts[:i])
        if mod_name not in sys.modules:
            sys.modules[mod_name] = types.ModuleType(mod_name)
            created.append(mod_name)
    cls = type(name, (), {"__module__": module, "__qualname__": name})
    setattr(sys.modules[module], name, cls)
    obj = cls.__new__(cls)
    obj.__dict__.update(fields)
    return obj, created


def write_hostile(out):
    folder = os.path.join(out, "hostile")
    os.makedirs(folder, exist_ok=True)
    init = Init(9000)
    d_in, d_sae = 32, 64
    x = activations(init, d_in)
    cfg, sd = prisma_state(init, x, d_in, d_sae, "standard", "relu", {}, "none", transpose_init=True)
    created = []
    try:
        obj, created = fake_class("vit_prisma.sae.config", "VisionModelSAERunnerConfig", cfg)
        torch.save({"cfg": obj, "state_dict": sd}, os.path.join(folder, "legacy_pickled_config.pt"))
        lm_cfg = {"model_name": "gpt2-small", "hook_point": "blocks.1.hook_resid_pre", "hook_point_layer": 1,
                  "hook_point_head_index": None, "d_in": d_in, "expansion_factor": 2, "d_sae": d_sae,
                  "dataset_path": "Skylion007/openwebtext", "context_size": 128, "l1_coefficient": 0.001,
                  "lr": 0.0003, "device": "cuda", "dtype": "float32", "b_dec_init_method": "geometric_median"}
        obj2, more = fake_class("sae_lens.training.config", "LanguageModelSAERunnerConfig", lm_cfg)
        created += more
        sd2 = collections.OrderedDict([("W_enc", sd["W_enc"]), ("b_enc", sd["b_enc"]), ("W_dec", sd["W_dec"]),
                                       ("b_dec", sd["b_dec"])])
        torch.save({"cfg": obj2, "state_dict": sd2}, os.path.join(folder, "legacy_saelens_pickled_config.pt"))
    finally:
        for mod_name in reversed(created):
            del sys.modules[mod_name]


# ------------------------------------------------------------------------------------------------ main

def main(argv):
    out = output_folder(argv, __doc__)
    if out is None:
        return 2
    started = time.time()
    cases = [
        make_saev("saev_relu", 100, 32, 64, ("Relu", None), out),
        make_saev("saev_topk", 101, 32, 96, ("TopK", 8), out),
        make_saev("saev_batchtopk", 102, 32, 128, ("BatchTopK", 8), out),
        make_prisma("prisma_relu", 200, 32, 64, "standard", "relu", {}, "none", out, transpose_init=True),
        make_prisma("prisma_layer_norm", 201, 32, 64, "standard", "relu", {}, "layer_norm", out),
        make_prisma("prisma_constant_norm", 202, 32, 96, "standard", "relu", {}, "constant_norm_rescale", out),
        make_prisma("prisma_topk", 203, 32, 128, "standard", "topk", {"k": 8}, "none", out),
        make_prisma("prisma_gated", 204, 32, 64, "gated", "relu", {}, "none", out),
        make_saelens("saelens_standard", 300, 32, 64, "standard", out, apply_b_dec=True),
        make_saelens("saelens_standard_no_b_dec", 301, 32, 64, "standard", out, apply_b_dec=False),
        make_saelens("saelens_topk", 302, 32, 96, "topk", out, k=8),
        make_saelens("saelens_topk_rescale", 303, 32, 64, "topk", out, k=8, rescale=True),
        make_saelens("saelens_jumprelu", 304, 48, 96, "jumprelu", out),
        make_saelens("saelens_gated", 305, 32, 64, "gated", out),
        make_saelens("saelens_expected_average", 306, 32, 64, "standard", out, normalize="expected_average_only_in"),
        make_saelens("saelens_constant_norm", 307, 32, 64, "standard", out, normalize="constant_norm_rescale"),
        make_saelens("saelens_layer_norm", 308, 32, 64, "standard", out, normalize="layer_norm"),
        make_saelens("saelens_v5_topk", 309, 32, 64, "standard", out, k=8, v5=True),
        make_dl("dl_autoencoder", 400, 32, 64, "AutoEncoder", out),
        make_dl("dl_topk", 401, 32, 64, "AutoEncoderTopK", out, k=8),
        make_dl("dl_batchtopk", 402, 32, 96, "BatchTopKSAE", out, k=8),
        make_dl("dl_jumprelu", 403, 32, 64, "JumpReluAutoEncoder", out),
        make_dl("dl_gated", 404, 32, 64, "GatedAutoEncoder", out),
        make_dl("dl_matryoshka", 405, 32, 128, "MatryoshkaBatchTopKSAE", out, k=8),
    ]
    write_hostile(out)
    return write_cases(out, cases, started)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
