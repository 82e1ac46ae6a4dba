#include "core/grid_map.h"

#include <stdexcept>

namespace attnscope {

std::vector<float> float_values(const torch::Tensor& t) {
  const torch::Tensor values = t.detach().to(torch::kCPU, torch::kFloat).contiguous();
  return std::vector<float>(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
}

GridMap to_grid_map(const torch::Tensor& grid) {
  if (grid.dim() != 2)
    throw std::invalid_argument("a map is [rows, cols], got " + std::to_string(grid.dim()) + " dimensions");
  GridMap map;
  map.grid_h = int(grid.size(0));
  map.grid_w = int(grid.size(1));
  map.values = float_values(grid);
  return map;
}

}  // namespace attnscope
