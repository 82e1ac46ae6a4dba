// Every singular value of a large matrix, the way LAPACK's sgesdd computes them (Householder
// bidiagonalisation, then the bidiagonal's values by dqds), but driven panel by panel so that a
// caller can follow it and stop it: at 5,481 tokens one head takes about 17 s on 2 cores, too long
// for a workbench that must answer the next click.
#pragma once

#include <torch/types.h>

#include <functional>

namespace attnscope {

struct SvdProgress {
  std::function<void(double fraction)> report;  // the share of the work done, in [0, 1]
  std::function<bool()> cancelled;              // checked after every panel of 32 columns
};

// The singular values of `matrix` [M, N] in float32, descending (min(M, N) of them). A matrix
// handed over (std::move, held nowhere else) is reduced in place: no second M x N copy. Throws
// Cancelled (models/backbone.h) when `progress.cancelled` says so. Where the process has no
// LAPACK with sgebrd's parts (a LibTorch built against a hidden MKL), it falls back to
// torch::linalg::svdvals, which can neither report nor stop.
torch::Tensor exact_singular_values(torch::Tensor matrix, const SvdProgress& progress = {});

// Whether exact_singular_values can report and stop on this build (the LAPACK parts were found).
bool singular_values_can_stop();

}  // namespace attnscope
