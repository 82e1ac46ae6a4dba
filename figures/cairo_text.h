// Text and line helpers shared by the figure renderer's files (figures/render.cpp, plot.cpp):
// one font, sizes derived from the style, tick labels with superscript exponents. Internal to figures/.
#pragma once

#include <cairo.h>

#include <string>

#include "figures/render.h"
#include "figures/ticks.h"

namespace attnscope {

constexpr const char* kFont = "DejaVu Sans";
constexpr double kInk = 0.13;       // grey level of text and lines
constexpr double kLineWidth = 0.5;  // axes, frames, ticks (points)

// Derived sizes of one style, in points.
struct Metrics {
  double font, small, title, margin, gap, tick, label_line;
  explicit Metrics(const FigureStyle& style)
      : font(style.font_size),
        small(style.font_size * 0.85),
        title(style.font_size * 1.2),
        margin(style.font_size * 0.8),
        gap(style.font_size * 0.9),
        tick(style.font_size * 0.35),
        label_line(style.font_size * 1.35) {}
};

void set_font(cairo_t* cr, double size, bool bold = false);
double text_width(cairo_t* cr, const std::string& text);  // advance with the current font
double tick_label_width(cairo_t* cr, const Metrics& m, const Tick& tick);

enum class Align { Left, Centre, Right };
void ink(cairo_t* cr);  // text and line colour
void draw_text(cairo_t* cr, const std::string& text, double x, double baseline, Align align);
// Text turned a quarter anticlockwise, centred on (x, y) along its length; baseline at x.
void draw_vertical_text(cairo_t* cr, const std::string& text, double x, double y);
// A tick label; powers of ten get their exponent as a superscript. Vertically centred on y when
// `middle`, otherwise hanging below y.
void draw_tick_label(cairo_t* cr, const Metrics& m, const Tick& tick, double x, double y, Align align, bool middle);
void stroke_rect(cairo_t* cr, const Rect& r);

}  // namespace attnscope
