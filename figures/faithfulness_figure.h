// The `faithfulness` figure layout: per attribution method its map over the image beside its
// deletion and insertion curves, each curve drawn against the random baseline with both AUCs.
#pragma once

#include <opencv2/core.hpp>
#include <string>

#include "analysis/faithfulness_table.h"
#include "figures/figure.h"
#include "models/model_loader.h"
#include "session/app_state.h"

namespace attnscope {

// The table an AppState's options ask for: --methods, --steps, --replacement, --class, the CAM
// layer (--gradcam-layer), the attention layer (--layer), rollout's --fusion and --discard, IG's
// --ig-steps and --ig-baseline. Throws std::invalid_argument naming a bad option.
FaithfulnessTableRequest faithfulness_request(const AppState& state);

// input_rgb: the image as the model saw it; the maps are drawn over it with `opacity`.
Figure faithfulness_figure(const FaithfulnessTable& table, const cv::Mat& input_rgb, Colormap colormap, float opacity,
                           const std::string& title);

}  // namespace attnscope

namespace attnscope {

struct FigureRequest;
struct RowModels;

// The layout as `export --layout faithfulness` builds it: the table for the first variant (on its own
// checkpoint when it names one, loaded through `rows`), then the figure.
Figure faithfulness_layout(const FigureRequest& request, LoadedModel& model, const cv::Mat& prepared_rgb,
                           const std::string& title, const RowModels* rows);

}  // namespace attnscope
