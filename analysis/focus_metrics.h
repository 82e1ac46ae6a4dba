// How well an attention map points at a known object: attention mass inside it, the pointing
// game, and the summary numbers per map (entropy, top-k mass, Gini).
#pragma once

#include <torch/types.h>

#include "models/token_layout.h"

namespace attnscope {

// Fraction of each patch covered by a binary mask [H, W] (any dtype, nonzero = object):
// [grid_h * grid_w] in token order.
torch::Tensor patch_coverage(const torch::Tensor& mask, const TokenLayout& layout);

// Share of a map's patch mass [N] (negative entries clamped to 0) on patches the object touches.
double mass_inside(const torch::Tensor& patch_map, const torch::Tensor& coverage);

// The pointing game: does the map's peak patch touch the object?
bool pointing_hit(const torch::Tensor& patch_map, const torch::Tensor& coverage);

// Share of the map's mass in its k largest entries.
double top_k_mass(const torch::Tensor& patch_map, int k);

// Gini coefficient of the map's (clamped) values: 0 uniform, towards 1 concentrated.
double gini(const torch::Tensor& patch_map);

}  // namespace attnscope
