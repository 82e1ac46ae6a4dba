"""What the PyTorch-eager baselines of `attnscope bench` share: Debian's python3-torch (the script is
run again under /usr/bin/python3 when another python3 without torch comes first on PATH), the
independent references of tests/python on the import path, their common options, a fixed input and
the median of timed runs.

Imported first by each bench/pytorch_*.py, before torch and the references.
"""

import contextlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import debian_torch  # noqa: E402,F401  (first: runs the script under Debian's python3-torch)
import torch  # noqa: E402


def add_vit_arguments(ap, runs, warmup, model_required=True):
    """--model, --heads, --threads, --runs, --warmup and --size, as every ViT baseline takes them."""
    ap.add_argument("--model", required=model_required, help="timm-layout safetensors file")
    ap.add_argument("--heads", type=int, default=None, help="heads of plain qkv modules (default C/64)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--warmup", type=int, default=warmup)
    ap.add_argument("--size", type=int, default=224, help="side of the square input (default 224)")
    add_device_argument(ap)


def add_device_argument(ap):
    """--device: where the eager side runs (cpu, cuda, cuda:1), as `attnscope device-check` asks."""
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")


def use_device(name):
    """The torch.device `name`, made the default of new tensors too (the references create masks and
    indices as they go), with TF32 off as attnscope's device check has it."""
    device = torch.device(name)
    if device.type != "cpu":
        torch.set_default_device(device)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return device


def on_device(state_dict, device):
    """Every tensor of a state dict moved to `device`."""
    return {k: v.to(device) for k, v in state_dict.items()}


def synchronize(device):
    """Waits for the device's queued work, so that a clock reading after it is the work's time."""
    if device.type == "cuda":
        torch.cuda.synchronize()


def check_counts(ap, args, *extra_runs):
    """Refuses run counts below 1 (the options named in `extra_runs` too), negative warmups and threads."""
    runs = [args.runs] + [getattr(args, name.lstrip("-").replace("-", "_")) for name in extra_runs]
    if min(runs) < 1 or args.warmup < 0 or args.threads < 1:
        ap.error(", ".join(["--runs"] + list(extra_runs)) + " and --threads must be >= 1, --warmup >= 0")


def load_vit(args):
    """tests/python/reference_vit.py's model of args.model in float32 on args.threads threads and
    args.device, and the fixed [1, 3, S, S] input every ViT baseline runs on (S = args.size)."""
    import reference_vit
    import safetensors_io

    torch.set_num_threads(args.threads)
    device = use_device(args.device)
    weights = on_device(safetensors_io.load_file(args.model), device)
    model = reference_vit.ViTReference(weights, heads=args.heads, dtype=torch.float32)
    model.device = device
    return model, fixed_input(args.size, seed=0).to(device)


def fixed_input(size, seed):
    """The same numbers on every device: drawn on the CPU."""
    return torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(seed), device="cpu")


def median_ms(work, warmup, runs, model=None):
    """The median time of `runs` calls of work() after `warmup` untimed ones; the gradients of
    `model`'s weights are cleared before each, so that no backward accumulates into the last."""
    times = []
    for i in range(warmup + runs):
        if model is not None:
            for t in model.sd.values():
                t.grad = None
        t0 = time.perf_counter()
        work()
        if model is not None:
            synchronize(getattr(model, "device", torch.device("cpu")))
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def require_weight_gradients(model):
    """Every floating-point weight requires grad, as on an nn.Module whose backward forms them all."""
    for t in model.sd.values():
        if t.is_floating_point():
            t.requires_grad_(True)


@contextlib.contextmanager
def keeping_layer_norm_output(model, norm, kept, prepare=None):
    """Inside the block, the output of LayerNorm `norm` (its weights, e.g. model.blocks[-1]["n1"]) is
    kept in kept["a"] at every forward, after prepare(y) when given (a detached leaf, a retained
    gradient), as a forward hook on the layer would keep it."""
    original = model._ln

    def hooked(inp, wb):
        y = original(inp, wb)
        if wb is norm:
            if prepare is not None:
                y = prepare(y)
            kept["a"] = y
        return y

    model._ln = hooked
    try:
        yield kept
    finally:
        model._ln = original


class GemmCounter(torch.overrides.TorchFunctionMode):
    """The matrix-product work of what runs under it, in FLOP (2 per multiply-add): linear layers,
    matmul / @ / bmm / mm, and convolutions without groups (patch embeddings, PVT's spatial
    reduction). Depthwise convolutions, softmax and norms are not products a GEMM limit applies to."""

    PRODUCTS = (torch.matmul, torch.Tensor.__matmul__, torch.bmm, torch.mm, torch.Tensor.matmul)

    def __init__(self):
        super().__init__()
        self.flop = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        functional = torch.nn.functional
        if func is functional.linear:
            x, weight = args[0], args[1] if len(args) > 1 else kwargs["weight"]
            self.flop += 2 * (x.numel() // x.shape[-1]) * weight.numel()
        elif func in self.PRODUCTS:
            self.flop += 2 * out.numel() * args[0].shape[-1]
        elif func is functional.conv2d:
            weight = args[1] if len(args) > 1 else kwargs["weight"]
            groups = args[6] if len(args) > 6 else kwargs.get("groups", 1)
            if groups == 1:  # each output element: in x kh x kw multiply-adds
                self.flop += 2 * out.numel() * weight[0].numel()
        return out


def gemm_gflop(forward):
    """GFLOP of the matrix products one call of `forward` runs (GemmCounter), under no_grad."""
    counter = GemmCounter()
    with torch.no_grad(), counter:
        forward()
    return counter.flop / 1e9
