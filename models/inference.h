// One inference on one image: the prepared input, the forward pass with its captures, the class
// probabilities and timing. The CLI and the GUI's worker both call this.
#pragma once

#include <nlohmann/json_fwd.hpp>
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
  RgbImage input_rgb;           // the image exactly as the model saw it (after resize/crop)
  std::vector<Prediction> top;  // top-5
  double milliseconds = 0.0;    // forward pass including capture, device synchronised
  std::string device;
};

// The model's input image for the input settings, filling what they leave open with what the
// checkpoint declares (`declared`), else timm's defaults.
RgbImage prepare_model_input(const RgbImage& rgb, const InputSettings& input, const InputGeometry& geometry,
                             const DeclaredPreprocessing& declared = {});
inline RgbImage prepare_model_input(const RgbImage& rgb, const InputSettings& input, const LoadedModel& model) {
  return prepare_model_input(rgb, input, model.backbone->input_geometry(), model.declared);
}

// Sets the normalisation the model's input gets: --mean/--std where given, else what the checkpoint
// declares. Every command calls it once the model is loaded; the workbench before each run.
void configure_input(LoadedModel& model, const InputSettings& input);

// The preprocessing a run used, as summary.json records it: size, resize, crop, interpolation, mean
// and std, each with its source.
nlohmann::json preprocessing_json(const LoadedModel& model, const InputSettings& input, const RgbImage& prepared);
// The same in one line for the workbench: "96x96 timm crop 0.875 bicubic (default); mean ... (ImageNet)".
std::string describe_preprocessing(const LoadedModel& model, const InputSettings& input, const RgbImage& prepared);

// Whether the model has FLatten's depthwise conv weights (so the DWC switch changes anything).
bool has_dwc_weights(const LoadedModel& model);

// Runs the model under InferenceMode (no autograd) on an already prepared RGB image.
InferenceResult run_inference(LoadedModel& model, const RgbImage& prepared_rgb, const AttentionSettings& settings,
                              const ForwardOptions& options = {});

std::vector<Prediction> top_predictions(const torch::Tensor& logits, int k, const std::vector<std::string>& names);

}  // namespace attnscope
