// The summary.json of `attnscope run`: what ran (model, layout, attention, query, preprocessing,
// overlay scale) and every layer's ranks, as docs/output_schemas.md lists its keys (kind "run").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/value_scale.h"
#include "models/inference.h"
#include "session/app_state.h"

namespace attnscope {

struct RunSummaryInputs {
  const AppState& state;
  const LoadedModel& model;
  const InferenceResult& result;
  const RgbImage& prepared;  // the model's input image
  int layer;                 // the layer whose row, matrix and overlay were written
  const ResolvedQuery& query;
  const ValueScale& overlay_scale;
  bool after_lcm;               // the maps are L2ViT's after its LCM mixing
  const std::string& lcm_note;  // why, or why not, when --lcm after was asked; else empty
};

// Computes the layers' spectra as --ranks asks (run_spectra), and the query row's entropy per head.
nlohmann::json run_summary(const RunSummaryInputs& in);

}  // namespace attnscope
