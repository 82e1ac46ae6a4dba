#!/usr/bin/python3
"""Where one core's time goes in blocked softmax attention (models/attention_kernels.cpp), per block
size: the score GEMM (q k^T), the softmax and the A V GEMM, for LibTorch's softmax (a new
probability block, then A V) and for the in-place exponentials whose product is divided by the row
sums afterwards, each on the same LibTorch and BLAS the C++ side links. One core walks its half of
the queries, as each of two cores does in the forward.

Usage:
  bench/profile_attention_block.py [--tokens 5481] [--heads 6] [--head-dim 64] [--repeats 3]
                                   [--blocks-mb 1,4,16,64]
      prints one line per block size and path: total, score GEMM, softmax, A V (ms, the best of
      --repeats walks)
"""
import argparse
import sys
import time

import eager_baseline  # noqa: F401  (first: Debian's torch)
import torch


def walk(q, k_t, v, rows, fused):
    """One core's walk over its queries in blocks of `rows`: the three stages' times (s)."""
    stages = [0.0, 0.0, 0.0]
    for first in range(0, q.shape[1], rows):
        block = q[:, first:first + rows]
        t0 = time.perf_counter()
        if fused:
            scores = torch.bmm(block, k_t)  # q carries the scale
        else:
            scores = torch.zeros(q.shape[0], block.shape[1], k_t.shape[2]).baddbmm_(
                block, k_t, beta=0.0, alpha=q.shape[2] ** -0.5)
        t1 = time.perf_counter()
        if fused:
            scores.sub_(scores.amax(-1, keepdim=True)).exp_()
            sums = scores.sum(-1, keepdim=True)
        else:
            scores = scores.softmax(-1)
        t2 = time.perf_counter()
        out = torch.bmm(scores, v)
        if fused:
            out.div_(sums)
        t3 = time.perf_counter()
        for i, dt in enumerate((t1 - t0, t2 - t1, t3 - t2)):
            stages[i] += dt
    return stages


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--tokens", type=int, default=5481)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--blocks-mb", default="1,4,16,64")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    h, t, d = args.heads, args.tokens, args.head_dim
    q, k, v = (torch.randn(h, t // 2, d), torch.randn(h, t, d), torch.randn(h, t, d))
    q_scaled, k_t = q * d ** -0.5, k.transpose(1, 2).contiguous()
    print(f"{t} tokens, {h} heads of {d}, one core's {t // 2} queries; "
          f"score GEMM + A V GEMM: {4 * h * (t // 2) * t * d / 1e9:.1f} GFLOP")
    for mb in (float(x) for x in args.blocks_mb.split(",")):
        rows = max(16, int(mb * 2 ** 20 / (h * t * 4)))
        for fused in (False, True):
            runs = [walk(q_scaled if fused else q, k_t if fused else k.transpose(1, 2), v, rows, fused)
                    for _ in range(args.repeats)]
            best = min(runs, key=sum)
            name = "exponentials in place, divide after A V" if fused else "LibTorch softmax, then A V"
            print(f"block {mb:5g} MB ({rows:4d} rows)  {name:40s} total {sum(best) * 1e3:7.1f}  "
                  f"q k^T {best[0] * 1e3:6.1f}  softmax {best[1] * 1e3:6.1f}  A V {best[2] * 1e3:6.1f} ms",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
