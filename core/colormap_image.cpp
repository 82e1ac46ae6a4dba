#include "core/colormap_image.h"

#include <cmath>
#include <stdexcept>

#include "core/cv_image.h"
#include "core/image_encode.h"
#include "core/value_scale_image.h"

namespace attnscope {

cv::Mat colormap_table(Colormap colormap) {
  const ColourTable& table = colour_table(colormap);
  cv::Mat rgb(256, 1, CV_8UC3);
  for (int i = 0; i < 256; ++i)
    for (int c = 0; c < 3; ++c) rgb.at<cv::Vec3b>(i)[c] = table[size_t(i)][size_t(c)];
  return rgb;
}

cv::Mat apply_colormap(const cv::Mat& values, Colormap colormap, float vmin, float vmax) {
  ValueScale scale;
  scale.colormap = colormap;
  scale.vmin = vmin;
  scale.vmax = vmax > vmin ? vmax : vmin + 1.0f;
  return colour_values(values, scale);
}

cv::Mat overlay_patch_map(const cv::Mat& rgb, const torch::Tensor& grid_values, Colormap colormap, float opacity,
                          float vmin, float vmax) {
  auto grid = grid_values.detach().to(torch::kCPU, torch::kFloat).contiguous();
  if (grid.dim() != 2) throw std::invalid_argument("overlay_patch_map: expected a [rows, cols] map");
  const cv::Mat values(int(grid.size(0)), int(grid.size(1)), CV_32FC1, grid.data_ptr<float>());
  return overlay_value_map(rgb, values, colormap, opacity, vmin, vmax);
}

cv::Mat overlay_value_map(const cv::Mat& rgb, const cv::Mat& values, Colormap colormap, float opacity, float vmin,
                          float vmax) {
  ValueScale scale;
  scale.colormap = colormap;
  scale.vmin = vmin;
  scale.vmax = vmax > vmin ? vmax : vmin + 1.0f;
  return overlay_values(rgb, values, scale, opacity, OverlayAlpha::Constant);
}

void write_png_rgb(const std::string& path, const cv::Mat& rgb) { write_png(path, to_rgb_image(rgb)); }

}  // namespace attnscope
