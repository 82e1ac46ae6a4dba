#include "models/inference.h"

#include <chrono>

#include "models/finite_checks.h"

namespace attnscope {

cv::Mat prepare_model_input(const cv::Mat& rgb, const AppState& state, const VitArch& arch) {
  // --resize none at the native size takes the image as it is: any size the patches tile (the
  // position embedding follows, as the model's authors interpolate it).
  const bool image_as_is =
      state.resize == ResizeMode::None && (state.input_size.empty() || state.input_size == "native");
  if (image_as_is && arch.source_layout != "torchscript") {
    if (rgb.rows > kMaxInputSide || rgb.cols > kMaxInputSide)
      throw std::invalid_argument("image is " + std::to_string(rgb.cols) + "x" + std::to_string(rgb.rows) +
                                  ": --resize none takes at most " + std::to_string(kMaxInputSide) +
                                  " pixels a side (use --resize timm or fit)");
    if (rgb.rows % arch.patch_size || rgb.cols % arch.patch_size)
      throw std::invalid_argument("image is " + std::to_string(rgb.cols) + "x" + std::to_string(rgb.rows) +
                                  ", not a multiple of the patch size " + std::to_string(arch.patch_size) +
                                  " (use --resize timm or fit, or crop it)");
    return prepare_image(rgb, state.resize, rgb.rows, rgb.cols);
  }
  const auto [height, width] =
      resolve_input_size(state.input_size, arch.native_height(), arch.native_width(), arch.patch_size);
  return prepare_image(rgb, state.resize, height, width);
}

std::vector<Prediction> top_predictions(const torch::Tensor& logits, int k, const std::vector<std::string>& names) {
  auto row = logits.detach().to(torch::kCPU, torch::kFloat).reshape({-1});
  auto probabilities = row.softmax(0);
  k = std::min<int>(k, int(row.numel()));
  auto best = std::get<1>(row.topk(k));
  std::vector<Prediction> top;
  for (int i = 0; i < k; ++i) {
    Prediction p;
    p.index = int(best[i].item<int64_t>());
    p.name = p.index < int(names.size()) ? names[size_t(p.index)] : "class " + std::to_string(p.index);
    p.logit = row[p.index].item<double>();
    p.probability = probabilities[p.index].item<double>();
    top.push_back(p);
  }
  return top;
}

InferenceResult run_inference(LoadedModel& model, const cv::Mat& prepared_rgb, const AttentionSettings& settings,
                              const ForwardOptions& options) {
  if (model.is_scripted() && settings.variant != Variant::Native)
    throw std::invalid_argument("--variant " + to_string(settings.variant) +
                                ": a TorchScript file reports its own attention; swapping the kernel needs q and k "
                                "of a model attnscope implements natively");
  c10::InferenceMode inference_mode;
  InferenceResult result;
  result.input_rgb = prepared_rgb;
  result.device = model.device.str();
  auto input = image_to_tensor(prepared_rgb, model.normalization).to(model.device);
  const auto start = std::chrono::steady_clock::now();
  result.forward = model.forward(input, settings, options);
  if (model.device.is_cuda()) torch::cuda::synchronize();
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  require_finite_output(model.is_scripted() ? nullptr : model.model.get(), input, settings, result.forward.logits);
  // Embeddings and features have no classes: no made-up predictions.
  if (model.arch.output_kind == "logits") result.top = top_predictions(result.forward.logits[0], 5, model.class_names);
  return result;
}

}  // namespace attnscope
