// Every attribution method by one name, each giving one map over a grid of image cells: the CAM
// family at a hook point, attention relevance and gradient rollout, attention rollout, a layer's
// attention and integrated gradients. `analyze`, `eval`, the faithfulness table, the figures and
// the workbench all compute maps through here.
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "analysis/attribution_method.h"
#include "analysis/attribution_target.h"
#include "analysis/head_fusion.h"
#include "analysis/perturbation.h"
#include "models/backbone.h"

namespace attnscope {

struct AttributionRequest {
  AttributionMethod method = AttributionMethod::GradCam;
  std::string layer;                     // CAM family: the hook point (empty: the family's default)
  int attention_layer = -1;              // attention: the layer shown; rollout, relevance, gradrollout: the layer
                                         // whose group they propagate through (every layer of a ViT)
  AttributionTarget target;              // what is differentiated (resolve_target_spec); default: the top-1 class
  HeadFusion fusion = HeadFusion::Mean;  // rollout
  double discard = 0.0;                  // rollout, gradrollout
  int ig_steps = 50;
  Replacement ig_baseline = Replacement::Zero;
  std::function<bool(int done, int total)> progress;  // Score-CAM and integrated gradients
};

struct AttributionMap {
  AttributionMethod method = AttributionMethod::GradCam;
  torch::Tensor map;          // [gh, gw] in [0, 1] by the method's own normalisation, CPU float32
  torch::Tensor raw;          // [gh, gw] the values before it
  TokenLayout layout;         // the map's grid; patch_size is a cell's side in pixels
  std::string where;          // what it was read at: "blocks.3.norm1", "layers 0..3", "input"
  std::string normalisation;  // in words
  int target_class = -1;      // the class explained; -1: not a class (norm, prompt, image) or none (attention, rollout)
  AttributionTarget target;   // resolved; the default for attention and rollout
  bool class_specific = true;
  std::string warning;
  double milliseconds = 0.0;
};

// image: [1, 3, H, W] prepared input. `captures` (the layers of a forward pass of this image with
// these settings) spares attention and rollout a forward pass. Throws std::invalid_argument for a
// method, layer or class that does not apply, saying why.
AttributionMap compute_attribution(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                                   const Normalization& normalization, const AttributionRequest& request,
                                   const std::vector<AttentionCapture>* captures = nullptr);

}  // namespace attnscope
