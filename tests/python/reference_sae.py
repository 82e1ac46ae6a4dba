"""Independent float64 reference of the sparse autoencoders (SAEs) attnscope loads: a loader per on-disk
format and encode / decode following each library's own code. Written from the libraries' source at:

  saev                 OSU-NLP-Group/saev @ 3d73f1f7122738563404e4c50a98d897aa18a7d0
                       src/saev/nn/modeling.py (dump, load, SparseAutoencoder.encode/decode,
                       ReluActivation, TopKActivation, BatchTopKActivation), src/saev/helpers.py (jdump)
  ViT-Prisma           Prisma-Multimodal/ViT-Prisma @ aa5ff6ad7c2d596fb78b473a6e33f39d6b872063
                       src/vit_prisma/sae/sae.py (SparseAutoencoder.__init__ normalisation,
                       load_from_pretrained, StandardSparseAutoencoder, GatedSparseAutoencoder, TopK,
                       get_activation_fn), src/vit_prisma/sae/config.py (VisionModelSAERunnerConfig)
  SAELens              jbloomAus/SAELens (decoderesearch/SAELens) @ 91ca16ccd0684e4dd6323cd4f23ded734339ec54
                       (v6.18.0): sae_lens/saes/{sae,standard_sae,topk_sae,jumprelu_sae,gated_sae}.py,
                       sae_lens/loading/pretrained_sae_loaders.py (sae_lens_disk_loader,
                       read_sae_components_from_disk, handle_config_defaulting, handle_pre_6_0_config);
                       v5 cfg layout from tag v5.11.0 sae_lens/sae.py
  dictionary_learning  saprmarks/dictionary_learning @ 60ec6bf5264944d64a4ca271f45a29ebfb9d4946
                       dictionary_learning/dictionary.py (AutoEncoder incl. from_pretrained's
                       normalize_decoder, GatedAutoEncoder, JumpReluAutoEncoder),
                       trainers/top_k.py (AutoEncoderTopK), trainers/batch_top_k.py (BatchTopKSAE),
                       trainers/matryoshka_batch_top_k.py (MatryoshkaBatchTopKSAE), utils.py (load_dictionary)

Format details and the quoted source are in the notes that came with this file (sae_formats.md).

API
  load(path, fmt=None, norm_scaling_factor=None) -> SAE   (fmt guessed from the files when None)
  build(fmt, config, tensors, norm_scaling_factor=None) -> SAE   (same, from in-memory parts)
  encode(sae, x) -> (features, ctx)      x: [N, d_in] (any float dtype; computed in float64)
  decode(sae, features, ctx=None) -> x_hat   (ctx = encode's, needed for the runtime normalisations)
  forward(sae, x) -> (features, x_hat)
  pre_activations(sae, x) -> {name: tensor}   the quantities whose sign / order decides sparsity

Inference semantics chosen where a library has several modes: saev BatchTopK in eval mode (threshold);
dictionary_learning BatchTopKSAE / Matryoshka with use_threshold=True (their default); AutoEncoder as
from_pretrained / load_dictionary return it (normalize_decoder=True); SAELens as SAE.load_from_disk
returns it (expected_average_only_in = identity unless norm_scaling_factor is given, which is then folded
as SAE.from_pretrained does).
"""

import io
import json
import os

import torch

import safetensors_io

F64 = torch.float64


class SAE:
    """fmt: saev | prisma | saelens | dictionary_learning; arch: the library's architecture name;
    t: {name: float64 tensor} (library key names); cfg: the parsed config dict; plus derived settings."""

    def __init__(self, fmt, arch, cfg, tensors, **kw):
        self.fmt = fmt
        self.arch = arch
        self.cfg = cfg
        self.raw = tensors
        self.t = {k: v.detach().to(F64) if v.is_floating_point() else v for k, v in tensors.items()}
        self.__dict__.update(kw)

    def __repr__(self):
        return f"SAE({self.fmt}, {self.arch}, d_in={self.d_in}, d_sae={self.d_sae})"


# ----------------------------------------------------------------------------------------------- loading

def _torch_load(path_or_buffer):
    # weights_only=True: plain tensors / OrderedDict / primitives only (a pickled config object raises).
    return torch.load(path_or_buffer, map_location="cpu", weights_only=True)


def load(path, fmt=None, norm_scaling_factor=None):
    if fmt is None:
        fmt = detect_format(path)
    if fmt == "saev":
        return load_saev(path)
    if fmt == "prisma":
        return load_prisma(path)
    if fmt == "saelens":
        return load_saelens(path, norm_scaling_factor=norm_scaling_factor)
    if fmt == "dictionary_learning":
        return load_dictionary_learning(path)
    raise ValueError(f"unknown format {fmt}")


def detect_format(path):
    if os.path.isfile(path):
        with open(path, "rb") as f:
            first = f.read(1)
        if first == b"{":
            return "saev"
        return "prisma"
    names = set(os.listdir(path))
    if "cfg.json" in names and "sae_weights.safetensors" in names:
        return "saelens"
    if "ae.pt" in names:
        return "dictionary_learning"
    if "config.json" in names:
        return "prisma"
    raise ValueError(f"cannot tell the SAE format of {path}")


# saev ---------------------------------------------------------------------------------------------------

def read_saev_file(path):
    """(header dict, state dict): one JSON line, then torch.save's zip (offsets relative to its start)."""
    with open(path, "rb") as fd:
        header = json.loads(fd.readline())
        buffer = io.BytesIO(fd.read())
    return header, _torch_load(buffer)


def saev_activation(header):
    """(activation class name, top_k or None), following modeling.load's schema branches."""
    if "schema" not in header:
        return "Relu", None
    if header["schema"] == 1:
        cls_name = header.get("cls", "SparseAutoencoderConfig")
        if cls_name in ("Relu", "TopK", "BatchTopK"):
            top_k = header["cfg"].get("top_k", 32) if cls_name != "Relu" else None
            return cls_name, top_k
    if header["schema"] not in (1, 2, 3, 4, 5):
        raise ValueError(f"Unknown schema version: {header['schema']}")
    act = header["cfg"]["activation"]
    cls_name = act["cls"]
    params = act.get("params", {})
    top_k = params.get("top_k", 32) if cls_name in ("TopK", "BatchTopK") else None
    return cls_name, top_k


def load_saev(path):
    header, sd = read_saev_file(path)
    return build("saev", header, sd)


# Prisma ------------------------------------------------------------------------------------------------

def prisma_weights_file(folder):
    names = sorted(os.listdir(folder))
    if "weights.pt" in names:
        return os.path.join(folder, "weights.pt")
    pts = [n for n in names if n.endswith(".pt") and "log_feature_sparsity" not in n]
    if len(pts) != 1:
        raise ValueError(f"{folder}: expected one weights .pt, found {pts}")
    return os.path.join(folder, pts[0])


def load_prisma(path):
    weights = prisma_weights_file(path) if os.path.isdir(path) else path
    folder = os.path.dirname(weights)
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    sd = _torch_load(weights)
    if isinstance(sd, dict) and "cfg" in sd and "state_dict" in sd:  # only reachable without objects
        sd = sd["state_dict"]
    return build("prisma", cfg, sd)


# SAELens -----------------------------------------------------------------------------------------------

def _version_tuple(v):
    out = []
    for part in str(v).replace("-", ".").split("."):
        num = "".join(ch for ch in part if ch.isdigit())
        if not num:
            break
        out.append(int(num))
    return tuple(out)


def saelens_normalised_config(cfg):
    """handle_config_defaulting + handle_pre_6_0_config: a v6-shaped dict (architecture, d_in, d_sae,
    apply_b_dec_to_input, normalize_activations, k, rescale_acts_by_decoder_norm, metadata.hook_name)."""
    version = cfg.get("sae_lens_version") or (cfg.get("metadata") or {}).get("sae_lens_version")
    if version and _version_tuple(version) >= (6, 0, 0):
        out = dict(cfg)
        out.setdefault("apply_b_dec_to_input", True)
        out.setdefault("normalize_activations", "none")
        out.setdefault("metadata", {})
        return out
    rename = {"hook_point": "hook_name", "hook_point_head_index": "hook_head_index",
              "activation_fn_str": "activation_fn"}
    new = {rename.get(k, k): v for k, v in cfg.items()}
    new.setdefault("apply_b_dec_to_input", True)
    new.setdefault("finetuning_scaling_factor", False)
    new.setdefault("activation_fn", new.get("activation_fn", "relu"))
    new.setdefault("architecture", "standard")
    if new.get("activation_fn") == "topk" and (new.get("activation_fn_kwargs") or {}).get("k") is not None:
        new["architecture"] = "topk"
        new["k"] = new["activation_fn_kwargs"]["k"]
    if isinstance(new.get("normalize_activations"), bool):
        new["normalize_activations"] = "expected_average_only_in" if new["normalize_activations"] else "none"
    if new.get("normalize_activations") is None:
        new["normalize_activations"] = "none"
    new["metadata"] = {k: new[k] for k in ("model_name", "hook_name", "hook_head_index", "context_size",
                                           "prepend_bos", "sae_lens_training_version") if k in new}
    return new


def load_saelens(folder, norm_scaling_factor=None):
    with open(os.path.join(folder, "cfg.json")) as f:
        cfg = json.load(f)
    sd = safetensors_io.load_file(os.path.join(folder, "sae_weights.safetensors"))
    return build("saelens", cfg, sd, norm_scaling_factor=norm_scaling_factor)


# dictionary_learning ------------------------------------------------------------------------------------

def load_dictionary_learning(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    sd = _torch_load(os.path.join(folder, "ae.pt"))
    return build("dictionary_learning", cfg, sd)


# build --------------------------------------------------------------------------------------------------

def build(fmt, config, tensors, norm_scaling_factor=None):
    tensors = {k: (v if isinstance(v, torch.Tensor) else torch.as_tensor(v)) for k, v in tensors.items()}
    if fmt == "saev":
        cls_name, top_k = saev_activation(config)
        d_sae, d_in = tensors["W_dec"].shape
        thr = float(tensors["activation.threshold"]) if cls_name == "BatchTopK" else None
        return SAE("saev", cls_name, config, tensors, d_in=d_in, d_sae=d_sae, k=top_k, threshold=thr)

    if fmt == "prisma":
        arch = config.get("architecture", "standard")
        if config.get("is_transcoder"):
            raise ValueError("Prisma transcoder, not an SAE")
        if arch not in ("standard", "gated"):
            raise ValueError(f"Unsupported architecture type: {arch}")
        act = config.get("activation_fn_str", "topk")
        kwargs = config.get("activation_fn_kwargs") or {}
        k = kwargs.get("k", 64) if act == "topk" else None
        if act == "topk" and "k" not in kwargs:
            raise ValueError("TopK activation function requires a k value.")
        d_sae, d_in = tensors["W_dec"].shape
        hook = f"blocks.{config.get('hook_point_layer', 9)}.{config.get('layer_subtype', 'ln2.hook_normalized')}"
        return SAE("prisma", arch, config, tensors, d_in=d_in, d_sae=d_sae, activation=act, k=k,
                   normalize=config.get("normalize_activations", "layer_norm"), hook=hook)

    if fmt == "saelens":
        cfg = saelens_normalised_config(config)
        arch = cfg["architecture"]
        if arch not in ("standard", "topk", "jumprelu", "gated"):
            raise ValueError(f"unsupported SAELens architecture {arch}")
        tensors = dict(tensors)
        finetuning = None
        if "scaling_factor" in tensors:
            sf = tensors.pop("scaling_factor")
            if not torch.allclose(sf.float(), torch.ones_like(sf.float())):
                if not cfg.get("finetuning_scaling_factor"):
                    raise ValueError("Scaling factor is present but finetuning_scaling_factor is False.")
                finetuning = sf
        if finetuning is not None:
            tensors["finetuning_scaling_factor"] = finetuning
        norm = cfg.get("normalize_activations", "none")
        sae = SAE("saelens", arch, cfg, tensors, d_in=int(cfg["d_in"]), d_sae=int(cfg["d_sae"]),
                  k=cfg.get("k") if arch == "topk" else None,
                  rescale=bool(cfg.get("rescale_acts_by_decoder_norm", False)) if arch == "topk" else False,
                  apply_b_dec=bool(cfg.get("apply_b_dec_to_input", True)), normalize=norm,
                  hook=(cfg.get("metadata") or {}).get("hook_name"), norm_scaling_factor=None)
        if norm == "expected_average_only_in" and norm_scaling_factor is not None:
            # SAE.from_pretrained: fold_activation_norm_scaling_factor, then normalize_activations = "none"
            s = float(norm_scaling_factor)
            sae.t["W_enc"] = sae.t["W_enc"] * s
            sae.t["W_dec"] = sae.t["W_dec"] / s
            sae.t["b_dec"] = sae.t["b_dec"] / s
            sae.normalize = "none"
            sae.norm_scaling_factor = s
        return sae

    if fmt == "dictionary_learning":
        trainer = config["trainer"]
        cls = trainer["dict_class"]
        sae = SAE("dictionary_learning", cls, config, tensors, d_in=int(trainer["activation_dim"]),
                  d_sae=int(trainer["dict_size"]), k=None, threshold=None,
                  hook=trainer.get("submodule_name"), layer=trainer.get("layer"))
        if cls in ("AutoEncoderTopK", "BatchTopKSAE", "MatryoshkaBatchTopKSAE"):
            k = trainer.get("k")
            if k is None:
                k = int(tensors["k"])
            elif "k" in tensors and int(k) != int(tensors["k"]):
                raise ValueError(f"k={k} != {int(tensors['k'])}=state_dict['k']")
            sae.k = int(k)
            sae.threshold = float(tensors["threshold"])
        if cls == "AutoEncoder":
            # from_pretrained(normalize_decoder=True): fold decoder column norms into the encoder,
            # skipped when the (stored-dtype) norms are allclose to 1.
            norms_stored = torch.norm(tensors["decoder.weight"], dim=0)
            if not torch.allclose(norms_stored, torch.ones_like(norms_stored)):
                norms = torch.norm(sae.t["decoder.weight"], dim=0)
                sae.t["decoder.weight"] = sae.t["decoder.weight"] / norms
                sae.t["encoder.weight"] = sae.t["encoder.weight"] * norms[:, None]
                sae.t["encoder.bias"] = sae.t["encoder.bias"] * norms
        if cls == "MatryoshkaBatchTopKSAE":
            sae.group_sizes = [int(v) for v in tensors["group_sizes"]]
        if cls not in ("AutoEncoder", "AutoEncoderTopK", "BatchTopKSAE", "MatryoshkaBatchTopKSAE",
                       "JumpReluAutoEncoder", "GatedAutoEncoder", "AutoEncoderNew"):
            raise ValueError(f"Dictionary class {cls} not supported")
        return sae

    raise ValueError(f"unknown format {fmt}")


# ------------------------------------------------------------------------------------ encode / decode

def _topk_mask(h, k):
    """1 at the k largest entries of each row (torch.topk's choice; fixtures avoid ties)."""
    k = min(int(k), h.shape[-1])
    idx = torch.topk(h, k, dim=-1).indices
    return torch.zeros_like(h).scatter(-1, idx, 1.0)


def _norm_in(mode, x, d_in):
    """SAELens/Prisma run_time_activation_norm_fn_in; returns (normalised x, ctx for the way out)."""
    if mode == "constant_norm_rescale":
        coeff = (d_in ** 0.5) / x.norm(dim=-1, keepdim=True)
        return x * coeff, ("constant_norm_rescale", coeff)
    if mode == "layer_norm":
        mu = x.mean(dim=-1, keepdim=True)
        xc = x - mu
        std = xc.std(dim=-1, keepdim=True)  # unbiased (torch default)
        return xc / (std + 1e-5), ("layer_norm", mu, std)
    return x, None


def _norm_out(ctx, y):
    if ctx is None:
        return y
    if ctx[0] == "constant_norm_rescale":
        return y / ctx[1]
    return y * ctx[2] + ctx[1]  # layer_norm: no eps on the way back


def pre_activations(sae, x):
    """The float64 quantities whose comparisons decide which features fire (for margin checks)."""
    x = torch.as_tensor(x).to(F64)
    t = sae.t
    if sae.fmt == "saev":
        return {"h": x @ t["W_enc"] + t["b_enc"]}
    if sae.fmt in ("prisma", "saelens"):
        xn, _ = _norm_in(sae.normalize, x, sae.d_in)
        b = t["b_dec"] if (sae.fmt == "prisma" or sae.apply_b_dec) else 0.0
        sae_in = xn - b
        if sae.arch == "gated":
            return {"gate": sae_in @ t["W_enc"] + t["b_gate"],
                    "mag": sae_in @ (t["W_enc"] * t["r_mag"].exp()) + t["b_mag"]}
        h = sae_in @ t["W_enc"] + t["b_enc"]
        if sae.fmt == "saelens" and sae.arch == "topk" and sae.rescale:
            h = h * t["W_dec"].norm(dim=-1)
        return {"h": h}
    cls = sae.arch
    if cls == "AutoEncoder":
        return {"h": (x - t["bias"]) @ t["encoder.weight"].T + t["encoder.bias"]}
    if cls in ("AutoEncoderTopK", "BatchTopKSAE"):
        return {"h": (x - t["b_dec"]) @ t["encoder.weight"].T + t["encoder.bias"]}
    if cls == "MatryoshkaBatchTopKSAE":
        return {"h": (x - t["b_dec"]) @ t["W_enc"] + t["b_enc"]}
    if cls == "JumpReluAutoEncoder":
        return {"h": x @ t["W_enc"] + t["b_enc"]}
    if cls == "GatedAutoEncoder":
        x_enc = (x - t["decoder_bias"]) @ t["encoder.weight"].T
        return {"gate": x_enc + t["gate_bias"], "mag": t["r_mag"].exp() * x_enc + t["mag_bias"]}
    if cls == "AutoEncoderNew":
        return {"h": x @ t["encoder.weight"].T + t["encoder.bias"]}
    raise ValueError(cls)


def encode(sae, x):
    """features [N, d_sae] float64, and the ctx decode needs (runtime normalisation statistics)."""
    x = torch.as_tensor(x).to(F64)
    t = sae.t
    relu = torch.relu

    if sae.fmt == "saev":
        h = x @ t["W_enc"] + t["b_enc"]  # no b_dec subtraction
        if sae.arch == "Relu":
            return relu(h), None
        if sae.arch == "TopK":
            return _topk_mask(h, sae.k) * h, None  # kept values as they are, no ReLU
        if sae.arch == "BatchTopK":  # eval mode
            thr = sae.threshold
            if thr <= 0:
                return torch.where(h > 0, h, torch.zeros_like(h)), None
            return torch.where(h > thr, h, torch.zeros_like(h)), None
        raise ValueError(f"Unknown activation class '{sae.arch}'")

    if sae.fmt in ("prisma", "saelens"):
        xn, ctx = _norm_in(sae.normalize, x, sae.d_in)
        b = t["b_dec"] if (sae.fmt == "prisma" or sae.apply_b_dec) else 0.0
        sae_in = xn - b
        if sae.arch == "gated":
            gate = ((sae_in @ t["W_enc"] + t["b_gate"]) > 0).to(F64)
            mag = sae_in @ (t["W_enc"] * t["r_mag"].exp()) + t["b_mag"]
            if sae.fmt == "prisma":
                mag = _prisma_act(sae, mag)
            else:
                mag = relu(mag)
            return gate * mag, ctx
        h = sae_in @ t["W_enc"] + t["b_enc"]
        if sae.fmt == "prisma":
            return _prisma_act(sae, h), ctx
        if sae.arch == "standard":
            return relu(h), ctx
        if sae.arch == "topk":
            if sae.rescale:
                h = h * t["W_dec"].norm(dim=-1)
            return _topk_mask(h, sae.k) * relu(h), ctx  # top-k of h, ReLU on the kept values
        if sae.arch == "jumprelu":
            return relu(h) * (h > t["threshold"]).to(F64), ctx
        raise ValueError(sae.arch)

    cls = sae.arch
    if cls == "AutoEncoder":
        return relu((x - t["bias"]) @ t["encoder.weight"].T + t["encoder.bias"]), None
    if cls == "AutoEncoderTopK":
        post = relu((x - t["b_dec"]) @ t["encoder.weight"].T + t["encoder.bias"])
        return _topk_mask(post, sae.k) * post, None  # ReLU first, then per-row top-k
    if cls in ("BatchTopKSAE", "MatryoshkaBatchTopKSAE"):
        if cls == "BatchTopKSAE":
            post = relu((x - t["b_dec"]) @ t["encoder.weight"].T + t["encoder.bias"])
        else:
            post = relu((x - t["b_dec"]) @ t["W_enc"] + t["b_enc"])
        return post * (post > sae.threshold).to(F64), None  # use_threshold=True
    if cls == "JumpReluAutoEncoder":
        pre = x @ t["W_enc"] + t["b_enc"]  # apply_b_dec_to_input = False for ae.pt
        return relu(pre * (pre > t["threshold"]).to(F64)), None
    if cls == "GatedAutoEncoder":
        x_enc = (x - t["decoder_bias"]) @ t["encoder.weight"].T
        f_gate = ((x_enc + t["gate_bias"]) > 0).to(F64)
        f_mag = relu(t["r_mag"].exp() * x_enc + t["mag_bias"])
        return f_gate * f_mag, None
    if cls == "AutoEncoderNew":
        return relu(x @ t["encoder.weight"].T + t["encoder.bias"]), None
    raise ValueError(cls)


def _prisma_act(sae, h):
    if sae.activation == "relu":
        return torch.relu(h)
    if sae.activation == "tanh-relu":
        return torch.tanh(torch.relu(h))
    if sae.activation == "topk":
        return _topk_mask(h, sae.k) * torch.relu(h)  # TopK(k, postact_fn=ReLU)
    raise ValueError(f"Unknown activation function: {sae.activation}")


def decode(sae, f, ctx=None):
    f = torch.as_tensor(f).to(F64)
    t = sae.t
    if sae.fmt == "saev":
        return f @ t["W_dec"] + t["b_dec"]  # last (only) prefix of the Matryoshka decode
    if sae.fmt == "prisma":
        return _norm_out(ctx, f @ t["W_dec"] + t["b_dec"])
    if sae.fmt == "saelens":
        if sae.arch == "topk" and sae.rescale:
            f = f / t["W_dec"].norm(dim=-1)
        if "finetuning_scaling_factor" in t:  # SAELens v5 only
            f = f * t["finetuning_scaling_factor"]
        return _norm_out(ctx, f @ t["W_dec"] + t["b_dec"])
    cls = sae.arch
    if cls == "AutoEncoder":
        return f @ t["decoder.weight"].T + t["bias"]
    if cls in ("AutoEncoderTopK", "BatchTopKSAE"):
        return f @ t["decoder.weight"].T + t["b_dec"]
    if cls in ("MatryoshkaBatchTopKSAE", "JumpReluAutoEncoder"):
        return f @ t["W_dec"] + t["b_dec"]
    if cls == "GatedAutoEncoder":
        return f @ t["decoder.weight"].T + t["decoder_bias"]
    if cls == "AutoEncoderNew":
        return f @ t["decoder.weight"].T + t["decoder.bias"]
    raise ValueError(cls)


def forward(sae, x):
    f, ctx = encode(sae, x)
    return f, decode(sae, f, ctx)
