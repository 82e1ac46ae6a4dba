// core/value_overlay.h for cv::Mat, for the code that draws with OpenCV (not in the engine-only
// build).
#pragma once

#include <opencv2/core.hpp>

#include "core/value_scale.h"

namespace attnscope {

// Values [rows x cols] CV_32F coloured through `scale`: RGB CV_8UC3.
cv::Mat colour_values(const cv::Mat& values, const ValueScale& scale);

// A map of values [rows x cols] over an RGB image: each value becomes a block of pixels (nearest,
// so the grid stays visible), coloured and blended with the alpha `mode` gives at `opacity`.
cv::Mat overlay_values(const cv::Mat& rgb, const cv::Mat& values, const ValueScale& scale, double opacity,
                       OverlayAlpha mode);

}  // namespace attnscope
