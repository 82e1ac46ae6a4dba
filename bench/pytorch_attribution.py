#!/usr/bin/python3
"""PyTorch-eager attention relevance and Score-CAM on a timm-layout ViT: the baselines
`attnscope bench --analysis` compares its own against (same safetensors weights, same threads).

Each method as its authors' code runs it on an nn.Module, float32, input [1,3,224,224], top-1 class:
- relevance (Transformer-MM-Explainability's generate_relevance): every weight requires grad; each
  attention keeps its softmax output and registers a hook for its gradient; one_hot.backward()
  (weight gradients included); then R = I, R += mean_heads((grad * attn).clamp(min=0)) @ R per block
  with full T x T products; the class token's row.
  "lean": no weight gradients, torch.autograd.grad(score, attentions) (attnscope's own trick).
- Score-CAM (pytorch-grad-cam's score_cam.py at norm1 of the last block): one forward with a hook
  on the layer, the activations reshaped to [1, C, 14, 14], UpsamplingBilinear2d to 224, per-channel
  min-max, input * mask in batches of 16 under no_grad, softmax over the channels' logits, the
  weighted sum, ReLU and scale_cam_image.

Usage: bench/pytorch_attribution.py --model FILE.safetensors [--heads H] [--threads N] [--runs R]
       [--warmup W] [--score-runs R]
prints one JSON line: {"relevance_ms", "relevance_lean_ms", "scorecam_ms", "threads"}
"""

import argparse
import json
import sys

import eager_baseline  # first: Debian's torch, and tests/python on the import path
import reference_vit
import torch
import torch.nn.functional as F


def forward_keeping_attention(model, x, kept):
    """reference_vit's forward with timm's eager softmax attention, each layer's probabilities kept
    (and their gradient retained, as the relevance code's register_hook does)."""
    original = reference_vit.Attention.__call__

    def attention(self, y, ctx, want_matrix=False):
        B, T, C = y.shape
        q, k, v = self.qkv(y)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        if attn.requires_grad:
            attn.retain_grad()
        else:  # lean: no weight requires grad, so the graph starts at the first attention (as attnscope's)
            attn = attn.detach().requires_grad_(True)
        kept.append(attn)
        out = (attn @ v).transpose(1, 2).reshape(B, T, C)
        return F.linear(out, self.proj_w, self.proj_b), None

    reference_vit.Attention.__call__ = attention
    try:
        return model.forward(x)
    finally:
        reference_vit.Attention.__call__ = original


def relevance(model, x, lean):
    kept = []
    logits = forward_keeping_attention(model, x, kept)
    index = int(logits[0].argmax())
    one_hot = torch.zeros_like(logits)
    one_hot[0, index] = 1
    score = (one_hot * logits).sum()
    if lean:
        grads = torch.autograd.grad(score, kept)
    else:
        score.backward()
        grads = [a.grad for a in kept]
    tokens = kept[0].shape[-1]
    R = torch.eye(tokens)
    with torch.no_grad():
        for attn, grad in zip(kept, grads):
            cam = (grad[0] * attn[0]).clamp(min=0).mean(dim=0)
            R = R + cam @ R
    return R[0, model.num_prefix:]


def score_cam(model, x):
    with torch.no_grad():
        with eager_baseline.keeping_layer_norm_output(model, model.blocks[-1]["n1"], {}) as kept:
            logits = model.forward(x)
        index = int(logits[0].argmax())
        P, (H, W) = model.num_prefix, x.shape[-2:]
        a = kept["a"][:, P:, :]
        gh, gw = H // model.patch[0], W // model.patch[1]
        activations = a.reshape(1, gh, gw, a.shape[2]).permute(0, 3, 1, 2)
        upsampled = torch.nn.UpsamplingBilinear2d(size=(H, W))(activations)
        flat = upsampled.view(1, upsampled.size(1), -1)
        maxs, mins = flat.max(dim=-1)[0][:, :, None, None], flat.min(dim=-1)[0][:, :, None, None]
        upsampled = (upsampled - mins) / (maxs - mins + 1e-8)
        inputs = x[:, None] * upsampled[:, :, None]
        scores = []
        for i in range(0, inputs.size(1), 16):
            scores.extend(model.forward(inputs[0, i:i + 16])[:, index].tolist())
        weights = torch.softmax(torch.tensor(scores), dim=-1)
        cam = torch.relu((weights[:, None, None] * activations[0]).sum(dim=0))
        cam = cam - cam.min()
        return cam / (cam.max() + 1e-7)


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    eager_baseline.add_vit_arguments(ap, runs=10, warmup=2)
    ap.add_argument("--score-runs", type=int, default=3)
    args = ap.parse_args()
    eager_baseline.check_counts(ap, args, "--score-runs")
    model, x = eager_baseline.load_vit(args)
    median_ms = eager_baseline.median_ms
    scorecam = median_ms(lambda: score_cam(model, x), min(args.warmup, 1), args.score_runs, model)
    lean = median_ms(lambda: relevance(model, x, True), args.warmup, args.runs, model)
    eager_baseline.require_weight_gradients(model)
    library = median_ms(lambda: relevance(model, x, False), args.warmup, args.runs, model)
    print(json.dumps({"relevance_ms": round(library, 4), "relevance_lean_ms": round(lean, 4),
                      "scorecam_ms": round(scorecam, 4), "threads": torch.get_num_threads()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
