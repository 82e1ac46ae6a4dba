// Figures and heatmap panels drawn as images, for the workbench's textures (figures/render.h draws them).
#pragma once

#include <opencv2/core.hpp>

#include "figures/render.h"

namespace attnscope {

// The figure as an 8-bit RGB image at the style's PNG size, exactly the pixels of its PNG: what
// the workbench shows its plots with, so screen and paper come from one drawing code.
cv::Mat render_figure_image(const Figure& figure, const FigureStyle& style);

// The 8-bit RGB image drawn for a heatmap panel (before scaling onto the page): colormap(values)
// through its scale, blended over the background when it has one.
cv::Mat heatmap_image(const HeatmapPanel& heatmap, const ColorScale& scale);

}  // namespace attnscope
