#!/usr/bin/env python3
"""Exports a PyTorch ViT-like model to a TorchScript file that attnscope loads (torch::jit::load).

The exported module's forward(images) takes a float32 [B, 3, H, W] batch, already normalised with
the stored mean/std, and returns a tuple (output [B, N], (attention_0, ..., attention_{L-1})) where
attention_i is the [B, heads, T, T] softmax probability tensor of the i-th attention call in forward
order. The file carries the extra file "attnscope.json" (see METADATA below); attnscope refuses
TorchScript files without it.

Run `export_torchscript.py --help` for what a model must satisfy.
"""
import argparse
import importlib.util
import json
import os
import re
import sys
import tempfile

try:
    import torch
except ImportError:  # e.g. a pyenv python3 first on PATH: Debian's python3-torch lives in /usr/bin/python3
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise
from torch import nn

FORMAT = "attnscope-torchscript"
VERSION = 1
METADATA_NAME = "attnscope.json"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CONTAINER_KEYS = ("model", "model_ema", "state_dict")  # as scripts/convert_checkpoint.py
TOLERANCE = 1e-5
ATTENTION_CLASS_RE = re.compile(r"attn|attention", re.IGNORECASE)

REQUIREMENTS = """\
what a model must satisfy:
  1. forward(images) with images a float32 [B, 3, H, W] tensor returns ONE tensor [B, N] (logits or
     an embedding; not a tuple or dict). The module is exported in eval() mode, in float32, on CPU.
  2. Every attention module (any module whose class name contains "attn"/"attention" or that has a
     num_heads/n_heads attribute, unless it merely contains attention modules, like a Block) is one of:
     (a) timm-style attention: an int attribute `num_heads`, a `qkv` submodule (or `q`, `k` and `v`
         submodules), and an `attn_drop` submodule that receives the softmax probabilities
         [B, num_heads, T, T] as its first input on every call, i.e. the explicit path
         `attn = (q @ k.transpose(-2, -1) * scale).softmax(-1); attn = self.attn_drop(attn)`.
         If the module has a `fused_attn` attribute it is set to False so that this path runs
         (models whose fused path cannot be switched off this way are refused).
     (b) torch.nn.MultiheadAttention (or a subclass) used as self-attention (query, key and value
         have the same length), batch_first either way. It is wrapped so that it runs with
         need_weights=True, average_attn_weights=False; callers still get what they asked for.
     Any other attention module is refused; pass --ignore NAME to leave a module (e.g. an attention
     pooling head that is not token self-attention) out of the export on purpose.
  3. Patch grid: the patch size P comes from --patch, else from the first nn.Conv2d whose stride
     equals its kernel size (square). With the grid gh = H // P, gw = W // P, every captured attention
     has T = n + gh * gw tokens with n >= 0 prefix tokens (class / distillation / register tokens,
     placed before the patch tokens, patch tokens in row-major order). Names of prefix tokens come
     from --prefix-names, else: 1 -> cls; 2 -> cls,dist; 1+k (k >= 2) -> cls,reg0..reg{k-1}.
  4. The model must be traceable by torch.jit.trace: no data-dependent control flow, and the traced
     module must reproduce the eager outputs and attentions (to 1e-5) on a fresh random input with
     batch size 2 (traced at batch size 1); the export fails otherwise.
"""

METADATA = """\
metadata (extra file "attnscope.json" inside the TorchScript archive):
  {"format": "attnscope-torchscript", "version": 1, "name": str, "input_size": [H, W],
   "mean": [r, g, b], "std": [r, g, b], "output": "logits"|"embedding",
   "class_names": [str, ...] (only with --class-names), "patch_size": P,
   "layers": [{"name": module name, "kind": "timm-attention"|"multihead-attention", "heads": h,
               "prefix_tokens": n, "prefix_names": [str] * n, "grid": [gh, gw]}, ...]}
  One layer entry per returned attention tensor, in the same (forward) order.
"""


class ExportError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------
def load_factory(spec):
    path, sep, func = spec.rpartition(":")
    if not sep or not path or not func:
        raise ExportError(f"--factory expects FILE.py:FUNCTION, got '{spec}'")
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise ExportError(f"--factory: no such file {path}")
    module_name = "_attnscope_factory_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    sys.path.insert(0, os.path.dirname(path))
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    module_spec.loader.exec_module(module)
    if not callable(getattr(module, func, None)):
        raise ExportError(f"--factory: {path} has no function '{func}'")
    model = getattr(module, func)()
    if not isinstance(model, nn.Module):
        raise ExportError(f"--factory: {func}() returned a {type(model).__name__}, not an nn.Module")
    return model


def torch_load(path, weights_only):
    try:
        if weights_only:
            return torch.load(path, map_location="cpu", weights_only=True)
        return torch.load(path, map_location="cpu")
    except (AttributeError, ImportError) as e:
        raise ExportError(f"cannot unpickle {path}: {e}; the file refers to code that is not importable "
                          "here: import/install the package that defines it, or run from its directory")
    except Exception as e:  # noqa: BLE001 (pickle.UnpicklingError, RuntimeError, ...)
        if weights_only:
            raise ExportError(f"cannot load {path} as plain tensors ({e}); it holds pickled objects "
                              "besides tensors: re-save just the state_dict, or use --pickled for a "
                              "whole pickled model you trust")
        raise ExportError(f"cannot load {path}: {e}")


def select_state_dict(checkpoint, key, path):
    if key:
        if not isinstance(checkpoint, dict) or key not in checkpoint:
            keys = ", ".join(map(str, checkpoint)) if isinstance(checkpoint, dict) else "none"
            raise ExportError(f"--key: {path} has no '{key}' entry (top-level keys: {keys})")
        checkpoint = checkpoint[key]
    elif isinstance(checkpoint, dict):
        for candidate in CONTAINER_KEYS:
            if isinstance(checkpoint.get(candidate), dict):
                checkpoint = checkpoint[candidate]
                break
    if not isinstance(checkpoint, dict):
        raise ExportError(f"{path} does not hold a state_dict (got a {type(checkpoint).__name__})")
    if checkpoint and all(str(k).startswith("module.") for k in checkpoint):  # DataParallel
        checkpoint = {k[len("module."):]: v for k, v in checkpoint.items()}
    return checkpoint


def build_model(args):
    if args.pickled:
        if os.getcwd() not in sys.path:  # the module defining the model's classes, as `python -c` would see it
            sys.path.insert(0, os.getcwd())
        model = torch_load(args.pickled, weights_only=False)
        if isinstance(model, torch.jit.ScriptModule):
            raise ExportError(f"{args.pickled} is already TorchScript; attnscope needs the eager module "
                              "to capture its attention")
        if not isinstance(model, nn.Module):
            raise ExportError(f"--pickled {args.pickled} holds a {type(model).__name__}, not an nn.Module "
                              "(for a state_dict use --factory with --weights)")
    else:
        model = load_factory(args.factory)
        if args.weights:
            state = select_state_dict(torch_load(args.weights, weights_only=True), args.key, args.weights)
            try:
                model.load_state_dict(state, strict=True)
            except RuntimeError as e:
                raise ExportError(f"--weights {args.weights} does not fit the model (strict=True): {e}")
    return model.float().eval().cpu()


# ---------------------------------------------------------------------------------------------
# Attention discovery and capture
# ---------------------------------------------------------------------------------------------
def is_timm_attention(m):
    has_proj = isinstance(getattr(m, "qkv", None), nn.Module) or all(
        isinstance(getattr(m, n, None), nn.Module) for n in ("q", "k", "v"))
    heads = getattr(m, "num_heads", None)
    return (has_proj and isinstance(heads, int) and not isinstance(heads, bool)
            and isinstance(getattr(m, "attn_drop", None), nn.Module))


def looks_like_attention(m):
    if ATTENTION_CLASS_RE.search(type(m).__name__):
        return True
    return any(isinstance(getattr(m, a, None), int) and not isinstance(getattr(m, a), bool)
               for a in ("num_heads", "n_heads"))


def find_attention(model, ignore):
    """[(name, module, kind)] in named_modules order; raises for unsupported attention modules."""
    named = [(n, m) for n, m in model.named_modules() if not any(n == i or n.startswith(i + ".") for i in ignore)]
    supported = []
    for name, m in named:
        if any(name.startswith(s + ".") for s, _, _ in supported):
            continue  # inside a supported module (its attn_drop, q_norm, ...)
        if isinstance(m, nn.MultiheadAttention):
            supported.append((name, m, "multihead-attention"))
        elif is_timm_attention(m):
            supported.append((name, m, "timm-attention"))
    names = [s for s, _, _ in supported]
    bad = []
    for name, m in named:
        if name in names or not looks_like_attention(m):
            continue
        inside = any(name.startswith(s + ".") for s in names)
        container = any(s.startswith(name + ".") or name == "" for s in names)
        if not inside and not container:
            bad.append(f"{name or '<root>'} ({type(m).__name__})")
    if bad:
        raise ExportError("unsupported attention module(s): " + ", ".join(bad) +
                          "\nattnscope can only capture attention from timm-style attention modules and "
                          "torch.nn.MultiheadAttention.\n\n" + REQUIREMENTS)
    if not supported:
        raise ExportError("no attention module found in the model\n\n" + REQUIREMENTS)
    return supported


class Recorder:
    """Collects (layer name, kind, module, probabilities) in call order during one forward."""

    def __init__(self):
        self.records = []
        self.calls = {}

    def clear(self):
        self.records = []
        self.calls = {}


def capture_multihead_attention(mha, name, recorder):
    """Makes this nn.MultiheadAttention instance run with need_weights=True, average_attn_weights=False
    and record the per-head weights; callers still get what they asked for. The instance stays what it
    was (same class, attributes and module path): only its forward is replaced."""
    original = mha.forward  # the class's bound forward

    def forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, **kwargs):
        out, weights = original(query, key, value, key_padding_mask=key_padding_mask, need_weights=True,
                                attn_mask=attn_mask, average_attn_weights=False, **kwargs)
        recorder.records.append((name, "multihead-attention", mha,
                                 weights.unsqueeze(0) if weights.dim() == 3 else weights))  # unbatched: [h, L, S]
        # the weights are [B, heads, L, S] whatever batch_first is
        if not need_weights:
            return out, None
        return out, (weights.mean(dim=-3) if average_attn_weights else weights)

    mha.forward = forward


def install_capture(model, attention, recorder):
    """Hooks timm-style attn_drop modules and wraps MultiheadAttention modules (in place)."""
    handles = []
    for name, m, kind in attention:
        if kind == "timm-attention":
            if hasattr(m, "fused_attn"):
                m.fused_attn = False

            def drop_hook(_mod, inputs, _output, name=name, m=m):
                recorder.records.append((name, "timm-attention", m, inputs[0]))

            def call_hook(_mod, _inputs, _output, name=name):
                recorder.calls[name] = recorder.calls.get(name, 0) + 1

            handles.append(m.attn_drop.register_forward_hook(drop_hook))
            handles.append(m.register_forward_hook(call_hook))
        else:
            capture_multihead_attention(m, name, recorder)
    return handles


class Exported(nn.Module):
    """forward(images) -> (output [B, N], (attention [B, heads, T, T], ...))."""

    def __init__(self, model, recorder):
        super().__init__()
        self.model = model
        self.recorder = recorder

    def forward(self, images):
        self.recorder.clear()
        out = self.model(images)
        if not torch.is_tensor(out):
            raise ExportError(f"the model's forward returned a {type(out).__name__}; it must return one "
                              "tensor [B, N]\n\n" + REQUIREMENTS)
        attns = tuple(r[3] for r in self.recorder.records)
        return out, attns


# ---------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------
def infer_patch(model):
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d) and tuple(m.stride) == tuple(m.kernel_size):
            if m.kernel_size[0] != m.kernel_size[1]:
                raise ExportError(f"patch embedding {name} has a non-square kernel {tuple(m.kernel_size)}; "
                                  "pass --patch")
            return m.kernel_size[0], name
    raise ExportError("cannot infer the patch size (no nn.Conv2d with stride == kernel size); pass --patch")


def default_prefix_names(n):
    if n == 0:
        return []
    if n == 1:
        return ["cls"]
    if n == 2:
        return ["cls", "dist"]
    return ["cls"] + [f"reg{i}" for i in range(n - 1)]


def check_records(recorder, attention, batch, grid, prefix_names):
    """Validates one eager forward's captures; returns the per-layer metadata."""
    gh, gw = grid
    timm_called = {name: 0 for name, _, kind in attention if kind == "timm-attention"}
    layers = []
    for name, kind, m, probs in recorder.records:
        if kind == "timm-attention":
            timm_called[name] += 1
        if probs.dim() != 4 or probs.shape[0] != batch or probs.shape[-1] != probs.shape[-2]:
            what = ("the first input of its attn_drop has" if kind == "timm-attention" else "its attention weights have")
            raise ExportError(f"{name}: {what} shape {list(probs.shape)}, expected [B={batch}, heads, T, T] "
                              f"(self-attention over the tokens); leave it out with --ignore {name} if it is "
                              "not\n\n" + REQUIREMENTS)
        heads, T = probs.shape[1], probs.shape[-1]
        if heads != m.num_heads:
            raise ExportError(f"{name}: captured {heads} heads but num_heads = {m.num_heads}")
        sums = probs.detach().double().sum(-1)
        if not torch.isfinite(sums).all() or (sums - 1).abs().max().item() > 1e-3 or probs.min().item() < 0:
            raise ExportError(f"{name}: the captured tensor is not softmax probabilities (rows do not sum "
                              "to 1)\n\n" + REQUIREMENTS)
        n = T - gh * gw
        if n < 0:
            raise ExportError(f"{name}: T = {T} tokens but the {gh}x{gw} patch grid has {gh * gw}; check "
                              "--size/--patch (pyramid or token-merging models are not supported)")
        names = prefix_names if prefix_names is not None else default_prefix_names(n)
        if len(names) != n:
            raise ExportError(f"{name}: {n} prefix tokens (T = {T} = {n} + {gh}*{gw}) but --prefix-names "
                              f"gives {len(names)}: {','.join(names)}")
        layers.append({"name": name, "kind": kind, "heads": int(heads), "prefix_tokens": int(n),
                       "prefix_names": list(names), "grid": [gh, gw]})
    calls = recorder.calls
    for name, got in timm_called.items():
        if got != calls.get(name, 0):
            raise ExportError(f"{name}: the module ran {calls.get(name, 0)} time(s) but its attn_drop saw "
                              f"{got} call(s); its softmax probabilities must pass through attn_drop on "
                              "every call (is there a fused path that fused_attn=False does not switch "
                              "off?)\n\n" + REQUIREMENTS)
    if not layers:
        raise ExportError("no attention was captured during forward\n\n" + REQUIREMENTS)
    return layers


def max_diff(a, b):
    return (a.detach() - b.detach()).abs().max().item() if a.numel() else 0.0


def verify(traced, exported, images):
    want_out, want_attn = exported(images)
    got_out, got_attn = traced(images)
    problems = []
    if tuple(got_out.shape) != tuple(want_out.shape):
        problems.append(f"output shape {list(got_out.shape)} != eager {list(want_out.shape)}")
    elif not torch.allclose(got_out, want_out, rtol=TOLERANCE, atol=TOLERANCE):
        problems.append(f"output differs from eager by {max_diff(got_out, want_out):.3g}")
    if len(got_attn) != len(want_attn):
        problems.append(f"{len(got_attn)} attention tensors, eager gives {len(want_attn)}")
    else:
        for i, (g, w) in enumerate(zip(got_attn, want_attn)):
            if tuple(g.shape) != tuple(w.shape):
                problems.append(f"attention {i} shape {list(g.shape)} != eager {list(w.shape)}")
            elif not torch.allclose(g, w, rtol=TOLERANCE, atol=TOLERANCE):
                problems.append(f"attention {i} differs from eager by {max_diff(g, w):.3g}")
    return problems


def write_atomic(module, path, metadata_json):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=directory)
    os.close(fd)
    try:
        torch.jit.save(module, temp, _extra_files={METADATA_NAME: metadata_json})
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(temp, 0o666 & ~mask)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def export(model, out, size, mean, std, output="logits", class_names=None, patch=None, prefix_names=None,
           name=None, ignore=(), seed=0, log=print):
    """Exports `model` to `out`; returns the metadata dict. Raises ExportError."""
    H, W = size
    if patch is None:
        patch, conv = infer_patch(model)
        log(f"patch size {patch} (from {conv})")
    if patch <= 0 or H < patch or W < patch:
        raise ExportError(f"bad patch size {patch} for input {H}x{W}")
    if H % patch or W % patch:
        log(f"warning: input {H}x{W} is not a multiple of the patch size {patch}; the grid is floored")
    grid = (H // patch, W // patch)
    attention = find_attention(model, ignore)
    recorder = Recorder()
    install_capture(model, attention, recorder)
    exported = Exported(model, recorder).eval()

    gen = torch.Generator().manual_seed(seed)
    example = torch.randn(1, 3, H, W, generator=gen)
    check = torch.randn(2, 3, H, W, generator=gen)
    # Every eager run and the trace happen with grad enabled and the parameters requiring grad, so
    # that torch's inference fast paths stay off: nn.MultiheadAttention then takes its Python path
    # (F.multi_head_attention_forward; the graph holds only ordinary aten ops, not
    # aten::_native_multi_head_attention), and nn.TransformerEncoderLayer still calls its self_attn
    # (its fast path, aten::_transformer_encoder_layer_fwd, would bypass the capture).
    params = [p for p in exported.parameters() if p.is_floating_point()]
    saved_flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(True)
    try:
        with torch.enable_grad():
            out1, _ = exported(example)
            if out1.dim() != 2 or out1.shape[0] != 1:
                raise ExportError(f"the model's output has shape {list(out1.shape)}, expected [B, N]\n\n"
                                  + REQUIREMENTS)
            layers = check_records(recorder, attention, 1, grid, prefix_names)
            if class_names is not None and output == "logits" and len(class_names) != out1.shape[1]:
                raise ExportError(f"--class-names has {len(class_names)} names but the model outputs "
                                  f"{out1.shape[1]} logits")
            traced = torch.jit.trace(exported, example, check_trace=False)
            problems = verify(traced, exported, check)
            layers2 = check_records(recorder, attention, 2, grid, prefix_names)
        if [(l["name"], l["heads"], l["prefix_tokens"]) for l in layers2] != \
                [(l["name"], l["heads"], l["prefix_tokens"]) for l in layers]:
            problems.append("the attention layers captured at batch size 2 differ from batch size 1")
        # The model's own inference path (no_grad: fast paths on) must agree with the export too.
        with torch.no_grad():
            natural = model(check)
            traced_out = traced(check)[0]
        if torch.is_tensor(natural) and natural.shape == traced_out.shape and \
                not torch.allclose(traced_out, natural, rtol=1e-4, atol=1e-4):
            problems.append(f"output differs from the model's own no_grad output by {max_diff(traced_out, natural):.3g}")
    finally:
        for p, flag in zip(params, saved_flags):
            p.requires_grad_(flag)
    for p in traced.parameters():
        p.requires_grad_(False)
    if problems:
        raise ExportError("the traced module does not reproduce the eager model on a fresh input of batch "
                          "size 2 (tolerance 1e-5):\n  " + "\n  ".join(problems) +
                          "\nthe model probably has data- or shape-dependent Python control flow that "
                          "torch.jit.trace froze\n\n" + REQUIREMENTS)

    metadata = {"format": FORMAT, "version": VERSION, "name": name or os.path.splitext(os.path.basename(out))[0],
                "input_size": [H, W], "mean": [float(x) for x in mean], "std": [float(x) for x in std],
                "output": output}
    if class_names is not None:
        metadata["class_names"] = list(class_names)
    metadata["patch_size"] = int(patch)
    metadata["layers"] = layers
    write_atomic(traced, out, json.dumps(metadata))
    return metadata


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="export_torchscript.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Export a PyTorch model with explicit attention probabilities to a TorchScript file "
                    "for attnscope.\n\nThe exported forward(images) takes float32 [B, 3, H, W] images "
                    "already normalised with --mean/--std and returns\n(output [B, N], (attention "
                    "[B, heads, T, T] per attention call, in forward order)).",
        epilog=REQUIREMENTS + "\n" + METADATA)
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--factory", metavar="FILE.py:FUNCTION",
                     help="import FILE.py and call FUNCTION() to build the nn.Module")
    src.add_argument("--pickled", metavar="MODEL.pt",
                     help="a whole pickled nn.Module (torch.save(model)). WARNING: this UNPICKLES the file, "
                          "which can run arbitrary code hidden in it: trusted files only")
    parser.add_argument("--weights", metavar="STATE_DICT.pth",
                        help="state_dict loaded into the --factory model with strict=True (loaded with "
                             "torch.load(weights_only=True))")
    parser.add_argument("--key", help="entry of the --weights file holding the state_dict (default: the first "
                                      f"of {', '.join(CONTAINER_KEYS)} present, else the whole file)")
    parser.add_argument("--out", required=True, metavar="OUT.pt", help="TorchScript file to write")
    parser.add_argument("--size", type=int, nargs="+", default=[224], metavar="N",
                        help="input size: H W, or one number for a square (default 224)")
    parser.add_argument("--mean", type=float, nargs=3, default=list(IMAGENET_MEAN), metavar=("R", "G", "B"),
                        help="normalisation mean (default ImageNet)")
    parser.add_argument("--std", type=float, nargs=3, default=list(IMAGENET_STD), metavar=("R", "G", "B"),
                        help="normalisation std (default ImageNet)")
    parser.add_argument("--patch", type=int, help="patch size P (default: from the first nn.Conv2d with stride "
                                                  "== kernel size)")
    parser.add_argument("--prefix-names", metavar="cls,dist,reg0,...",
                        help="names of the tokens before the patch tokens (default: from their count: "
                             "1 -> cls, 2 -> cls,dist, 1+k -> cls,reg0..reg{k-1})")
    parser.add_argument("--output", choices=("logits", "embedding"), default="logits",
                        help="what the model's output is (default logits)")
    parser.add_argument("--class-names", metavar="FILE.txt", help="class names, one per line")
    parser.add_argument("--name", help="display name (default: the output file's stem)")
    parser.add_argument("--ignore", action="append", default=[], metavar="MODULE",
                        help="module name (as in named_modules) to leave out of attention capture and "
                             "checks, e.g. an attention pooling head; repeatable")
    args = parser.parse_args(argv)
    if (args.weights or args.key) and not args.factory:
        parser.error("--weights/--key go with --factory")
    if args.key and not args.weights:
        parser.error("--key needs --weights")
    if len(args.size) not in (1, 2) or min(args.size) <= 0:
        parser.error("--size takes H W or one positive number")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    size = args.size * 2 if len(args.size) == 1 else args.size
    prefix_names = None
    if args.prefix_names is not None:
        prefix_names = [s.strip() for s in args.prefix_names.split(",") if s.strip()]
    class_names = None
    if args.class_names:
        with open(args.class_names, encoding="utf-8") as f:
            class_names = [line.rstrip("\r\n") for line in f]
        while class_names and not class_names[-1].strip():
            class_names.pop()
    try:
        model = build_model(args)
        meta = export(model, args.out, size, args.mean, args.std, output=args.output, class_names=class_names,
                      patch=args.patch, prefix_names=prefix_names, name=args.name, ignore=args.ignore)
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    heads = sorted({l["heads"] for l in meta["layers"]})
    kinds = sorted({l["kind"] for l in meta["layers"]})
    first = meta["layers"][0]
    print(f"wrote {args.out}: {len(meta['layers'])} attention layers ({', '.join(kinds)}), heads {heads}, "
          f"grid {first['grid'][0]}x{first['grid'][1]}, prefix {first['prefix_names']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
