// A plot panel's axis ranges and ticks (linear or log y): what figures/plot.h lays out and draws
// with, and what rows of plots share (figures/plots.h). No cairo here.
#pragma once

#include <vector>

#include "figures/figure.h"
#include "figures/ticks.h"

namespace attnscope {

// The axis ranges and ticks of a plot, computed once for layout and drawing.
struct PlotAxes {
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  std::vector<Tick> x_ticks, y_ticks;
  bool log_y = false;
};

PlotAxes plot_axes(const PlotPanel& plot);

}  // namespace attnscope
