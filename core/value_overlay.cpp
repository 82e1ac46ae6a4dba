#include "core/value_overlay.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace attnscope {

namespace {

// OpenCV's resizeNN: floor(x / (width / cols)), clamped to the last column.
std::vector<int> nearest_sources(int destination, int source) {
  const double inverse = 1.0 / (double(destination) / double(source));
  std::vector<int> index(size_t(std::max(destination, 0)));
  for (int x = 0; x < destination; ++x) index[size_t(x)] = std::min(int(std::floor(x * inverse)), source - 1);
  return index;
}

// cv::saturate_cast<uint8_t>(double): round half to even, clamped.
uint8_t saturate_byte(double value) { return uint8_t(std::clamp<long>(std::lrint(value), 0, 255)); }

}  // namespace

RgbImage colour_values(const ValueGrid& values, const ValueScale& scale) {
  const ColourTable& table = colour_table(scale.colormap);
  RgbImage rgb(values.rows, values.cols);
  for (int y = 0; y < values.rows; ++y)
    for (int x = 0; x < values.cols; ++x) {
      const auto& colour = table[size_t(scale.table_index(double(values.at(y, x))))];
      std::copy(colour.begin(), colour.end(), rgb.row(y) + 3 * x);
    }
  return rgb;
}

std::vector<float> colour_and_weight_values(const ValueGrid& values, const ValueScale& scale, double opacity,
                                            OverlayAlpha mode) {
  const ColourTable& table = colour_table(scale.colormap);
  std::vector<float> rgba(size_t(std::max(values.rows, 0)) * size_t(std::max(values.cols, 0)) * 4);
  float* out = rgba.data();
  for (int y = 0; y < values.rows; ++y)
    for (int x = 0; x < values.cols; ++x, out += 4) {
      const double value = double(values.at(y, x));
      const auto& colour = table[size_t(scale.table_index(value))];
      for (int c = 0; c < 3; ++c) out[c] = float(colour[size_t(c)]) / 255.0f;
      out[3] = float(scale.alpha(value, opacity, mode));
    }
  return rgba;
}

RgbImage overlay_values(const RgbImage& rgb, const ValueGrid& values, const ValueScale& scale, double opacity,
                        OverlayAlpha mode) {
  if (values.rows <= 0 || values.cols <= 0 || !values.values)
    throw std::invalid_argument("overlay_values: an empty grid of values");
  const ColourTable& table = colour_table(scale.colormap);
  const std::vector<int> source_x = nearest_sources(rgb.cols, values.cols);
  const std::vector<int> source_y = nearest_sources(rgb.rows, values.rows);
  RgbImage blended(rgb.rows, rgb.cols);
  for (int y = 0; y < rgb.rows; ++y) {
    const uint8_t* base = rgb.row(y);
    uint8_t* out = blended.row(y);
    for (int x = 0; x < rgb.cols; ++x) {
      const double value = double(values.at(source_y[size_t(y)], source_x[size_t(x)]));
      const double a = scale.alpha(value, opacity, mode);
      const auto& colour = table[size_t(scale.table_index(value))];
      for (int c = 0; c < 3; ++c) out[3 * x + c] = saturate_byte(base[3 * x + c] * (1.0 - a) + colour[size_t(c)] * a);
    }
  }
  return blended;
}

RgbImage overlay_cells(const RgbImage& rgb, const RgbImage& cells, double opacity) {
  if (cells.empty()) throw std::invalid_argument("overlay_cells: no cells");
  const std::vector<int> source_x = nearest_sources(rgb.cols, cells.cols);
  const std::vector<int> source_y = nearest_sources(rgb.rows, cells.rows);
  const float base_weight = float(1.0 - opacity), cell_weight = float(opacity);
  RgbImage blended(rgb.rows, rgb.cols);
  for (int y = 0; y < rgb.rows; ++y) {
    const uint8_t* base = rgb.row(y);
    const uint8_t* cell_row = cells.row(source_y[size_t(y)]);
    uint8_t* out = blended.row(y);
    for (int x = 0; x < 3 * rgb.cols; ++x) {
      const float cell = float(cell_row[3 * source_x[size_t(x / 3)] + x % 3]);
      const float value = std::fma(float(base[x]), base_weight, std::fma(cell, cell_weight, 0.0f));
      out[x] = uint8_t(std::clamp<long>(std::lrint(value), 0, 255));
    }
  }
  return blended;
}

}  // namespace attnscope
