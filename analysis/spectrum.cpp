#include "analysis/spectrum.h"

#include <torch/torch.h>

#include <cfloat>

namespace attnscope {

Spectrum matrix_spectrum(const torch::Tensor& matrix) {
  torch::NoGradGuard no_grad;
  Spectrum spectrum;
  auto values = torch::linalg::svdvals(matrix.detach().to(torch::kFloat), c10::nullopt).to(torch::kCPU);
  spectrum.singular_values = values;
  if (values.numel() == 0) return spectrum;
  const double largest = values[0].item<double>();
  spectrum.tolerance = largest * double(std::max(matrix.size(0), matrix.size(1))) * double(FLT_EPSILON);
  spectrum.numerical_rank = int((values > spectrum.tolerance).sum().item<int64_t>());
  auto total = values.to(torch::kDouble).sum().item<double>();
  if (total > 0) {
    auto p = values.to(torch::kDouble) / total;
    auto positive = p.masked_select(p > 0);
    spectrum.effective_rank = std::exp(-(positive * positive.log()).sum().item<double>());
  }
  return spectrum;
}

double row_entropy(const torch::Tensor& row) {
  torch::NoGradGuard no_grad;
  auto p = row.detach().to(torch::kCPU, torch::kDouble).clamp_min(0.0);
  const double total = p.sum().item<double>();
  if (total <= 0) return 0.0;
  p = p / total;
  auto positive = p.masked_select(p > 0);
  return -(positive * positive.log()).sum().item<double>();
}

}  // namespace attnscope
