// Text and line helpers shared by the figure renderer's files (figures/render.cpp, plot.cpp):
// one font, sizes derived from the style, tick labels with superscript exponents. Internal to figures/.
#pragma once

#include <cairo.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "figures/render.h"
#include "figures/ticks.h"

namespace attnscope {

constexpr const char* kFont = "DejaVu Sans";
constexpr double kInk = 0.13;       // grey level of text and lines
constexpr double kLineWidth = 0.5;  // axes, frames, ticks (points)

// The smallest text a figure prints (a tick label's exponent), in points.
constexpr double kSmallestText = 5.0;

// Derived sizes of one style, in points: at the default 8 pt, titles 9, labels 8, ticks and panel
// titles 7, exponents 5.
struct Metrics {
  double font, small, title, margin, gap, tick, label_line, exponent;
  explicit Metrics(const FigureStyle& style)
      : font(style.font_size),
        small(style.font_size * 0.875),
        title(style.font_size * 1.125),
        margin(style.font_size * 0.8),
        gap(style.font_size * 0.9),
        tick(style.font_size * 0.35),
        label_line(style.font_size * 1.35),
        exponent(std::max(kSmallestText, small * 0.72)) {}
};

void set_font(cairo_t* cr, double size, bool bold = false);
// Every piece of text is drawn by this one function; while a FigureTextLog is open on the thread it
// also records the text, its size and its ink box in the context's device space.
void show_text(cairo_t* cr, const std::string& text);
class FigureTextLog {
 public:
  FigureTextLog();
  ~FigureTextLog();
  FigureTextLog(const FigureTextLog&) = delete;
  FigureTextLog& operator=(const FigureTextLog&) = delete;
  std::vector<FigureText> texts;
};
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

// `text` in lines no wider than `width` with the current font: pieces between " · " separators
// joined while they fit, a piece too wide broken at its spaces; a word wider than `width` keeps a line.
std::vector<std::string> wrapped_lines(cairo_t* cr, const std::string& text, double width);
// The widest word of `text` with the current font: no wrapping makes a line narrower.
double widest_word(cairo_t* cr, const std::string& text);

// Every k-th tick from the first, for the smallest k whose labels keep `gap` apart along their axis:
// `position` is a tick's place on it, `extent` its label's length along it (so crowded axes of a
// narrow figure drop labels instead of overprinting them).
std::vector<Tick> ticks_that_fit(const std::vector<Tick>& ticks, const std::function<double(const Tick&)>& position,
                                 const std::function<double(const Tick&)>& extent, double gap);

}  // namespace attnscope
