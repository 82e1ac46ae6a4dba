// One inference on one image: the prepared input, the forward pass with its captures, the class
// probabilities and timing. The CLI and the GUI's worker both call this.
#pragma once

#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "core/image.h"
#include "models/model_loader.h"

namespace attnscope {

struct Prediction {
  int index = 0;
  std::string name;
  double logit = 0.0;
  double probability = 0.0;
};

struct InferenceResult {
  ForwardOutput forward;        // logits, token layout, per-layer captures
  cv::Mat input_rgb;            // the image exactly as the model saw it (after resize/crop)
  std::vector<Prediction> top;  // top-5
  double milliseconds = 0.0;    // forward pass including capture, device synchronised
  std::string device;
};

// The model's input image for the resize mode and input size.
cv::Mat prepare_model_input(const cv::Mat& rgb, const InputSettings& input, const InputGeometry& geometry);
inline cv::Mat prepare_model_input(const cv::Mat& rgb, const InputSettings& input, const LoadedModel& model) {
  return prepare_model_input(rgb, input, model.backbone->input_geometry());
}

// Runs the model under InferenceMode (no autograd) on an already prepared RGB image.
InferenceResult run_inference(LoadedModel& model, const cv::Mat& prepared_rgb, const AttentionSettings& settings,
                              const ForwardOptions& options = {});

std::vector<Prediction> top_predictions(const torch::Tensor& logits, int k, const std::vector<std::string>& names);

}  // namespace attnscope
