// Line and scatter plots of a figure panel: the margins their labels need (from their axes,
// figures/plot_axes.h) and the drawing. Internal to figures/ (used by render.cpp).
#pragma once

#include <vector>

#include "figures/cairo_text.h"
#include "figures/plot_axes.h"

namespace attnscope {

// Room outside the axes box for tick labels and axis captions.
struct PlotMargins {
  double left = 0, right = 0, bottom = 0;
};
PlotMargins plot_margins(cairo_t* cr, const Metrics& m, const PlotPanel& plot);

// The narrowest axes box its legend fits in (0 without a legend: fewer than two labelled series).
double legend_min_width(cairo_t* cr, const Metrics& m, const PlotPanel& plot);

// Ticks, captions, guides, series (clipped to the box) and a legend in the emptiest corner.
void draw_plot(cairo_t* cr, const Metrics& m, const PlotPanel& plot, const Rect& box);

}  // namespace attnscope
