#include "analysis/relevance.h"

#include <torch/torch.h>

#include <chrono>

#include "analysis/frozen_parameters.h"
#include "analysis/rollout.h"

namespace attnscope {

std::string to_string(RelevanceRule rule) { return rule == RelevanceRule::Chefer ? "relevance" : "gradrollout"; }

namespace {

// The read-out the propagated row vector starts from: the class token, or (global average pooling)
// the mean of the patch tokens, which is what such a model's head reads.
torch::Tensor readout_vector(const TokenLayout& layout, std::string& name) {
  auto start = torch::zeros({1, int64_t(layout.total_tokens())});
  if (layout.has_class_token) {
    start[0][0] = 1.0;
    name = "class token row";
  } else {
    start.narrow(1, layout.prefix_tokens(), layout.patch_tokens()).fill_(1.0 / layout.patch_tokens());
    name = "mean of the patch rows (no class token)";
  }
  return start;
}

}  // namespace

RelevanceResult attention_relevance(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                                    const RelevanceOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::string method = to_string(options.rule);
  if (!model.computes_attention())
    throw std::invalid_argument(method +
                                " differentiates the attention probabilities inside the model's graph; a TorchScript "
                                "file only reports them after the fact");
  check_target(model, options.target);
  RelevanceResult result;
  result.rule = options.rule;

  FrozenParameters frozen(model);
  torch::AutoGradMode grad_mode(true);
  const torch::Tensor input = image.is_inference() ? image.clone() : image;
  std::vector<torch::Tensor> probabilities;
  ForwardOptions forward_options;
  forward_options.capture = true;  // the layers' grids and stages, to pick the layers that share one
  forward_options.attention_hook = [&](const AttentionHookPoint& point, torch::Tensor& value) {
    // Nothing before the first attention needs a gradient: the graph starts at its probabilities.
    if (!value.requires_grad()) value = value.detach().requires_grad_(true);
    if (probabilities.size() <= size_t(point.layer)) probabilities.resize(size_t(point.layer) + 1);
    probabilities[size_t(point.layer)] = value;
  };
  ForwardOutput output = model.forward(input, settings, forward_options);
  const int depth = int(output.layers.size());
  const int selected = options.layer < 0 ? depth + options.layer : options.layer;
  if (selected < 0 || selected >= depth)
    throw std::invalid_argument("--layer " + std::to_string(options.layer) + ": the model has " +
                                std::to_string(depth) + " attention layers");
  try {
    result.layers = rollout_layers(output.layers, selected);  // throws where keys are not the queries
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(method + " propagates through the layers like rollout: " + e.what());
  }
  std::vector<torch::Tensor> chosen;
  for (int layer : result.layers) {
    if (size_t(layer) >= probabilities.size() || !probabilities[size_t(layer)].defined())
      throw std::invalid_argument(
          method + " is not available for the " + model.family() + " family: it differentiates each layer's " +
          "attention probabilities, and this family's layers (" + output.layers[size_t(layer)].placement.name +
          " and the others) do not hand theirs to autograd (ForwardOptions::attention_hook); the CAM methods and ig " +
          "work on it");
    chosen.push_back(probabilities[size_t(layer)]);
  }
  result.logits = output.logits[0].detach().to(torch::kCPU, torch::kFloat);
  result.target = resolve_target(model, options.target, result.logits);
  const torch::Tensor score = target_scores(output.logits, result.target)[0];
  result.score = score.item<double>();
  const auto gradients = torch::autograd::grad({score}, chosen, {}, /*retain_graph=*/false, /*create_graph=*/false,
                                               /*allow_unused=*/true);

  torch::NoGradGuard no_grad;
  result.layout = output.layers[size_t(selected)].layout;
  torch::Tensor row = readout_vector(result.layout, result.readout);
  // Row `readout` of R = F_L ... F_1, multiplied from the last layer down: O(L T^2), no T x T products.
  for (size_t i = chosen.size(); i-- > 0;) {
    const auto attention = chosen[i].detach()[0].to(torch::kCPU, torch::kFloat);  // [h, T, T]
    const auto gradient =
        gradients[i].defined() ? gradients[i][0].to(torch::kCPU, torch::kFloat) : torch::zeros_like(attention);
    if (options.rule == RelevanceRule::Chefer) {
      const auto fused = (gradient * attention).clamp_min(0.0).mean(0);  // R += A_bar R
      row = row + torch::matmul(row, fused);
    } else {
      const auto fused = (attention * gradient).mean(0).clamp_min(0.0);
      row = torch::matmul(row, rollout_factor(fused, options.discard_ratio));
    }
  }
  result.row = row[0];
  const TokenLayout& layout = result.layout;
  result.patch_map = result.row.slice(0, layout.prefix_tokens()).reshape({layout.grid_h, layout.grid_w}).contiguous();
  if (options.rule == RelevanceRule::Chefer) {
    const auto low = result.patch_map.min(), range = result.patch_map.max() - low;
    result.normalised = (result.patch_map - low) / range.clamp_min(1e-30);
  } else {
    result.normalised = result.patch_map / result.patch_map.max().clamp_min(1e-30);
  }
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace attnscope
