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
    """--model, --heads, --threads, --runs and --warmup, as every ViT baseline takes them."""
    ap.add_argument("--model", required=model_required, help="timm-layout safetensors file")
    ap.add_argument("--heads", type=int, default=None, help="heads of plain qkv modules (default C/64)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--warmup", type=int, default=warmup)


def check_counts(ap, args, *extra_runs):
    """Refuses run counts below 1 (the options named in `extra_runs` too), negative warmups and threads."""
    runs = [args.runs] + [getattr(args, name.lstrip("-").replace("-", "_")) for name in extra_runs]
    if min(runs) < 1 or args.warmup < 0 or args.threads < 1:
        ap.error(", ".join(["--runs"] + list(extra_runs)) + " and --threads must be >= 1, --warmup >= 0")


def load_vit(args):
    """tests/python/reference_vit.py's model of args.model in float32 on args.threads threads, and the
    fixed [1, 3, 224, 224] input every ViT baseline runs on."""
    import reference_vit

    torch.set_num_threads(args.threads)
    model = reference_vit.load_model(args.model, heads=args.heads, dtype=torch.float32)
    return model, fixed_input(224, seed=0)


def fixed_input(size, seed):
    return torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(seed))


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
