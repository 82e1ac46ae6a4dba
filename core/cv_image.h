// Between the engine's RgbImage and OpenCV's cv::Mat, for the code that draws (views, figures,
// exports) and the glyph generator. Not part of the engine-only build.
#pragma once

#include <opencv2/core.hpp>

#include "core/rgb_image.h"

namespace attnscope {

// A CV_8UC3 copy (RGB order, as RgbImage has it); an empty image gives an empty Mat.
cv::Mat to_mat(const RgbImage& image);
// A copy of an 8-bit 3-channel Mat (RGB order); throws ImageError for any other type.
RgbImage to_rgb_image(const cv::Mat& rgb);

}  // namespace attnscope
