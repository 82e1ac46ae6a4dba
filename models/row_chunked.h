// Helpers of the row-chunked CPU inference paths of the hierarchical families (Swin, PVT v2):
// linear layers on token rows, and tiles that keep a chain of per-token ops in a core's cache.
#pragma once

#include <torch/torch.h>

#include <algorithm>

#include "models/cpu_threads.h"

namespace attnscope {

// rows [N, C_in] @ weight^T + bias as one GEMM with the bias fused, through LibTorch's BLAS.
// On the one core each chunk runs on, OpenBLAS beats oneDNN (token_linear) on the hierarchical
// families' shapes: about 3x on narrow stages (64 or 96 input channels) and 2x on the last stage's
// 49 tokens, and it needs no conversion to and from oneDNN's tensors.
inline torch::Tensor blas_linear(const torch::nn::Linear& layer, const torch::Tensor& rows) {
  const auto& bias = layer->bias;
  return bias.defined() ? torch::addmm(bias, rows, layer->weight.t()) : torch::mm(rows, layer->weight.t());
}

// The same into `out` ([N, C_out], e.g. a chunk's rows of a whole layer's output): no copy.
inline void blas_linear_into(torch::Tensor& out, const torch::nn::Linear& layer, const torch::Tensor& rows) {
  const auto& bias = layer->bias;
  if (bias.defined())
    torch::addmm_out(out, bias, rows, layer->weight.t());
  else
    torch::mm_out(out, rows, layer->weight.t());
}

// Rows a tile holds: a Swin-T stage-0 MLP's hidden rows (256 x 384 floats) fit in a core's L2.
constexpr int64_t kRowTile = 256;

// for_each_row_chunk, each chunk walked in tiles of at most kRowTile rows: a tile's intermediates
// (normed rows, the MLP's hidden rows, the bias addmm writes first) stay in cache between ops.
inline void for_each_row_tile(int64_t rows, const std::function<void(int64_t begin, int64_t end)>& tile) {
  for_each_row_chunk(rows, [&](int64_t begin, int64_t end) {
    for (int64_t first = begin; first < end; first += kRowTile) tile(first, std::min(end, first + kRowTile));
  });
}

}  // namespace attnscope
