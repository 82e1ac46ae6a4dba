// Integrated gradients (Sundararajan et al. 2017) on the input image: the path integral of the
// target's gradient from a baseline image to the input, by Captum's riemann_trapezoid rule, shown
// as a map (|attribution| summed over the colour channels, per pixel and per patch).
#pragma once

#include <torch/types.h>

#include <functional>

#include "analysis/attribution_target.h"
#include "analysis/perturbation.h"
#include "models/backbone.h"

namespace attnscope {

struct IntegratedGradientsOptions {
  int steps = 50;                            // points on the path, both ends included (>= 2)
  Replacement baseline = Replacement::Zero;  // zero (Captum's default), black, mean or blur
  double blur_sigma = 0.0;                   // blur baseline: pixels; 0: one patch of the first layer
  AttributionTarget target;                  // what is differentiated (resolve_target_spec); default: the top-1 class
  int batch = 16;                            // path points per forward and backward pass
  std::function<bool(int done, int total)> progress;  // after each batch; false stops (throws Cancelled)
};

struct IntegratedGradientsResult {
  AttributionTarget target;
  double score = 0.0;           // the target on the input
  double baseline_score = 0.0;  // ... and on the baseline
  torch::Tensor logits;         // [K], CPU
  torch::Tensor attributions;   // [3, H, W] (input - baseline) * mean gradient along the path
  torch::Tensor pixel_map;      // [H, W] sum over channels of |attributions|
  torch::Tensor patch_map;      // [gh, gw] pixel_map summed over each patch of the first attention layer
  torch::Tensor scaled;         // [gh, gw] (x - min) / (max - min + 1e-7) of patch_map
  TokenLayout layout;           // the patch grid
  // Completeness: sum of the attributions minus (score - baseline_score); shrinks with more steps.
  double completeness_gap = 0.0;
  int steps = 0;
  double milliseconds = 0.0;
};

// image: [1, 3, H, W] prepared (normalised) input; `normalization` gives the black baseline.
IntegratedGradientsResult integrated_gradients(Backbone& model, const torch::Tensor& image,
                                               const AttentionSettings& settings, const Normalization& normalization,
                                               const IntegratedGradientsOptions& options = {});

}  // namespace attnscope
