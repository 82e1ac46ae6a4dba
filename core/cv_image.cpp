#include "core/cv_image.h"

#include <cstring>
#include <string>

namespace attnscope {

cv::Mat to_mat(const RgbImage& image) {
  if (image.empty()) return {};
  cv::Mat mat(image.rows, image.cols, CV_8UC3);
  for (int y = 0; y < image.rows; ++y) std::memcpy(mat.ptr<uint8_t>(y), image.row(y), image.row_bytes());
  return mat;
}

RgbImage to_rgb_image(const cv::Mat& rgb) {
  if (rgb.empty()) return {};
  if (rgb.type() != CV_8UC3)
    throw ImageError("an 8-bit 3-channel image is needed, got " + std::to_string(rgb.cols) + "x" +
                     std::to_string(rgb.rows) + " with " + std::to_string(rgb.channels()) + " channel(s) of depth " +
                     std::to_string(rgb.depth()));
  RgbImage image(rgb.rows, rgb.cols);
  for (int y = 0; y < rgb.rows; ++y) std::memcpy(image.row(y), rgb.ptr<uint8_t>(y), image.row_bytes());
  return image;
}

}  // namespace attnscope
