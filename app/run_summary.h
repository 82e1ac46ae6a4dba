// The summary.json of `attnscope run`: what ran (model, layout, attention, query, preprocessing,
// overlay scale) and every layer's ranks, as docs/output_schemas.md lists its keys (kind "run").
#pragma once

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <string>

#include "core/value_scale.h"
#include "models/inference.h"
#include "session/app_state.h"

namespace attnscope {

struct RunSummaryInputs {
  const AppState& state;
  const LoadedModel& model;
  const InferenceResult& result;
  const cv::Mat& prepared;  // the model's input image
  int layer;                // the layer whose row, matrix and overlay were written
  const ResolvedQuery& query;
  const ValueScale& overlay_scale;
  bool after_lcm;               // the maps are L2ViT's after its LCM mixing
  const std::string& lcm_note;  // why, or why not, when --lcm after was asked; else empty
};

// Computes the layers' spectra as --ranks asks (run_spectra), and the query row's entropy per head.
nlohmann::json run_summary(const RunSummaryInputs& in);

// Whether one head's exact spectrum is cheap: its kernel has thin factors, its layer is windowed,
// or the matrix has at most kCheapSpectrumTokens rows or columns; else it is a full SVD, O(T^3).
constexpr int64_t kCheapSpectrumTokens = 400;
bool exact_spectrum_is_cheap(const AttentionCapture& layer, int64_t head);

}  // namespace attnscope
