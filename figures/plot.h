// Line and scatter plots of a figure panel: axis ranges and ticks (linear or log y), the margins
// their labels need, and the drawing. Internal to figures/ (used by render.cpp).
#pragma once

#include <vector>

#include "figures/cairo_text.h"

namespace attnscope {

// The axis ranges and ticks of a plot, computed once for layout and drawing.
struct PlotAxes {
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  std::vector<Tick> x_ticks, y_ticks;
  bool log_y = false;
};

PlotAxes plot_axes(const PlotPanel& plot);

// Room outside the axes box for tick labels and axis captions.
struct PlotMargins {
  double left = 0, right = 0, bottom = 0;
};
PlotMargins plot_margins(cairo_t* cr, const Metrics& m, const PlotPanel& plot);

// Ticks, captions, guides, series (clipped to the box) and a legend in the emptiest corner.
void draw_plot(cairo_t* cr, const Metrics& m, const PlotPanel& plot, const Rect& box);

}  // namespace attnscope
