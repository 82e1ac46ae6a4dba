#include "core/value_scale_image.h"

#include "core/cv_image.h"
#include "core/value_overlay.h"

namespace attnscope {

namespace {

// Rows without gaps (a view into a larger Mat is copied).
cv::Mat continuous_floats(const cv::Mat& values) {
  CV_Assert(values.type() == CV_32FC1);
  return values.isContinuous() ? values : values.clone();
}

}  // namespace

cv::Mat colour_values(const cv::Mat& values, const ValueScale& scale) {
  if (values.empty()) return cv::Mat(values.size(), CV_8UC3);
  const cv::Mat floats = continuous_floats(values);
  return to_mat(colour_values(ValueGrid{floats.ptr<float>(), floats.rows, floats.cols}, scale));
}

cv::Mat overlay_values(const cv::Mat& rgb, const cv::Mat& values, const ValueScale& scale, double opacity,
                       OverlayAlpha mode) {
  CV_Assert(rgb.type() == CV_8UC3);
  const cv::Mat floats = continuous_floats(values);
  return to_mat(overlay_values(to_rgb_image(rgb), ValueGrid{floats.ptr<float>(), floats.rows, floats.cols}, scale,
                               opacity, mode));
}

}  // namespace attnscope
