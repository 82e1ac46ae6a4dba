// The faithfulness figure: per attribution method its map over the image beside its deletion and
// insertion curves, each curve drawn against the random baseline with both AUCs. Model-free: drawn
// from a FaithfulnessTable (analyze's faithfulness and export's layout of that name).
#pragma once

#include <string>

#include "analysis/faithfulness_table.h"
#include "core/colormap.h"
#include "figures/figure.h"

namespace attnscope {

// input_rgb: the image as the model saw it; the maps are drawn over it with `opacity`.
Figure faithfulness_figure(const FaithfulnessTable& table, const RgbImage& input_rgb, Colormap colormap, float opacity,
                           const std::string& title);

}  // namespace attnscope
