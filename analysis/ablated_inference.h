// A forward with heads ablated that resumes from the unablated run, for the workbench's worker and
// `run` alike (the engine-only build's too).
#pragma once

#include <memory>
#include <string>

#include "analysis/analysis_cache.h"
#include "analysis/residual_stream.h"
#include "models/inference.h"

namespace attnscope {

// A forward with heads ablated (settings.ablation) that resumes at the first ablated block from the
// unablated run of the same input and settings, recorded once (with captures and block inputs) and
// kept in `cache` under `input_key`: a click on a head redraws at the cost of the blocks after it.
// A model that is not a ViT goes through run_inference, which refuses the ablation with the reason.
struct AblatedInference {
  std::shared_ptr<InferenceResult> result;
  std::shared_ptr<const ResidualRun> unablated;  // null for a model that is not a ViT
  double unablated_milliseconds = 0;             // the unablated run's forward, when it ran now (0: cached)
};
AblatedInference ablated_inference(LoadedModel& model, const RgbImage& prepared, const AttentionSettings& settings,
                                   const ForwardOptions& options, const std::string& input_key, AnalysisCache& cache);

}  // namespace attnscope
