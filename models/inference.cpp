#include "models/inference.h"

#include "models/head_ablation.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/finite_checks.h"

namespace attnscope {

RgbImage prepare_model_input(const RgbImage& rgb, const InputSettings& input, const InputGeometry& geometry,
                             const DeclaredPreprocessing& declared) {
  const Preprocessing used = resolve_preprocessing(input, declared);
  // --resize none at the native size takes the image as it is: any size the patches tile (the
  // position embedding follows, as the model's authors interpolate it).
  const bool image_as_is = used.resize == ResizeMode::None && input.input_size.native();
  if (image_as_is && !geometry.fixed) {
    if (rgb.rows > kMaxInputSide || rgb.cols > kMaxInputSide)
      throw std::invalid_argument("image is " + std::to_string(rgb.cols) + "x" + std::to_string(rgb.rows) +
                                  ": --resize none takes at most " + std::to_string(kMaxInputSide) +
                                  " pixels a side (use --resize timm or fit)");
    if (rgb.rows % geometry.multiple || rgb.cols % geometry.multiple)
      throw std::invalid_argument("image is " + std::to_string(rgb.cols) + "x" + std::to_string(rgb.rows) +
                                  ", not a multiple of " + std::to_string(geometry.multiple) +
                                  ", which this model's input sides must be (use --resize timm or fit, or crop it)");
    return prepare_image(rgb, used.resize, rgb.rows, rgb.cols);
  }
  const auto [height, width] =
      resolve_input_size(input.input_size, geometry.native_height, geometry.native_width, geometry.multiple);
  return prepare_image(rgb, used.resize, height, width, used.crop_pct, used.interpolation);
}

void configure_input(LoadedModel& model, const InputSettings& input) {
  const Preprocessing used = resolve_preprocessing(input, model.declared);
  model.normalization = used.normalization;
  model.normalization_source = used.normalization_source;
  model.input = input;
}

namespace {

std::string channel_text(const std::array<float, 3>& values) {
  std::ostringstream out;
  out << values[0] << "," << values[1] << "," << values[2];
  return out.str();
}

}  // namespace

nlohmann::json preprocessing_json(const LoadedModel& model, const InputSettings& input, const RgbImage& prepared) {
  const Preprocessing used = resolve_preprocessing(input, model.declared);
  nlohmann::json json = {
      {"input_size", {prepared.rows, prepared.cols}},
      {"resize", {{"mode", to_string(used.resize)}, {"source", used.resize_source}}},
      {"interpolation", {{"filter", to_string(used.interpolation)}, {"source", used.interpolation_source}}},
      {"mean", used.normalization.mean},
      {"std", used.normalization.std},
      {"normalization_source", used.normalization_source}};
  if (used.resize == ResizeMode::Timm) json["crop"] = {{"fraction", used.crop_pct}, {"source", used.crop_source}};
  return json;
}

std::string describe_preprocessing(const LoadedModel& model, const InputSettings& input, const RgbImage& prepared) {
  const Preprocessing used = resolve_preprocessing(input, model.declared);
  std::ostringstream out;
  out << prepared.cols << "x" << prepared.rows << ", " << to_string(used.resize);
  if (used.resize == ResizeMode::Timm) out << " crop " << used.crop_pct;
  if (used.resize != ResizeMode::None) out << " " << to_string(used.interpolation);
  out << " (" << used.resize_source << "); mean " << channel_text(used.normalization.mean) << " std "
      << channel_text(used.normalization.std) << " (" << used.normalization_source << ")";
  return out.str();
}

bool has_dwc_weights(const LoadedModel& model) {
  for (const auto& parameter : model.backbone->named_parameters(true)) {
    const std::string& name = parameter.key();
    if (name.size() >= 10 && name.compare(name.size() - 10, 10, "dwc.weight") == 0) return true;
  }
  return false;
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

InferenceResult run_inference(LoadedModel& model, const RgbImage& prepared_rgb, const AttentionSettings& settings,
                              const ForwardOptions& options) {
  if (model.is_scripted() && settings.variant != Variant::Native)
    throw std::invalid_argument("--variant " + to_string(settings.variant) +
                                ": a TorchScript file reports its own attention; swapping the kernel needs q and k "
                                "of a model attnscope implements natively");
  c10::InferenceMode inference_mode;
  InferenceResult result;
  result.input_rgb = prepared_rgb;
  result.device = model.device.str();
  prepare_head_ablation(model, settings, prepared_rgb.rows, prepared_rgb.cols, {}, options.cancelled);
  auto input = image_to_tensor(prepared_rgb, model.normalization).to(model.device);
  const auto start = std::chrono::steady_clock::now();
  result.forward = model.forward(input, settings, options);
  if (model.device.is_cuda()) torch::cuda::synchronize();
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  require_finite_output(model.backbone.get(), input, settings, result.forward.logits);
  // Embeddings and features have no classes: no made-up predictions.
  if (model.output_kind() == OutputKind::Logits)
    result.top = top_predictions(result.forward.logits[0], 5, model.class_names);
  return result;
}

}  // namespace attnscope
