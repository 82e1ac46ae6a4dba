// Linear layers on token tensors [B, T, C] as one GEMM with the bias fused (addmm), instead of
// LibTorch's matmul plus a separate bias add: the biggest single saving in a ViT forward on CPU.
#pragma once

#include <torch/torch.h>

namespace attnscope {

inline torch::Tensor token_linear(torch::nn::Linear& layer, const torch::Tensor& x) {
  const auto& weight = layer->weight;
  const auto& bias = layer->bias;
  if (x.dim() != 3 || !bias.defined()) return layer->forward(x);
  auto rows = x.reshape({-1, x.size(2)});
  return torch::addmm(bias, rows, weight.t()).view({x.size(0), x.size(1), weight.size(0)});
}

}  // namespace attnscope
