// A workbench request carried out, without threads: the forward pass of every panel (re-used where
// nothing it depends on changed), then the views of the selected layer and the analysis view. The
// inference worker (viewer/inference_worker.h) runs it on its thread; tests can run it directly.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/ablated_inference.h"
#include "models/model_cache.h"
#include "views/analysis_registry.h"
#include "views/view_model.h"

namespace attnscope {

// One panel's forward pass, shared (not copied) between runs that did not change it.
struct PanelForward {
  std::string input_key;  // the model and its prepared input
  AttentionSettings settings;
  std::shared_ptr<LoadedModel> model;
  std::shared_ptr<const InferenceResult> result;
  std::string preprocessing;
  std::string error;  // the panel's model could not load or run (panels 2..4 only)
};

// What a run re-uses from the runs before it.
struct RunCache {
  ModelCache models{kMaxPanels + 2};
  std::string image_key;
  RgbImage image_rgb;
  std::map<std::string, std::pair<std::string, RgbImage>> prepared;  // model key -> (input key, image)
  std::vector<PanelForward> forwards;                                // the last request's
  AnalysisCache analyses;
};

// Every panel's forward pass; `reused_all` says whether none had to run. Throws Cancelled when
// `cancelled` says so between blocks, and what panel 1's model throws (the others keep their error).
std::vector<PanelForward> forward_panels(const InferenceRequest& request, RunCache& cache,
                                         const std::function<bool()>& cancelled, bool& reused_all);

// The selected layer's maps on every panel and the analysis view (views/analysis_registry.h), which
// reports its progress through `progress` (may be empty).
void build_views(const InferenceRequest& request, const std::vector<PanelForward>& forwards, RunCache& cache,
                 const std::function<bool()>& cancelled, InferenceOutcome& outcome,
                 const std::function<void(int, int)>& progress = {});

// forward_panels then build_views into `outcome` (its error set instead of throwing, except for
// Cancelled).
void run_request(const InferenceRequest& request, RunCache& cache, const std::function<bool()>& cancelled,
                 InferenceOutcome& outcome, const std::function<void(int, int)>& progress = {});

}  // namespace attnscope
