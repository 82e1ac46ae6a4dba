#include "views/plot_hover.h"

#include <cmath>

#include "figures/plot.h"

namespace attnscope {

std::optional<PlotPoint> plot_point_at(const PlotPanel& plot, const Rect& box, double x, double y, double radius) {
  const PlotAxes axes = plot_axes(plot);
  auto map_x = [&](double value) { return box.x + (value - axes.x_lo) / (axes.x_hi - axes.x_lo) * box.width; };
  auto map_y = [&](double value) {
    const double t = axes.log_y
                         ? (std::log10(value) - std::log10(axes.y_lo)) / (std::log10(axes.y_hi) - std::log10(axes.y_lo))
                         : (value - axes.y_lo) / (axes.y_hi - axes.y_lo);
    return box.y + box.height - t * box.height;
  };
  std::optional<PlotPoint> nearest;
  double best = radius * radius;
  for (size_t s = 0; s < plot.series.size(); ++s)
    for (size_t i = 0; i < plot.series[s].x.size(); ++i) {
      const double value = plot.series[s].y[i];
      if (!std::isfinite(value) || (axes.log_y && value <= 0)) continue;
      const double dx = map_x(plot.series[s].x[i]) - x, dy = map_y(value) - y;
      if (dx * dx + dy * dy <= best) {
        best = dx * dx + dy * dy;
        nearest = PlotPoint{s, i};
      }
    }
  return nearest;
}

}  // namespace attnscope
