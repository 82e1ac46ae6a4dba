// Figures and heatmap panels drawn as images, for the workbench's textures (figures/render.h draws them).
#pragma once

#include <opencv2/core.hpp>

#include <string>

#include "figures/render.h"

namespace attnscope {

// The figure as an 8-bit RGB image at the style's PNG size, exactly the pixels of its PNG: what
// the workbench shows its plots with, so screen and paper come from one drawing code.
cv::Mat render_figure_image(const Figure& figure, const FigureStyle& style);

// A figure as it will print, for a preview on screen: drawn at `screen_dpi` (1 pt = screen_dpi / 72
// px), with its size and the range of its text sizes in points.
struct PrintPreview {
  cv::Mat image;  // RGB
  double width_pt = 0, height_pt = 0;
  double smallest_text_pt = 0, largest_text_pt = 0;
  std::string note;  // small_text_note of the style it was set in
};
PrintPreview print_preview(const Figure& figure, FigureStyle style, double screen_dpi = 96.0);

// The 8-bit RGB image drawn for a heatmap panel (before scaling onto the page): colormap(values)
// through its scale, blended over the background when it has one.
cv::Mat heatmap_image(const HeatmapPanel& heatmap, const ColorScale& scale);

}  // namespace attnscope
