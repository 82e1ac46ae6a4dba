// Several attribution methods on one image, each map measured by deletion and insertion curves,
// beside the random baseline: the numbers behind `analyze --analysis faithfulness`, its figure and eval.
#pragma once

#include <string>
#include <vector>

#include "analysis/attribution.h"
#include "analysis/faithfulness.h"

namespace attnscope {

struct MethodFaithfulness {
  AttributionMap map;
  Faithfulness curves;
};

struct FaithfulnessTable {
  int target_class = 0;      // the class every map explains and every curve records; -1: another target
  AttributionTarget target;  // resolved: what every map explains and every curve records
  double probability = 0.0;  // its probability on the image (another target: its score)
  std::vector<MethodFaithfulness> methods;
  Faithfulness random;  // mean of random orders of the first map's cells
  FaithfulnessOptions options;
};

struct FaithfulnessTableRequest {
  std::vector<AttributionMethod> methods;
  // Everything but the method and the class, for every map (layers, rollout's fusion, IG's steps).
  AttributionRequest attribution;
  FaithfulnessOptions faithfulness;  // its target picks what the curves record (default: the top-1 class)
  std::function<void(const std::string& method, size_t done, size_t total)> progress;  // before each method
};

// image: [1, 3, H, W] prepared input. Throws std::invalid_argument as the methods and the probe do.
FaithfulnessTable faithfulness_table(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                                     const Normalization& normalization, const FaithfulnessTableRequest& request);

}  // namespace attnscope
