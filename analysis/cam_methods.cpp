#include "analysis/cam_methods.h"

#include <torch/torch.h>

#include <chrono>

#include "analysis/gradcam.h"
#include "core/excerpt.h"
#include "models/finite_checks.h"

namespace attnscope {

namespace {

namespace F = torch::nn::functional;

// Channel weights from activations and gradients [N, C] (pytorch-grad-cam's get_cam_weights; its
// sums over axis=(2, 3) are sums over the N patches here).
torch::Tensor gradient_weights(CamMethod method, const torch::Tensor& activations, const torch::Tensor& gradients) {
  switch (method) {
    case CamMethod::GradCam:
      return gradients.mean(0);
    case CamMethod::GradCamPlusPlus: {
      // Grad-CAM++'s alpha (its eq. 19) with exp(score) dropped, as the library computes it.
      const auto squared = gradients.pow(2);
      const auto cubed = squared * gradients;
      const auto activation_sums = activations.sum(0, /*keepdim=*/true);
      auto alpha = squared / (2 * squared + activation_sums * cubed + 1e-6);
      alpha = torch::where(gradients != 0, alpha, torch::zeros_like(alpha));
      return (gradients.clamp_min(0) * alpha).sum(0);
    }
    case CamMethod::XGradCam:
      return (gradients * activations / (activations.sum(0, /*keepdim=*/true) + 1e-7)).sum(0);
    default:
      break;
  }
  throw std::logic_error("gradient_weights: not a weighted-sum method");
}

// EigenCAM (get_2d_projection): the centred activations projected on their first right singular
// vector, with LAPACK's sign as numpy and torch return it (the library does not fix the sign).
torch::Tensor first_component_projection(const torch::Tensor& activations) {
  auto rows = torch::nan_to_num(activations, 0.0, 0.0, 0.0);
  rows = rows - rows.mean(0, /*keepdim=*/true);
  const auto [u, s, vh] = torch::linalg_svd(rows, /*full_matrices=*/true);
  return torch::matmul(rows, vh[0]);
}

// Score-CAM's channel weights: softmax over channels of the target's score on the image multiplied
// by each channel's activation map, upsampled (bilinear, align_corners=True as
// nn.UpsamplingBilinear2d) and min-max normalised.
torch::Tensor score_weights(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                            const torch::Tensor& channel_maps, const AttributionTarget& target,
                            const CamOptions& options, int& forward_passes) {
  c10::InferenceMode inference;
  const int64_t channels = channel_maps.size(0);
  const int64_t batch = std::max(1, options.score_batch);
  const auto input = image.to(torch::kFloat);
  ForwardOptions forward_options;
  forward_options.capture = false;
  std::vector<torch::Tensor> scores;
  for (int64_t begin = 0; begin < channels; begin += batch) {
    const int64_t count = std::min(batch, channels - begin);
    auto masks = F::interpolate(channel_maps.narrow(0, begin, count).unsqueeze(0).to(image.device()),
                                F::InterpolateFuncOptions()
                                    .size(std::vector<int64_t>{image.size(2), image.size(3)})
                                    .mode(torch::kBilinear)
                                    .align_corners(true))[0];  // [count, H, W]
    const auto flat = masks.reshape({count, -1});
    const auto lows = flat.amin(1).view({count, 1, 1}), highs = flat.amax(1).view({count, 1, 1});
    masks = (masks - lows) / (highs - lows + 1e-8);
    const auto masked = input * masks.unsqueeze(1);  // [count, 3, H, W]
    const ForwardOutput output = model.forward(masked, settings, forward_options);
    scores.push_back(target_scores(output.logits, target).to(torch::kCPU, torch::kFloat));
    ++forward_passes;
    if (options.progress && !options.progress(int(begin + count), int(channels))) throw Cancelled();
  }
  return torch::cat(scores).softmax(0);
}

}  // namespace

CamMethod parse_cam_method(const std::string& name) {
  const AttributionMethod* method = find_enum<AttributionMethod>(name);
  if (method && reads_hook_point(*method)) return *method;
  std::string known;
  for (const auto& entry : enum_entries<AttributionMethod>())
    if (reads_hook_point(entry.value)) known += std::string(known.empty() ? "" : ", ") + entry.name;
  throw std::invalid_argument("unknown CAM method '" + excerpt(name) + "' (expected " + known + ")");
}

bool uses_gradients(CamMethod method) { return method != CamMethod::EigenCam && method != CamMethod::ScoreCam; }

torch::Tensor scale_cam_image(const torch::Tensor& map) {
  auto shifted = map - map.min();
  return shifted / (shifted.max() + 1e-7);
}

torch::Tensor gradient_cam(CamMethod method, const torch::Tensor& activations, const torch::Tensor& gradients,
                           torch::Tensor* weights) {
  switch (method) {
    case CamMethod::GradCam:
    case CamMethod::GradCamPlusPlus:
    case CamMethod::XGradCam: {
      const torch::Tensor channel_weights = gradient_weights(method, activations, gradients);
      if (weights) *weights = channel_weights;
      return torch::matmul(activations, channel_weights);
    }
    case CamMethod::LayerCam:
      return (gradients.clamp_min(0) * activations).sum(1);
    case CamMethod::HiResCam:
      return (gradients * activations).sum(1);
    default:
      break;
  }
  throw std::logic_error("gradient_cam: " + to_string(method) + " does not read gradients");
}

CamResult class_activation_map(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                               const CamOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const CamMethod method = options.method;
  const LayerReading reading =
      read_layer(model, image, settings, options.layer, options.target, uses_gradients(method));
  CamResult result;
  result.method = method;
  result.layer = reading.point.name;
  result.layout = reading.point.layout;
  result.logits = reading.logits;
  result.target = reading.target;
  result.score = reading.score;

  torch::NoGradGuard no_grad;
  // pytorch-grad-cam's reshape_transform: the patch tokens only, [N, C] in grid order here.
  const auto activations = patch_rows(reading.activation, reading.point).to(torch::kCPU, torch::kFloat);
  torch::Tensor gradients;
  if (uses_gradients(method)) {
    gradients = patch_rows(reading.gradient, reading.point).to(torch::kCPU, torch::kFloat);
    result.max_abs_gradient = gradients.abs().max().item<double>();
    if (result.max_abs_gradient == 0.0) result.warning = zero_gradient_warning(model, reading);
  }
  torch::Tensor cam;
  switch (method) {
    case CamMethod::GradCam:
    case CamMethod::GradCamPlusPlus:
    case CamMethod::XGradCam:
    case CamMethod::LayerCam:
    case CamMethod::HiResCam:
      cam = gradient_cam(method, activations, gradients, &result.weights);
      break;
    case CamMethod::EigenCam:
      cam = first_component_projection(activations);
      break;
    case CamMethod::ScoreCam: {
      const auto channel_maps =
          activations.t().reshape({activations.size(1), result.layout.grid_h, result.layout.grid_w});
      result.weights =
          score_weights(model, image, settings, channel_maps, reading.target, options, result.forward_passes);
      cam = torch::matmul(activations, result.weights);
      break;
    }
    default:
      throw std::invalid_argument(to_string(method) + " is not a CAM method: it reads no hook point");
  }
  result.cam = cam.reshape({result.layout.grid_h, result.layout.grid_w}).contiguous();
  result.scaled = scale_cam_image(result.cam.clamp_min(0.0));
  require_finite(result.scaled, "the " + to_string(method) + " map at " + result.layer);
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

torch::Tensor cam_at_image_size(const torch::Tensor& scaled, int height, int width) {
  return scale_cam_image(upsample_map(scaled, height, width));
}

}  // namespace attnscope
