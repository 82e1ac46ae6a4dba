#include "core/colormap_image.h"

#include <cmath>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

#include "core/atomic_file.h"
#include "core/value_scale_image.h"

namespace attnscope {

namespace {
// OpenCV's table for each map; -1: the gray ramp, -2: the diverging table below.
int opencv_colormap(Colormap colormap) {
  switch (colormap) {
    case Colormap::Viridis:
      return cv::COLORMAP_VIRIDIS;
    case Colormap::Magma:
      return cv::COLORMAP_MAGMA;
    case Colormap::Inferno:
      return cv::COLORMAP_INFERNO;
    case Colormap::Turbo:
      return cv::COLORMAP_TURBO;
    case Colormap::Jet:
      return cv::COLORMAP_JET;
    case Colormap::Gray:
      return -1;
    case Colormap::RdBu:
      return -2;
  }
  throw std::invalid_argument("unknown colour map");
}

// ColorBrewer's 11-class RdBu, reversed (blue for negative, red for positive), white-ish in the
// middle; interpolated linearly in RGB to 256 entries.
cv::Mat diverging_table() {
  static const int kStops[11][3] = {{5, 48, 97},     {33, 102, 172},  {67, 147, 195},  {146, 197, 222},
                                    {209, 229, 240}, {247, 247, 247}, {253, 219, 199}, {244, 165, 130},
                                    {214, 96, 77},   {178, 24, 43},   {103, 0, 31}};
  cv::Mat rgb(256, 1, CV_8UC3);
  for (int i = 0; i < 256; ++i) {
    const double at = i / 255.0 * 10.0;
    const int stop = std::min(int(at), 9);
    const double t = at - stop;
    for (int c = 0; c < 3; ++c)
      rgb.at<cv::Vec3b>(i)[c] = uint8_t(std::lround(kStops[stop][c] * (1 - t) + kStops[stop + 1][c] * t));
  }
  return rgb;
}
}  // namespace

cv::Mat colormap_table(Colormap colormap) {
  cv::Mat ramp(256, 1, CV_8UC1);
  for (int i = 0; i < 256; ++i) ramp.at<uint8_t>(i) = uint8_t(i);
  const int opencv_id = opencv_colormap(colormap);
  if (opencv_id == -2) return diverging_table();
  cv::Mat rgb;
  if (opencv_id < 0) {
    cv::cvtColor(ramp, rgb, cv::COLOR_GRAY2RGB);
  } else {
    cv::Mat bgr;
    cv::applyColorMap(ramp, bgr, opencv_id);
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);  // OpenCV's maps are BGR
  }
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

void write_png_rgb(const std::string& path, const cv::Mat& rgb) {
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  std::vector<uint8_t> bytes;
  if (!cv::imencode(".png", bgr, bytes)) throw std::runtime_error("cannot encode PNG for " + path);
  write_file_atomically(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  });
}

}  // namespace attnscope
