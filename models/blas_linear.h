// Linear layers on token rows inside the row-chunked CPU paths of the hierarchical families.
#pragma once

#include <torch/torch.h>

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

}  // namespace attnscope
