#include "figures/plot_axes.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace attnscope {

PlotAxes plot_axes(const PlotPanel& plot) {
  PlotAxes axes;
  axes.log_y = plot.log_y;
  double x_min = HUGE_VAL, x_max = -HUGE_VAL, y_min = HUGE_VAL, y_max = -HUGE_VAL;
  for (const auto& series : plot.series)
    for (size_t i = 0; i < series.x.size(); ++i) {
      if (!std::isfinite(series.x[i]) || !std::isfinite(series.y[i])) continue;
      if (plot.log_y && !(series.y[i] > 0)) continue;
      x_min = std::min(x_min, series.x[i]);
      x_max = std::max(x_max, series.x[i]);
      y_min = std::min(y_min, series.y[i]);
      y_max = std::max(y_max, series.y[i]);
    }
  for (const auto& guide : plot.y_guides)
    if (std::isfinite(guide.value) && (!plot.log_y || guide.value > 0)) {
      y_min = std::min(y_min, guide.value);
      y_max = std::max(y_max, guide.value);
    }
  if (!(x_max >= x_min)) x_min = 0, x_max = 1;
  if (!(y_max >= y_min)) y_min = plot.log_y ? 0.1 : 0, y_max = 1;
  if (plot.same_xy_range) {
    x_min = y_min = std::min(x_min, y_min);
    x_max = y_max = std::max(x_max, y_max);
  }
  if (plot.whole_x) {  // points dodged around whole numbers keep the whole number in range
    x_min = std::min(x_min, std::round(x_min));
    x_max = std::max(x_max, std::round(x_max));
  }
  const double x_pad = x_max > x_min ? 0.03 * (x_max - x_min) : 0.5;
  axes.x_lo = x_min - x_pad;
  axes.x_hi = x_max + x_pad;
  axes.x_ticks = linear_ticks(x_min, x_max, 5);
  if (plot.whole_x) {  // indices (heads, layers): no tick between two of them
    std::vector<Tick> whole;
    for (const Tick& tick : axes.x_ticks)
      if (tick.value == std::round(tick.value)) whole.push_back({tick.value, std::to_string(int64_t(tick.value)), ""});
    if (whole.size() < 2 && x_max - x_min < 6) {
      whole.clear();
      for (double value = std::ceil(x_min); value <= x_max; ++value)
        whole.push_back({value, std::to_string(int64_t(value)), ""});
    }
    axes.x_ticks = whole;
  }
  if (plot.y_hi > plot.y_lo && (!plot.log_y || plot.y_lo > 0)) {
    axes.y_lo = plot.y_lo;  // a range shared with other plots
    axes.y_hi = plot.y_hi;
    axes.y_ticks = plot.log_y ? log_ticks(axes.y_lo, axes.y_hi) : linear_ticks(axes.y_lo, axes.y_hi);
  } else if (plot.log_y) {
    axes.y_lo = std::pow(10.0, std::floor(std::log10(y_min) + 1e-9));
    axes.y_hi = std::pow(10.0, std::ceil(std::log10(y_max) - 1e-9));
    if (axes.y_hi <= axes.y_lo) axes.y_hi = axes.y_lo * 10;
    axes.y_ticks = log_ticks(axes.y_lo, axes.y_hi);
  } else {
    std::tie(axes.y_lo, axes.y_hi) = nice_range(y_min, y_max);
    axes.y_ticks = linear_ticks(axes.y_lo, axes.y_hi);
  }
  if (plot.same_xy_range) {
    axes.x_lo = axes.y_lo;
    axes.x_hi = axes.y_hi;
    axes.x_ticks = axes.y_ticks;
  }
  return axes;
}

}  // namespace attnscope
