// Which point of a drawn plot lies under the pointer: the plot's own axes (figures/plot.h) map its
// data into the axes box a figure's geometry gives, so a view can answer a hover over its points.
#pragma once

#include <optional>

#include "figures/render.h"

namespace attnscope {

struct PlotPoint {
  size_t series = 0, index = 0;
};

// The point of `plot`, drawn in `box` (points), nearest to (x, y) (points) and within `radius`.
std::optional<PlotPoint> plot_point_at(const PlotPanel& plot, const Rect& box, double x, double y, double radius);

}  // namespace attnscope
