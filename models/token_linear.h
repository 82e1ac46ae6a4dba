// Linear layers on token tensors [..., C] for the forward pass.
#pragma once

#include <torch/torch.h>

#include <string>

#include "models/cpu_threads.h"

namespace attnscope {

// rows [N, C_in] @ weight^T + bias through oneDNN, as a node of the autograd graph that gives only
// the input's gradient (dX = dY W, oneDNN too): for attributions, which freeze the parameters.
torch::Tensor frozen_onednn_linear(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& bias);

// Which GEMM the CPU inference paths use for linear layers, chosen once per process: which one is
// faster depends on the CPU. On one machine this project ran on, OpenBLAS stopped at AVX2 and
// oneDNN was about 1.6x faster on token-sized products; on another (AMD EPYC, AVX-512 kernels in
// OpenBLAS) BLAS was faster (DeiT-Small 62 against 71 ms).
// ATTNSCOPE_LINEAR=onednn|blas forces one; otherwise both are timed once on one core, on a
// DeiT-Small MLP and a Swin-T stage-0 qkv tile, and the faster is kept.
struct LinearBackendChoice {
  bool onednn = false;
  double onednn_ms = 0, blas_ms = 0;  // the timings it rests on (0 when forced)
  bool measured = false;              // chosen by the timings above
  std::string reason;                 // "measured", "ATTNSCOPE_LINEAR", or why oneDNN is unavailable
};
const LinearBackendChoice& linear_backend();
// "linear layers: BLAS (measured: ...)\n": the choice above (made at the first call), as every CPU
// bench header states it, the workbench's included.
std::string linear_backend_line();

// rows [N, C_in] @ weight^T + bias: without autograd on the CPU through the chosen GEMM (inside a
// row chunk, on that chunk's one core), otherwise as addmm with the bias fused (autograd, CUDA).
torch::Tensor rows_linear(const torch::nn::Linear& layer, const torch::Tensor& rows);
// The same into `out` [N, C_out] (a chunk's rows of a whole layer's output).
void rows_linear_into(torch::Tensor& out, const torch::nn::Linear& layer, const torch::Tensor& rows);

inline torch::Tensor token_linear(torch::nn::Linear& layer, const torch::Tensor& x) {
  const auto& weight = layer->weight;
  const auto& bias = layer->bias;
  if (x.dim() < 2) return layer->forward(x);
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
  out_shape.back() = weight.size(0);
  auto rows = x.reshape({-1, x.size(-1)});
  ScopedThreads all_cores(configured_threads());
  // With autograd, oneDNN when only the input wants a gradient (attributions freeze the parameters).
  if (x.device().is_cpu() && x.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat &&
      at::hasMKLDNN() && c10::GradMode::is_enabled() && x.requires_grad() && !weight.requires_grad() &&
      !(bias.defined() && bias.requires_grad()))
    return frozen_onednn_linear(rows, weight, bias).view(out_shape);
  return rows_linear(layer, rows).view(out_shape);
}

}  // namespace attnscope
