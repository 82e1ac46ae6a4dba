#include "core/colormap.h"

#include "core/excerpt.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

#include "core/atomic_file.h"

namespace attnscope {

namespace {
struct ColormapName {
  Colormap colormap;
  const char* name;
  int opencv_id;  // -1: gray ramp
};
constexpr ColormapName kColormaps[] = {
    {Colormap::Viridis, "viridis", cv::COLORMAP_VIRIDIS},
    {Colormap::Magma, "magma", cv::COLORMAP_MAGMA},
    {Colormap::Inferno, "inferno", cv::COLORMAP_INFERNO},
    {Colormap::Turbo, "turbo", cv::COLORMAP_TURBO},
    {Colormap::Jet, "jet", cv::COLORMAP_JET},
    {Colormap::Gray, "gray", -1},
};
}  // namespace

Colormap parse_colormap(const std::string& name) {
  for (const auto& entry : kColormaps)
    if (name == entry.name) return entry.colormap;
  throw std::invalid_argument("unknown colour map '" + excerpt(name) +
                              "' (expected viridis, magma, inferno, turbo, jet or gray)");
}

std::string to_string(Colormap colormap) {
  for (const auto& entry : kColormaps)
    if (colormap == entry.colormap) return entry.name;
  return "?";
}

std::vector<std::string> colormap_names() {
  std::vector<std::string> names;
  for (const auto& entry : kColormaps) names.push_back(entry.name);
  return names;
}

cv::Mat colormap_table(Colormap colormap) {
  cv::Mat ramp(256, 1, CV_8UC1);
  for (int i = 0; i < 256; ++i) ramp.at<uint8_t>(i) = uint8_t(i);
  for (const auto& entry : kColormaps) {
    if (entry.colormap != colormap) continue;
    cv::Mat rgb;
    if (entry.opencv_id < 0) {
      cv::cvtColor(ramp, rgb, cv::COLOR_GRAY2RGB);
    } else {
      cv::Mat bgr;
      cv::applyColorMap(ramp, bgr, entry.opencv_id);
      cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);  // OpenCV's maps are BGR
    }
    return rgb;
  }
  throw std::invalid_argument("unknown colour map");
}

cv::Mat apply_colormap(const cv::Mat& values, Colormap colormap, float vmin, float vmax) {
  CV_Assert(values.type() == CV_32FC1);
  const float range = vmax > vmin ? vmax - vmin : 1.0f;
  cv::Mat indices;
  values.convertTo(indices, CV_8UC1, 255.0 / range, -vmin * 255.0 / range);  // saturating, rounds
  const cv::Mat table = colormap_table(colormap);
  cv::Mat rgb(values.size(), CV_8UC3);
  for (int y = 0; y < values.rows; ++y)
    for (int x = 0; x < values.cols; ++x) rgb.at<cv::Vec3b>(y, x) = table.at<cv::Vec3b>(indices.at<uint8_t>(y, x));
  return rgb;
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
  CV_Assert(rgb.type() == CV_8UC3 && values.type() == CV_32FC1);
  cv::Mat full;
  cv::resize(values, full, rgb.size(), 0, 0, cv::INTER_NEAREST);
  cv::Mat colours = apply_colormap(full, colormap, vmin, vmax);
  cv::Mat blended;
  cv::addWeighted(rgb, 1.0 - opacity, colours, opacity, 0.0, blended);
  return blended;
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
