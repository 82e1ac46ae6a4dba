// Linear layers on token tensors [..., C] for the forward pass.
#pragma once

#include <torch/torch.h>

#include "models/cpu_threads.h"

namespace attnscope {

// rows [N, C_in] @ weight^T + bias through oneDNN, as a node of the autograd graph that gives only
// the input's gradient (dX = dY W, oneDNN too): for attributions, which freeze the parameters.
torch::Tensor frozen_onednn_linear(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& bias);

inline torch::Tensor token_linear(torch::nn::Linear& layer, const torch::Tensor& x) {
  const auto& weight = layer->weight;
  const auto& bias = layer->bias;
  if (x.dim() < 2) return layer->forward(x);
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
  out_shape.back() = weight.size(0);
  auto rows = x.reshape({-1, x.size(-1)});
  ScopedThreads all_cores(configured_threads());
  // oneDNN's GEMM uses AVX-512 where OpenBLAS here stops at AVX2: about 1.6x faster on token-sized
  // products. Without autograd on the CPU always; with it when only the input wants a gradient.
  const bool onednn = x.device().is_cpu() && x.scalar_type() == torch::kFloat &&
                      weight.scalar_type() == torch::kFloat && at::hasMKLDNN();
  if (onednn && cpu_inference(x)) {
    auto out = at::mkldnn_linear(rows.to_mkldnn(), weight.contiguous(),
                                 bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt);
    return out.to_dense().view(out_shape);
  }
  if (onednn && c10::GradMode::is_enabled() && x.requires_grad() && !weight.requires_grad() &&
      !(bias.defined() && bias.requires_grad()))
    return frozen_onednn_linear(rows, weight, bias).view(out_shape);
  // One GEMM with the bias fused (addmm), instead of LibTorch's matmul plus a separate bias add.
  auto out = bias.defined() ? torch::addmm(bias, rows, weight.t()) : torch::mm(rows, weight.t());
  return out.view(out_shape);
}

}  // namespace attnscope
