#include "analysis/integrated_gradients.h"

#include <torch/torch.h>

#include <chrono>

#include "analysis/cam_methods.h"
#include "analysis/frozen_parameters.h"

namespace attnscope {

IntegratedGradientsResult integrated_gradients(Backbone& model, const torch::Tensor& image,
                                               const AttentionSettings& settings, const Normalization& normalization,
                                               const IntegratedGradientsOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.steps < 2 || options.steps > 10000)
    throw std::invalid_argument("--ig-steps must be from 2 to 10000, got " + std::to_string(options.steps));
  check_target(model, options.target);
  IntegratedGradientsResult result;
  result.steps = options.steps;
  const torch::Tensor input = image.detach().clone();
  ForwardOptions plain;
  plain.capture = false;
  torch::Tensor baseline;
  {
    c10::InferenceMode inference;
    const ForwardOutput output = model.forward(input, settings, plain);
    result.layout = output.layout;
    result.logits = output.logits[0].to(torch::kCPU, torch::kFloat);
    result.target = resolve_target(model, options.target, result.logits);
    result.score = target_scores(output.logits, result.target)[0].item<double>();
    const double sigma = options.blur_sigma > 0 ? options.blur_sigma : double(result.layout.patch_size);
    baseline = replacement_image(input, options.baseline, sigma, normalization).clone();
    result.baseline_score =
        target_scores(model.forward(baseline, settings, plain).logits, result.target)[0].item<double>();
  }
  baseline = baseline.clone();  // out of inference mode: it takes part in autograd below

  FrozenParameters frozen(model);
  torch::AutoGradMode grad_mode(true);
  const torch::Tensor difference = input - baseline;
  const int steps = options.steps;
  const int batch = std::max(1, options.batch);
  // Captum's riemann_trapezoid: alphas 0, 1/(n-1), ..., 1; weights 1/(n-1), halved at both ends.
  torch::Tensor accumulated = torch::zeros_like(input);
  for (int begin = 0; begin < steps; begin += batch) {
    const int count = std::min(batch, steps - begin);
    auto alphas = torch::arange(begin, begin + count, torch::TensorOptions().dtype(torch::kDouble)) / double(steps - 1);
    auto weights = torch::full({count}, 1.0 / double(steps - 1), torch::kDouble);
    if (begin == 0) weights[0] = 0.5 / double(steps - 1);
    if (begin + count == steps) weights[count - 1] = 0.5 / double(steps - 1);
    alphas = alphas.to(input.scalar_type()).to(input.device()).view({count, 1, 1, 1});
    weights = weights.to(input.scalar_type()).to(input.device()).view({count, 1, 1, 1});
    auto points = (baseline + alphas * difference).detach().requires_grad_(true);
    const ForwardOutput output = model.forward(points, settings, plain);
    const auto score = target_scores(output.logits, result.target).sum();
    const auto gradient = torch::autograd::grad({score}, {points})[0];
    accumulated = accumulated + (gradient.detach() * weights).sum(0, /*keepdim=*/true);
    if (options.progress && !options.progress(begin + count, steps)) throw Cancelled();
  }
  torch::NoGradGuard no_grad;
  result.attributions = (difference * accumulated)[0].to(torch::kCPU, torch::kFloat);
  result.completeness_gap =
      result.attributions.to(torch::kDouble).sum().item<double>() - (result.score - result.baseline_score);
  result.pixel_map = result.attributions.abs().sum(0);
  const TokenLayout& layout = result.layout;
  const int64_t cell_h = image.size(2) / layout.grid_h, cell_w = image.size(3) / layout.grid_w;
  result.patch_map = result.pixel_map.narrow(0, 0, layout.grid_h * cell_h)
                         .narrow(1, 0, layout.grid_w * cell_w)
                         .reshape({layout.grid_h, cell_h, layout.grid_w, cell_w})
                         .sum({1, 3});
  result.scaled = scale_cam_image(result.patch_map);
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace attnscope
