// Colour maps as 256-entry RGB tables for the workbench's shader and colour bars and the figures'
// colour bars (core/colormap.h's tables as cv::Mat; overlays are core/value_overlay.h's), and the
// workbench's PNG writer for cv::Mat.
#pragma once

#include <opencv2/core.hpp>
#include <string>

#include "core/colormap.h"

namespace attnscope {

// 256 x 1 CV_8UC3, RGB order; entry i is the colour of value i / 255.
cv::Mat colormap_table(Colormap colormap);

// Writes an RGB image as PNG atomically (temporary file, then rename).
void write_png_rgb(const std::string& path, const cv::Mat& rgb);

}  // namespace attnscope
