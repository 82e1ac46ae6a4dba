#include "figures/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace attnscope {

namespace {
constexpr double kSeriesColours[][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157}, {0.580, 0.404, 0.741},
    {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498}, {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}};

const double* series_colour(const Series& series, size_t index) {
  const size_t count = sizeof kSeriesColours / sizeof kSeriesColours[0];
  return kSeriesColours[(series.colour >= 0 ? size_t(series.colour) : index) % count];
}

struct LegendSize {
  double width = 0, height = 0, line = 0, sample = 0;
};

// The legend's box for the series that have labels (none unless two or more do).
LegendSize legend_size(cairo_t* cr, const Metrics& m, const PlotPanel& plot, size_t labelled) {
  if (labelled < 2) return {};
  set_font(cr, m.small);
  double widest_label = 0;
  for (const auto& series : plot.series) widest_label = std::max(widest_label, text_width(cr, series.label));
  LegendSize size;
  size.line = 1.2 * m.small;
  size.sample = 1.5 * m.font;
  size.width = size.sample + 0.4 * m.font + widest_label + 0.6 * m.font;
  size.height = size.line * double(labelled) + 0.4 * m.font;
  return size;
}

constexpr double kLegendInset = 0.3;  // ems between the legend and the axes

size_t labelled_series(const PlotPanel& plot) {
  return size_t(
      std::count_if(plot.series.begin(), plot.series.end(), [](const Series& s) { return !s.label.empty(); }));
}

}  // namespace

double legend_min_width(cairo_t* cr, const Metrics& m, const PlotPanel& plot) {
  const LegendSize size = legend_size(cr, m, plot, labelled_series(plot));
  return size.width > 0 ? size.width + 2 * kLegendInset * m.font : 0.0;
}

PlotMargins plot_margins(cairo_t* cr, const Metrics& m, const PlotPanel& plot) {
  const PlotAxes axes = plot_axes(plot);
  PlotMargins margins;
  double widest = 0;
  for (const auto& tick : axes.y_ticks) widest = std::max(widest, tick_label_width(cr, m, tick));
  margins.left = m.tick + 0.3 * m.font + widest + (plot.y_label.empty() ? 0 : m.label_line);
  margins.bottom = m.tick + m.small * 1.25 + (plot.x_label.empty() ? 0 : m.label_line);
  if (!axes.x_ticks.empty()) margins.right = 0.5 * tick_label_width(cr, m, axes.x_ticks.back());
  return margins;
}

void draw_plot(cairo_t* cr, const Metrics& m, const PlotPanel& plot, const Rect& box) {
  const PlotAxes axes = plot_axes(plot);
  auto map_x = [&](double x) { return box.x + (x - axes.x_lo) / (axes.x_hi - axes.x_lo) * box.width; };
  auto map_y = [&](double y) {
    const double t = axes.log_y
                         ? (std::log10(y) - std::log10(axes.y_lo)) / (std::log10(axes.y_hi) - std::log10(axes.y_lo))
                         : (y - axes.y_lo) / (axes.y_hi - axes.y_lo);
    return box.y + box.height - t * box.height;
  };

  // Ticks and their labels, outside the box; as many as have room.
  const std::vector<Tick> x_ticks = ticks_that_fit(
      axes.x_ticks, [&](const Tick& tick) { return map_x(tick.value); },
      [&](const Tick& tick) { return tick_label_width(cr, m, tick); }, 0.4 * m.small);
  const std::vector<Tick> y_ticks = ticks_that_fit(
      axes.y_ticks, [&](const Tick& tick) { return map_y(tick.value); },
      [&](const Tick& tick) { return tick.exponent.empty() ? m.small : 1.3 * m.small; }, 0.2 * m.small);
  cairo_set_line_width(cr, kLineWidth);
  ink(cr);
  for (const auto& tick : x_ticks) {
    const double x = map_x(tick.value);
    cairo_move_to(cr, x, box.y + box.height);
    cairo_line_to(cr, x, box.y + box.height + m.tick);
    cairo_stroke(cr);
    draw_tick_label(cr, m, tick, x, box.y + box.height + m.tick + 0.15 * m.font, Align::Centre, false);
  }
  double widest = 0;
  for (const auto& tick : y_ticks) {
    const double y = map_y(tick.value);
    cairo_move_to(cr, box.x, y);
    cairo_line_to(cr, box.x - m.tick, y);
    cairo_stroke(cr);
    draw_tick_label(cr, m, tick, box.x - m.tick - 0.3 * m.font, y, Align::Right, true);
    widest = std::max(widest, tick_label_width(cr, m, tick));
  }
  set_font(cr, m.font);
  if (!plot.x_label.empty())
    draw_text(cr, plot.x_label, box.x + box.width / 2, box.y + box.height + m.tick + m.small * 1.25 + m.font * 1.05,
              Align::Centre);
  if (!plot.y_label.empty())
    draw_vertical_text(cr, plot.y_label, box.x - m.tick - 0.3 * m.font - widest - 0.4 * m.font, box.y + box.height / 2);

  // Everything inside the box is clipped to it.
  cairo_save(cr);
  cairo_rectangle(cr, box.x, box.y, box.width, box.height);
  cairo_clip(cr);
  const double dash[] = {2.0, 1.5};
  set_font(cr, m.small);
  for (const auto& guide : plot.y_guides) {
    if (axes.log_y && !(guide.value > 0)) continue;
    const double y = map_y(guide.value);
    cairo_set_source_rgb(cr, 0.45, 0.45, 0.45);
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, box.x, y);
    cairo_line_to(cr, box.x + box.width, y);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    // Left end: curves of decreasing values (spectra) are high there.
    draw_text(cr, guide.label, box.x + 0.3 * m.font, y - 0.3 * m.font, Align::Left);
  }
  for (const auto& guide : plot.x_guides) {
    const double x = map_x(guide.value);
    cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, x, box.y);
    cairo_line_to(cr, x, box.y + box.height);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    // The label sits beside the line on the side with more room.
    const bool right = x < box.x + box.width / 2;
    draw_text(cr, guide.label, x + (right ? 0.3 : -0.3) * m.font, box.y + 1.1 * m.small,
              right ? Align::Left : Align::Right);
  }
  for (size_t s = 0; s < plot.series.size(); ++s) {
    const Series& series = plot.series[s];
    const double* colour = series_colour(series, s);
    cairo_set_source_rgb(cr, colour[0], colour[1], colour[2]);
    cairo_set_line_width(cr, series.pairs ? 0.4 : 1.0);
    bool drawing = false;
    for (size_t i = 0; i < series.x.size() && series.line; ++i) {
      const bool valid = std::isfinite(series.x[i]) && std::isfinite(series.y[i]) && (!axes.log_y || series.y[i] > 0);
      if (!valid || (series.pairs && i % 2 == 0)) drawing = false;  // pairs: every even point starts a segment
      if (!valid) continue;
      if (drawing)
        cairo_line_to(cr, map_x(series.x[i]), map_y(series.y[i]));
      else
        cairo_move_to(cr, map_x(series.x[i]), map_y(series.y[i]));
      drawing = true;
    }
    cairo_stroke(cr);
    if (series.markers)
      for (size_t i = 0; i < series.x.size(); ++i) {
        if (!std::isfinite(series.x[i]) || !std::isfinite(series.y[i]) || (axes.log_y && !(series.y[i] > 0))) continue;
        cairo_new_sub_path(cr);
        cairo_arc(cr, map_x(series.x[i]), map_y(series.y[i]), 0.2 * m.font, 0, 2 * M_PI);
      }
    cairo_fill(cr);
  }
  // A legend, top right, when more than one series has a label.
  std::vector<size_t> labelled;
  for (size_t s = 0; s < plot.series.size(); ++s)
    if (!plot.series[s].label.empty()) labelled.push_back(s);
  if (labelled.size() > 1) {
    const LegendSize size = legend_size(cr, m, plot, labelled.size());
    set_font(cr, m.small);
    const double line = size.line, sample = size.sample, w = size.width, h = size.height;
    // The corner that covers the fewest points: top right, top left, bottom right, bottom left.
    const double inset = kLegendInset * m.font;
    const Rect corners[] = {{box.x + box.width - w - inset, box.y + inset, w, h},
                            {box.x + inset, box.y + inset, w, h},
                            {box.x + box.width - w - inset, box.y + box.height - h - inset, w, h},
                            {box.x + inset, box.y + box.height - h - inset, w, h}};
    size_t best = 0, fewest = SIZE_MAX;
    for (size_t k = 0; k < 4; ++k) {
      size_t covered = 0;
      for (const auto& series : plot.series)
        for (size_t i = 0; i < series.x.size(); ++i) {
          if (!std::isfinite(series.x[i]) || !std::isfinite(series.y[i]) || (axes.log_y && !(series.y[i] > 0)))
            continue;
          const double x = map_x(series.x[i]), y = map_y(series.y[i]);
          covered += x >= corners[k].x && x <= corners[k].x + w && y >= corners[k].y && y <= corners[k].y + h;
        }
      if (covered < fewest) fewest = covered, best = k;
    }
    const double x0 = corners[best].x, y0 = corners[best].y;
    cairo_rectangle(cr, x0, y0, w, h);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_fill(cr);
    for (size_t i = 0; i < labelled.size(); ++i) {
      const double* colour = series_colour(plot.series[labelled[i]], labelled[i]);
      const double y = y0 + 0.2 * m.font + line * (i + 0.5);
      cairo_set_source_rgb(cr, colour[0], colour[1], colour[2]);
      cairo_move_to(cr, x0 + 0.3 * m.font, y);
      cairo_line_to(cr, x0 + 0.3 * m.font + sample, y);
      cairo_stroke(cr);
      ink(cr);
      draw_text(cr, plot.series[labelled[i]].label, x0 + 0.7 * m.font + sample, y + 0.35 * m.small, Align::Left);
    }
  }
  cairo_restore(cr);
  stroke_rect(cr, box);
}

}  // namespace attnscope
