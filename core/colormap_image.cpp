#include "core/colormap_image.h"

#include <cmath>
#include <stdexcept>

#include "core/cv_image.h"
#include "core/image_encode.h"

namespace attnscope {

cv::Mat colormap_table(Colormap colormap) {
  const ColourTable& table = colour_table(colormap);
  cv::Mat rgb(256, 1, CV_8UC3);
  for (int i = 0; i < 256; ++i)
    for (int c = 0; c < 3; ++c) rgb.at<cv::Vec3b>(i)[c] = table[size_t(i)][size_t(c)];
  return rgb;
}

void write_png_rgb(const std::string& path, const cv::Mat& rgb) { write_png(path, to_rgb_image(rgb)); }

}  // namespace attnscope
