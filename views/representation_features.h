// What the representation views (features, similarity, norms: views/analysis_{pca,similarity,norms}.cpp)
// share: their options, the token features of a workbench panel's forward pass kept in the
// AnalysisCache (so a click re-uses them), a facet's descriptors, a second image prepared for a
// model, and grid maps as figure heatmaps.
#pragma once

#include <memory>
#include <string>

#include "analysis/token_features.h"
#include "views/analysis_registry.h"

namespace attnscope {

// Where a figure's title may break into lines (figures/render.cpp breaks at this separator only).
constexpr const char* kTitleBreak = "  \u00b7  ";

// The prepared RGB image as the model's input tensor, on its device.
torch::Tensor model_input(const LoadedModel& model, const RgbImage& prepared);

// `path` read and prepared for `model` as the session prepares its own image.
RgbImage prepared_image(const std::string& path, const InputSelection& input, const LoadedModel& model);

// One forward pass of `image` that reads `layer`'s descriptors of `facet`: the block's output for
// Facet::Token, else its capture's query, key or value.
TokenRows layer_descriptors(Backbone& model, const torch::Tensor& image, const AttentionSettings& settings, int layer,
                            Facet facet);

// The tokens at hook point `point` of a workbench panel's input: one forward pass with the hook,
// kept in the AnalysisCache under the panel's forward (its input key and settings).
std::shared_ptr<const TokenRows> panel_token_rows(const AnalysisViewInput& input, const PanelForwardView& panel,
                                                  const std::string& point);

// A panel's descriptors of `facet` at `layer`: a capture's query, key or value (no forward pass),
// or the block's output (panel_token_rows).
std::shared_ptr<const TokenRows> panel_descriptors(const AnalysisViewInput& input, const PanelForwardView& panel,
                                                   int layer, Facet facet);

// Patch values [N] (or channel `channel` of [N, k]), row-major over `layout`'s grid, as a figure's
// values [grid_h, grid_w]. Prefix tokens are the caller's to drop.
GridMap patch_grid_values(const torch::Tensor& patch_values, const TokenLayout& layout, int channel = -1);

}  // namespace attnscope
