#include "analysis/focus_metrics.h"

#include <torch/torch.h>

namespace attnscope {

torch::Tensor patch_coverage(const torch::Tensor& mask, const TokenLayout& layout) {
  auto object = (mask.detach().to(torch::kCPU) != 0).to(torch::kFloat).reshape({1, 1, mask.size(-2), mask.size(-1)});
  const int64_t patch = layout.patch_size;
  object = object.index({torch::indexing::Slice(), torch::indexing::Slice(),
                         torch::indexing::Slice(0, layout.grid_h * patch),
                         torch::indexing::Slice(0, layout.grid_w * patch)});
  return torch::nn::functional::avg_pool2d(object, torch::nn::functional::AvgPool2dFuncOptions(patch)).reshape({-1});
}

namespace {
torch::Tensor clamped(const torch::Tensor& map) {
  return map.detach().to(torch::kCPU, torch::kDouble).clamp_min(0.0).reshape({-1});
}
}  // namespace

double mass_inside(const torch::Tensor& patch_map, const torch::Tensor& coverage) {
  auto values = clamped(patch_map);
  const double total = values.sum().item<double>();
  if (total <= 0) return 0.0;
  return (values * (coverage.to(torch::kDouble) > 0)).sum().item<double>() / total;
}

bool pointing_hit(const torch::Tensor& patch_map, const torch::Tensor& coverage) {
  const int64_t peak = patch_map.detach().to(torch::kCPU).reshape({-1}).argmax().item<int64_t>();
  return coverage[peak].item<float>() > 0;
}

double top_k_mass(const torch::Tensor& patch_map, int k) {
  auto values = clamped(patch_map);
  const double total = values.sum().item<double>();
  if (total <= 0) return 0.0;
  k = std::min<int>(k, int(values.numel()));
  return std::get<0>(values.topk(k)).sum().item<double>() / total;
}

double gini(const torch::Tensor& patch_map) {
  auto values = std::get<0>(clamped(patch_map).sort());
  const int64_t n = values.numel();
  const double total = values.sum().item<double>();
  if (n == 0 || total <= 0) return 0.0;
  // G = sum_i (2i - n - 1) x_i / (n sum x), with x sorted ascending and i from 1.
  auto rank = torch::arange(1, n + 1, torch::kDouble);
  return ((2 * rank - double(n) - 1) * values).sum().item<double>() / (double(n) * total);
}

}  // namespace attnscope
