#include "analysis/effective_receptive_field.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis/frozen_parameters.h"
#include "analysis/gradcam.h"

namespace attnscope {

torch::Tensor input_gradient_map(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                                 const std::string& hook_point) {
  const std::string name = model.resolve_hook_point(hook_point);
  FrozenParameters frozen(model);
  torch::AutoGradMode grad_mode(true);
  const torch::Tensor input = image.detach().clone().requires_grad_(true);
  torch::Tensor feature;
  HookPoint point;
  ForwardOptions options;
  options.capture = false;
  options.hook = [&](const HookPoint& at, torch::Tensor& value) {
    if (at.name != name) return;
    feature = value;
    point = at;
  };
  model.forward(input, settings, options);
  if (!feature.defined()) throw std::logic_error("the forward pass never reached " + name);
  const TokenLayout& grid = point.layout;
  const int64_t centre = int64_t(grid.grid_h / 2) * grid.grid_w + grid.grid_w / 2;
  const torch::Tensor objective = torch::relu(patch_rows(feature, point)[centre]).sum();
  const torch::Tensor gradient = torch::autograd::grad({objective}, {input}, {}, /*retain_graph=*/false,
                                                       /*create_graph=*/false, /*allow_unused=*/true)[0];
  torch::NoGradGuard no_grad;
  if (!gradient.defined()) return torch::zeros({input.size(2), input.size(3)}, torch::kDouble);
  return torch::relu(gradient[0]).sum(0).to(torch::kCPU, torch::kDouble);
}

const std::vector<double>& erf_thresholds() {
  static const std::vector<double> thresholds = {0.2, 0.3, 0.5, 0.99};
  return thresholds;
}

std::vector<ErfArea> erf_area_ratios(const torch::Tensor& map) {
  const torch::Tensor data = torch::log10(map.to(torch::kCPU, torch::kDouble) + 1.0);
  const int64_t height = data.size(0), width = data.size(1);
  const double all = data.sum().item<double>();
  // The share of each square the anchor tries, i = 1 .. H // 2 - 1.
  std::vector<double> shares;
  for (int64_t i = 1; i < height / 2; ++i) {
    const int64_t top = std::max<int64_t>(height / 2 - i, 0), left = std::max<int64_t>(width / 2 - i, 0);
    const int64_t bottom = std::min(height / 2 + 1 + i, height), right = std::min(width / 2 + 1 + i, width);
    shares.push_back(data.slice(0, top, bottom).slice(1, left, right).sum().item<double>() / all);
  }
  std::vector<ErfArea> areas;
  for (double threshold : erf_thresholds()) {
    ErfArea area;
    area.threshold = threshold;
    area.ratio = std::numeric_limits<double>::quiet_NaN();
    for (size_t k = 0; k < shares.size(); ++k)
      if (shares[k] > threshold) {
        const int64_t side = 2 * int64_t(k + 1) + 1;
        area.side = int(side);
        area.ratio = double(side) / double(height) * double(side) / double(width);
        break;
      }
    areas.push_back(area);
  }
  return areas;
}

}  // namespace attnscope
