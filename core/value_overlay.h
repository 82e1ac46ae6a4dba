// Values coloured through a ValueScale and blended over an image, on the engine's RgbImage: the one
// implementation the figures, the workbench's exports, `run`, `analyze` and the engine-only build
// draw with.
#pragma once

#include <vector>

#include "core/rgb_image.h"
#include "core/value_scale.h"

namespace attnscope {

// A grid of values, row-major floats, not owned.
struct ValueGrid {
  const float* values = nullptr;
  int rows = 0, cols = 0;
  float at(int row, int col) const { return values[size_t(row) * size_t(cols) + size_t(col)]; }
};

// Each value's colour: an image of rows x cols pixels.
RgbImage colour_values(const ValueGrid& values, const ValueScale& scale);

// Each value's colour and blending weight as overlay_values blends them, row-major rows x cols x 4
// floats: the table's RGB in [0, 1] and the weight `mode` gives at `opacity`. The workbench's map
// shader blends these per screen pixel, so the screen and the exports share one colouring.
std::vector<float> colour_and_weight_values(const ValueGrid& values, const ValueScale& scale, double opacity,
                                            OverlayAlpha mode);

// The grid over an RGB image: each value becomes a block of pixels (nearest neighbour, source
// index floor(x * cols / width) as OpenCV's INTER_NEAREST computes it, so the grid stays visible),
// coloured and blended with the alpha `mode` gives at `opacity`. Throws std::invalid_argument for
// an empty grid.
RgbImage overlay_values(const RgbImage& rgb, const ValueGrid& values, const ValueScale& scale, double opacity,
                        OverlayAlpha mode);

// `cells` (a colour per cell) stretched over `rgb` as overlay_values stretches a grid and blended at
// `opacity`, rounded as cv::addWeighted(rgb, 1 - opacity, stretched, opacity, 0) rounds 8-bit pixels
// (single-precision fused multiply-adds, round half to even). Throws std::invalid_argument for
// empty cells.
RgbImage overlay_cells(const RgbImage& rgb, const RgbImage& cells, double opacity);

}  // namespace attnscope
