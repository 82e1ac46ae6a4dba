#include "analysis/gradcam.h"

#include "core/excerpt.h"
#include "models/finite_checks.h"

#include <torch/torch.h>

#include <chrono>
#include <opencv2/imgproc.hpp>
#include <sstream>

namespace attnscope {

namespace {

using torch::indexing::Slice;

// Switches every parameter's requires_grad off for a scope (no weight gradients are wanted) and
// restores what it was.
class FrozenParameters {
 public:
  explicit FrozenParameters(torch::nn::Module& module) : parameters_(module.parameters()) {
    for (auto& parameter : parameters_) {
      was_required_.push_back(parameter.requires_grad());
      parameter.set_requires_grad(false);
    }
  }
  ~FrozenParameters() {
    for (size_t i = 0; i < parameters_.size(); ++i) parameters_[i].set_requires_grad(was_required_[i]);
  }
  FrozenParameters(const FrozenParameters&) = delete;
  FrozenParameters& operator=(const FrozenParameters&) = delete;

 private:
  std::vector<torch::Tensor> parameters_;
  std::vector<bool> was_required_;
};

}  // namespace

torch::Tensor patch_rows(const torch::Tensor& value, const HookPoint& point, int64_t batch) {
  const torch::Tensor item = value[batch];
  switch (point.format) {
    case HookPoint::Format::Tokens:
      return item.index({Slice(point.layout.prefix_tokens())});
    case HookPoint::Format::ChannelsLast:
      return item.reshape({-1, item.size(-1)});
    case HookPoint::Format::ChannelsFirst:
      return item.reshape({item.size(0), -1}).t();
  }
  throw std::logic_error("patch_rows: unknown format");
}

GradCamResult grad_cam(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                       const GradCamOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  GradCamResult result;
  result.layer = model.resolve_hook_point(options.layer);
  // Models without classes (CLIP's embedding, DINOv2's or a pooler's features) are explained
  // through one output dimension (--class C) or, by default, the output's L2 norm.
  const std::string output_kind = model.output_kind();
  const bool has_classes = output_kind == "logits";
  const int num_classes = model.num_classes();
  if (has_classes && options.target_class >= num_classes)
    throw std::invalid_argument("--class " + std::to_string(options.target_class) + ": the model has " +
                                std::to_string(num_classes) + " classes (0.." + std::to_string(num_classes - 1) + ")");

  FrozenParameters frozen(model);
  torch::AutoGradMode grad_mode(true);
  // An input made under InferenceMode cannot take part in autograd; a plain copy can.
  const torch::Tensor input = image.is_inference() ? image.clone() : image;
  torch::Tensor activation;
  HookPoint hooked;
  ForwardOptions forward_options;
  forward_options.capture = false;
  forward_options.hook = [&](const HookPoint& point, torch::Tensor& value) {
    if (point.name != result.layer) return;
    // A fresh leaf: autograd records from here on only, the earlier blocks ran without a graph.
    value = value.detach().requires_grad_(true);
    activation = value;
    hooked = point;
  };
  ForwardOutput output = model.forward(input, settings, forward_options);
  if (!activation.defined()) throw std::logic_error("Grad-CAM: the forward pass never reached " + result.layer);
  require_finite_output(&model, input, settings, output.logits.detach());
  result.layout = hooked.layout;
  auto logits = output.logits[0];
  result.logits = logits.detach().to(torch::kCPU, torch::kFloat);
  if (options.target_class >= logits.size(0))
    throw std::invalid_argument("--class " + std::to_string(options.target_class) + ": the " + output_kind + " has " +
                                std::to_string(logits.size(0)) + " dimensions");
  const bool norm_target = !has_classes && options.target_class < 0;
  result.target_class =
      options.target_class >= 0 || norm_target ? options.target_class : int(result.logits.argmax().item<int64_t>());
  auto score = norm_target ? logits.norm() : logits[result.target_class];
  result.score = score.item<double>();
  torch::Tensor gradient;
  if (score.requires_grad())
    gradient = torch::autograd::grad({score}, {activation}, {}, /*retain_graph=*/false, /*create_graph=*/false,
                                     /*allow_unused=*/true)[0];
  if (!gradient.defined()) gradient = torch::zeros_like(activation);

  torch::NoGradGuard no_grad;
  const TokenLayout& layout = result.layout;
  auto patch_activations = patch_rows(activation.detach(), hooked).to(torch::kCPU, torch::kFloat);  // [N, C]
  auto patch_gradients = patch_rows(gradient, hooked).to(torch::kCPU, torch::kFloat);
  result.max_abs_gradient = patch_gradients.abs().max().item<double>();
  result.weights = patch_gradients.mean(0);                                    // [C]
  auto cam = torch::matmul(patch_activations, result.weights).clamp_min(0.0);  // [N]
  result.cam = cam.reshape({layout.grid_h, layout.grid_w}).contiguous();
  result.scaled = (result.cam - result.cam.min());
  result.scaled = result.scaled / (result.scaled.max() + 1e-7);
  require_finite(result.scaled, "the Grad-CAM map at " + result.layer);
  if (result.max_abs_gradient == 0.0) {
    std::ostringstream warning;
    warning << "the gradient of class " << result.target_class << " is zero on every patch token at " << result.layer
            << " (the class score does not depend on the patch tokens there";
    if (layout.has_class_token) warning << ": after the last attention only the class token reaches the head";
    warning << "); the map is empty, pick an earlier layer such as " << model.default_hook_point();
    result.warning = warning.str();
  }
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

torch::Tensor upsample_map(const torch::Tensor& grid_map, int height, int width) {
  auto values = grid_map.detach().to(torch::kCPU, torch::kFloat).contiguous();
  cv::Mat grid(int(values.size(0)), int(values.size(1)), CV_32F, values.data_ptr<float>());
  cv::Mat resized;
  cv::resize(grid, resized, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
  return torch::from_blob(resized.data, {height, width}, torch::kFloat).clone();
}

}  // namespace attnscope
