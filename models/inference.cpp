#include "models/inference.h"

#include <chrono>

namespace attnscope {

cv::Mat prepare_model_input(const cv::Mat& rgb, const AppState& state, const VitArch& arch) {
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
  c10::InferenceMode inference_mode;
  InferenceResult result;
  result.input_rgb = prepared_rgb;
  result.device = model.device.str();
  auto input = image_to_tensor(prepared_rgb).to(model.device);
  const auto start = std::chrono::steady_clock::now();
  result.forward = model.model->forward(input, settings, options);
  if (model.device.is_cuda()) torch::cuda::synchronize();
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  result.top = top_predictions(result.forward.logits[0], 5, model.class_names);
  return result;
}

}  // namespace attnscope
