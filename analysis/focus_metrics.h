// How well an attention map points at a known object: attention mass inside it, the pointing
// game, and the summary numbers per map (entropy, top-k mass, Gini).
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>
#include <vector>

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

// A rectangle of patches the user drew: rows [row_begin, row_end), columns [col_begin, col_end).
struct PatchBox {
  int row_begin = 0, col_begin = 0, row_end = 0, col_end = 0;
};

// Parses "R0,C0,R1,C1" (end-exclusive patch coordinates); throws std::invalid_argument.
PatchBox parse_patch_box(const std::string& text);

// 1 for patches inside the box, 0 elsewhere: [grid_h * grid_w] in token order, usable as `coverage`.
// Throws std::invalid_argument when the box is empty or leaves the grid.
torch::Tensor box_coverage(const PatchBox& box, const TokenLayout& layout);

// The numbers the focus view shows for one patch map [N] (e.g. one head's query row without the
// prefix tokens), with the mass inside a user box and inside the object where those are given.
struct FocusSummary {
  double entropy = 0.0;  // nats, of the clamped map renormalised over the patches
  double top_k_mass = 0.0;
  double gini = 0.0;
  std::optional<double> box_mass, object_mass;
};
FocusSummary summarise_focus(const torch::Tensor& patch_map, int top_k, const torch::Tensor& box = {},
                             const torch::Tensor& object = {});

// The focus metrics of one head's map (the metrics view), and every side-by-side panel's.
struct HeadFocusMetrics {
  int head = 0;
  double entropy = 0, top_k_mass = 0, gini = 0;
  std::optional<double> box_mass;  // without a box: none
};
constexpr int kFocusTopK = 10;
struct PanelFocusMetrics {
  std::vector<std::vector<HeadFocusMetrics>> panels;  // per panel, per head
  std::string box_error;                              // why the box cannot be used on panel 1's grid
};

// How close a map is to uniform: its entropy (negative entries clamped, renormalised) as a fraction
// of log(n), the entropy of a uniform map over its n entries (1 = uniform, 0 = one entry).
double uniformity(const torch::Tensor& map);

// "swapped softmax: entropy 99 % of uniform" when a swapped kernel's map is near uniform (from
// `threshold` on), so nobody mistakes a kernel the model was not trained for for its attention;
// empty otherwise.
std::string near_uniform_note(const std::string& kernel, double uniformity, double threshold = 0.9);

}  // namespace attnscope
