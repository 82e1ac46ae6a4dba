#include "analysis/gradcam.h"

#include "core/excerpt.h"
#include "models/finite_checks.h"

#include <torch/torch.h>

#include <chrono>
#include <optional>
#include <sstream>

#include "analysis/cam_methods.h"
#include "analysis/frozen_parameters.h"

namespace attnscope {

using torch::indexing::Slice;

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

LayerReading read_layer(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                        const std::string& layer, const AttributionTarget& target, bool with_gradient) {
  LayerReading reading;
  reading.point.name = model.resolve_hook_point(layer);
  check_target(model, target);
  FrozenParameters frozen(model);
  std::optional<c10::InferenceMode> inference;
  if (!with_gradient) inference.emplace();
  torch::AutoGradMode grad_mode(with_gradient);
  // An input made under InferenceMode cannot take part in autograd; a plain copy can.
  const torch::Tensor input = with_gradient && image.is_inference() ? image.clone() : image;
  ForwardOptions forward_options;
  forward_options.capture = false;
  forward_options.hook = [&](const HookPoint& point, torch::Tensor& value) {
    if (point.name != reading.point.name) return;
    // A fresh leaf: autograd records from here on only, the earlier blocks ran without a graph.
    if (with_gradient) value = value.detach().requires_grad_(true);
    reading.activation = value;
    reading.point = point;
  };
  ForwardOutput output = model.forward(input, settings, forward_options);
  if (!reading.activation.defined()) throw std::logic_error("the forward pass never reached " + reading.point.name);
  require_finite_output(&model, input, settings, output.logits.detach());
  const torch::Tensor logits = output.logits[0];
  reading.logits = logits.detach().to(torch::kCPU, torch::kFloat);
  reading.target = resolve_target(model, target, reading.logits);
  const torch::Tensor score = target_scores(output.logits, reading.target)[0];
  reading.score = score.item<double>();
  if (with_gradient) {
    if (score.requires_grad())
      reading.gradient = torch::autograd::grad({score}, {reading.activation}, {}, /*retain_graph=*/false,
                                               /*create_graph=*/false, /*allow_unused=*/true)[0];
    if (!reading.gradient.defined()) reading.gradient = torch::zeros_like(reading.activation);
  }
  reading.activation = reading.activation.detach();
  return reading;
}

GradCamResult grad_cam(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                       const GradCamOptions& options) {
  // Grad-CAM is the CAM family's first method: one computation (analysis/cam_methods.h), read here
  // with the raw map after its ReLU, as pytorch-grad-cam's GradCAM keeps it.
  CamOptions cam_options;
  cam_options.method = CamMethod::GradCam;
  cam_options.layer = options.layer;
  cam_options.target = options.target;
  const CamResult cam = class_activation_map(model, image, settings, cam_options);
  GradCamResult result;
  result.layer = cam.layer;
  result.layout = cam.layout;
  result.logits = cam.logits;
  result.target_class = cam.target.kind == TargetKind::Class ? cam.target.index : -1;
  result.target = cam.target;
  result.score = cam.score;
  result.weights = cam.weights;
  result.cam = cam.cam.clamp_min(0.0);
  result.scaled = cam.scaled;
  result.max_abs_gradient = cam.max_abs_gradient;
  result.warning = cam.warning;
  result.milliseconds = cam.milliseconds;
  return result;
}

std::string zero_gradient_warning(const Backbone& model, const LayerReading& reading) {
  std::ostringstream warning;
  warning << "the gradient of " << describe(reading.target) << " is zero on every patch token at " << reading.point.name
          << " (the score does not depend on the patch tokens there";
  if (reading.point.layout.has_class_token)
    warning << ": after the last attention only the class token reaches the head";
  warning << "); the map is empty, pick an earlier layer such as " << model.default_hook_point();
  return warning.str();
}

torch::Tensor upsample_map(const torch::Tensor& grid_map, int height, int width) {
  // The same two-tap formula as cv2's INTER_LINEAR (source x = (x + 0.5) * scale - 0.5, clamped at
  // the edges), in float32 as the references compute it.
  namespace F = torch::nn::functional;
  const auto values = grid_map.detach().to(torch::kCPU, torch::kFloat).contiguous();
  return F::interpolate(values.unsqueeze(0).unsqueeze(0), F::InterpolateFuncOptions()
                                                              .size(std::vector<int64_t>{height, width})
                                                              .mode(torch::kBilinear)
                                                              .align_corners(false))[0][0]
      .contiguous();
}

}  // namespace attnscope
