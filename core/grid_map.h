// A map of values over a grid (a patch grid, a matrix): row-major floats that the map owns. The
// figures, the views and `analyze` keep their maps in it, so none of them needs OpenCV.
#pragma once

#include <torch/types.h>

#include <vector>

#include "core/value_overlay.h"

namespace attnscope {

struct GridMap {
  int grid_h = 0, grid_w = 0;
  std::vector<float> values;
  float at(int row, int col) const { return values[size_t(row) * size_t(grid_w) + size_t(col)]; }
  bool empty() const { return values.empty(); }
  ValueGrid view() const { return {values.data(), grid_h, grid_w}; }
};

// A tensor's values as float32 on the CPU, in its row-major order.
std::vector<float> float_values(const torch::Tensor& t);
// A [h, w] tensor as a map; throws std::invalid_argument for another rank.
GridMap to_grid_map(const torch::Tensor& grid);

}  // namespace attnscope
