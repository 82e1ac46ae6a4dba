// The effective receptive field as RepLKNet-pytorch measures it (erf/visualize_erf.py's
// get_input_grad, erf/analyze_erf.py's get_rectangle): how much each input pixel moves the centre of
// a block's feature map, and the smallest centred squares that hold a share of it.
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "models/backbone.h"

namespace attnscope {

// [H, W] for one image [1, 3, H, W] (the normalised input): ReLU of the gradient of
// sum_c ReLU(F_c(gh // 2, gw // 2)) with respect to the input, summed over the colour channels,
// where F is the feature map at `hook_point` (a block's output: a ViT's patch tokens on their grid,
// a hierarchical stage's map). CPU float64. No parameter gradient is formed.
torch::Tensor input_gradient_map(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings,
                                 const std::string& hook_point);

// The thresholds analyze_erf.py reports.
const std::vector<double>& erf_thresholds();

struct ErfArea {
  double threshold = 0.0;
  int side = 0;        // the square's side in pixels; 0 when no square it tries holds that share
  double ratio = 0.0;  // side^2 / (H W); NaN when side is 0
};

// get_rectangle on log10(map + 1) for each threshold: the first centred square of side 2i + 1
// (i = 1 .. H // 2 - 1) whose share of the sum is strictly greater than the threshold. The map's
// absolute scale matters (log10(x + 1)). Squares are clamped to the map where a side is shorter
// than the other (the anchor's slices wrap around there).
std::vector<ErfArea> erf_area_ratios(const torch::Tensor& map);

}  // namespace attnscope
