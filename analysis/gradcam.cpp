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

std::string layer_choices(int depth, bool has_final_norm) {
  std::string choices = "blocks.N.norm1, blocks.N.norm2 or blocks.N with N in -" + std::to_string(depth) + ".." +
                        std::to_string(depth - 1);
  if (has_final_norm) choices += ", or norm";
  return choices;
}

}  // namespace

std::string resolve_gradcam_layer(const std::string& spec, int depth, bool has_final_norm) {
  const std::string bad =
      "--gradcam-layer '" + excerpt(spec) + "' does not exist: use " + layer_choices(depth, has_final_norm);
  if (spec == "norm") {
    if (!has_final_norm) throw std::invalid_argument(bad);
    return spec;
  }
  const std::string prefix = "blocks.";
  if (spec.compare(0, prefix.size(), prefix) != 0) throw std::invalid_argument(bad);
  const std::string rest = spec.substr(prefix.size());
  const size_t dot = rest.find('.');
  const std::string index_text = rest.substr(0, dot);
  const std::string point = dot == std::string::npos ? "" : rest.substr(dot + 1);
  if (point != "" && point != "norm1" && point != "norm2") throw std::invalid_argument(bad);
  int block = 0;
  try {
    size_t used = 0;
    block = std::stoi(index_text, &used);
    if (used != index_text.size()) throw std::invalid_argument(bad);
  } catch (const std::exception&) {
    throw std::invalid_argument(bad);
  }
  if (block < -depth || block >= depth) throw std::invalid_argument(bad);
  if (block < 0) block += depth;
  return prefix + std::to_string(block) + (point.empty() ? "" : "." + point);
}

GradCamResult grad_cam(VisionTransformerImpl& model, const torch::Tensor& image, const AttentionSettings& settings,
                       const GradCamOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  GradCamResult result;
  const VitArch& arch = model.arch();
  result.layer = resolve_gradcam_layer(options.layer, arch.depth, arch.final_norm);
  // Models without classes (CLIP's embedding, DINOv2's or a pooler's features) are explained
  // through one output dimension (--class C) or, by default, the output's L2 norm.
  const bool has_classes = arch.output_kind == "logits";
  if (has_classes && options.target_class >= arch.num_classes)
    throw std::invalid_argument("--class " + std::to_string(options.target_class) + ": the model has " +
                                std::to_string(arch.num_classes) + " classes (0.." +
                                std::to_string(arch.num_classes - 1) + ")");

  FrozenParameters frozen(model);
  torch::AutoGradMode grad_mode(true);
  // An input made under InferenceMode cannot take part in autograd; a plain copy can.
  const torch::Tensor input = image.is_inference() ? image.clone() : image;
  torch::Tensor activation;
  ForwardOptions forward_options;
  forward_options.capture = false;
  forward_options.hook = [&](const std::string& point, torch::Tensor& value) {
    if (point != result.layer) return;
    // A fresh leaf: autograd records from here on only, the earlier blocks ran without a graph.
    value = value.detach().requires_grad_(true);
    activation = value;
  };
  ForwardOutput output = model.forward(input, settings, forward_options);
  if (!activation.defined()) throw std::logic_error("Grad-CAM: the forward pass never reached " + result.layer);
  require_finite_output(&model, input, settings, output.logits.detach());
  result.layout = output.layout;
  auto logits = output.logits[0];
  result.logits = logits.detach().to(torch::kCPU, torch::kFloat);
  if (options.target_class >= logits.size(0))
    throw std::invalid_argument("--class " + std::to_string(options.target_class) + ": the " + arch.output_kind +
                                " has " + std::to_string(logits.size(0)) + " dimensions");
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
  const int64_t prefix = layout.prefix_tokens();
  auto patch_activations = activation.detach()[0].index({Slice(prefix)}).to(torch::kCPU, torch::kFloat);  // [N, C]
  auto patch_gradients = gradient[0].index({Slice(prefix)}).to(torch::kCPU, torch::kFloat);
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
    warning << "); the map is empty, pick an earlier layer such as blocks." << arch.depth - 1 << ".norm1";
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
