// Linear layers on token tensors [..., C] for the forward pass.
#pragma once

#include <torch/torch.h>

#include <functional>
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
// DeiT-Small MLP and a Swin-T stage-0 qkv tile, and the faster is kept. oneDNN runs as its sgemm,
// writing straight into the output (or a block of its columns), where LibTorch's oneDNN exports
// it (Debian's does), else as at::mkldnn_linear with its copies in and out of oneDNN's layout.
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

// What a caller does to a linear layer's output before it is kept (an activation): elementwise, so
// that a block of the output's columns gives the same values as the whole output.
using ColumnEpilogue = std::function<torch::Tensor(const torch::Tensor& columns)>;

// Whether token_linear splits `rows` rows [N, C_in] of `input` (its device, type and grad mode) by
// the output's columns across the cores (see there): CPU inference in float32, more than one core,
// outside a parallel region, up to kColumnSplitMaxRows rows, kMinColumnsPerCore columns or more for
// each core (oneDNN is slow on narrower blocks: 197 rows x 96 columns of DeiT-Tiny's fc2 took
// 0.44 ms where 99 rows x 192 took 0.29) and work enough to pay for waking the cores.
bool splits_by_columns(int64_t rows, const torch::Tensor& input, const torch::Tensor& weight);
constexpr int64_t kColumnSplitMaxRows = 1024;
constexpr int64_t kMinColumnsPerCore = 128;

// x [..., C_in] through `layer`, then `epilogue` (may be empty) on the result. Without autograd on
// the CPU, at token counts up to kColumnSplitMaxRows, each core computes every row for a block of the
// output's columns and applies the epilogue to it, in one parallel region: a GEMM's time per row
// falls as its rows grow (each weight column loaded once serves them all), so 197 rows x half the
// columns took 0.55-0.75 ms where half the rows x all of them took 0.64-0.86 (DeiT-S's four
// layers on one core; docs/speed.md), and oneDNN splitting one product across two threads itself
// took 3.8 ms for DeiT-S's fc2. From about 1,000 rows splitting rows is faster again (1,370 rows:
// 4.3 against 4.7 ms), and token_linear runs on all cores as before. Each output element is the
// same dot product either way.
torch::Tensor token_linear(torch::nn::Linear& layer, const torch::Tensor& x, const ColumnEpilogue& epilogue = {});
// The same for a weight [C_out, C_in] and bias (may be undefined) given as tensors; x has 2 or more dims.
torch::Tensor token_linear(const torch::Tensor& weight, const torch::Tensor& bias, const torch::Tensor& x,
                           const ColumnEpilogue& epilogue = {});

}  // namespace attnscope
