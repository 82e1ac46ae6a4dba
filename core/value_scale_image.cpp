#include "core/value_scale_image.h"

#include <opencv2/imgproc.hpp>

#include "core/colormap_image.h"

namespace attnscope {

cv::Mat colour_values(const cv::Mat& values, const ValueScale& scale) {
  CV_Assert(values.type() == CV_32FC1);
  const cv::Mat table = colormap_table(scale.colormap);
  cv::Mat rgb(values.size(), CV_8UC3);
  for (int y = 0; y < values.rows; ++y)
    for (int x = 0; x < values.cols; ++x)
      rgb.at<cv::Vec3b>(y, x) = table.at<cv::Vec3b>(scale.table_index(double(values.at<float>(y, x))));
  return rgb;
}

cv::Mat overlay_values(const cv::Mat& rgb, const cv::Mat& values, const ValueScale& scale, double opacity,
                       OverlayAlpha mode) {
  CV_Assert(rgb.type() == CV_8UC3 && values.type() == CV_32FC1);
  const cv::Mat table = colormap_table(scale.colormap);
  cv::Mat full;
  cv::resize(values, full, rgb.size(), 0, 0, cv::INTER_NEAREST);
  cv::Mat blended(rgb.size(), CV_8UC3);
  for (int y = 0; y < rgb.rows; ++y) {
    for (int x = 0; x < rgb.cols; ++x) {
      const double value = double(full.at<float>(y, x));
      const double a = scale.alpha(value, opacity, mode);
      const cv::Vec3b& colour = table.at<cv::Vec3b>(scale.table_index(value));
      const cv::Vec3b& base = rgb.at<cv::Vec3b>(y, x);
      cv::Vec3b& out = blended.at<cv::Vec3b>(y, x);
      for (int c = 0; c < 3; ++c) out[c] = cv::saturate_cast<uint8_t>(base[c] * (1.0 - a) + colour[c] * a);
    }
  }
  return blended;
}

}  // namespace attnscope
