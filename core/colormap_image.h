// Colour maps as 256-entry RGB tables (the same tables feed the GUI's shader and every export),
// and the attention-over-image overlay.
#pragma once

#include <opencv2/core.hpp>
#include <string>

#include <torch/types.h>

#include "core/colormap.h"

namespace attnscope {

// 256 x 1 CV_8UC3, RGB order; entry i is the colour of value i / 255.
cv::Mat colormap_table(Colormap colormap);

// Values [H x W] CV_32F mapped through [vmin, vmax] (clamped) to RGB CV_8UC3.
cv::Mat apply_colormap(const cv::Mat& values, Colormap colormap, float vmin, float vmax);

// A map of values [rows x cols] CV_32F over an RGB image: each value becomes a block of pixels
// (nearest, so the grid stays visible), coloured and alpha-blended with weight `opacity`.
cv::Mat overlay_value_map(const cv::Mat& rgb, const cv::Mat& values, Colormap colormap, float opacity, float vmin,
                          float vmax);

// A patch-grid map [grid_h, grid_w] (any dtype/device) over an RGB image: each patch becomes a
// block of pixels (nearest, so the patch grid stays visible), coloured and alpha-blended.
cv::Mat overlay_patch_map(const cv::Mat& rgb, const torch::Tensor& grid_values, Colormap colormap, float opacity,
                          float vmin, float vmax);

// Writes an RGB image as PNG atomically (temporary file, then rename).
void write_png_rgb(const std::string& path, const cv::Mat& rgb);

}  // namespace attnscope
