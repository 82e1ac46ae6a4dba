#include "analysis/focus_metrics.h"

#include <cstdio>
#include "core/excerpt.h"

#include <torch/torch.h>

#include <sstream>

#include "analysis/spectrum.h"

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

PatchBox parse_patch_box(const std::string& text) {
  PatchBox box;
  char c1 = 0, c2 = 0, c3 = 0, extra = 0;
  std::istringstream in(text);
  if (!(in >> box.row_begin >> c1 >> box.col_begin >> c2 >> box.row_end >> c3 >> box.col_end) || c1 != ',' ||
      c2 != ',' || c3 != ',' || (in >> extra))
    throw std::invalid_argument("--box expects R0,C0,R1,C1 in patches (end-exclusive), got '" + excerpt(text) + "'");
  if (box.row_begin < 0 || box.col_begin < 0 || box.row_end <= box.row_begin || box.col_end <= box.col_begin)
    throw std::invalid_argument("--box " + excerpt(text) + " is empty or negative");
  return box;
}

torch::Tensor box_coverage(const PatchBox& box, const TokenLayout& layout) {
  if (box.row_begin < 0 || box.col_begin < 0 || box.row_end <= box.row_begin || box.col_end <= box.col_begin ||
      box.row_end > layout.grid_h || box.col_end > layout.grid_w)
    throw std::invalid_argument("box rows " + std::to_string(box.row_begin) + ".." + std::to_string(box.row_end) +
                                ", columns " + std::to_string(box.col_begin) + ".." + std::to_string(box.col_end) +
                                " does not fit the " + std::to_string(layout.grid_h) + "x" +
                                std::to_string(layout.grid_w) + " patch grid");
  auto coverage = torch::zeros({layout.grid_h, layout.grid_w});
  coverage.index_put_(
      {torch::indexing::Slice(box.row_begin, box.row_end), torch::indexing::Slice(box.col_begin, box.col_end)}, 1.0);
  return coverage.reshape({-1});
}

FocusSummary summarise_focus(const torch::Tensor& patch_map, int top_k, const torch::Tensor& box,
                             const torch::Tensor& object) {
  FocusSummary summary;
  summary.entropy = row_entropy(patch_map);
  summary.top_k_mass = top_k_mass(patch_map, top_k);
  summary.gini = gini(patch_map);
  if (box.defined()) summary.box_mass = mass_inside(patch_map, box);
  if (object.defined()) summary.object_mass = mass_inside(patch_map, object);
  return summary;
}

double uniformity(const torch::Tensor& map) {
  const torch::Tensor values = map.detach().reshape({-1}).to(torch::kCPU, torch::kDouble).clamp_min(0.0);
  const int64_t n = values.numel();
  const double total = values.sum().item<double>();
  if (n < 2 || !(total > 0)) return 1.0;
  const torch::Tensor p = values / total;
  const double entropy = -(p * torch::log(p.clamp_min(1e-300))).sum().item<double>();
  return entropy / std::log(double(n));
}

std::string near_uniform_note(const std::string& kernel, double uniformity, double threshold) {
  if (uniformity < threshold) return "";
  char text[160];
  std::snprintf(text, sizeof text, "swapped %s: entropy %.0f %% of uniform", kernel.c_str(), 100.0 * uniformity);
  return text;
}

}  // namespace attnscope
