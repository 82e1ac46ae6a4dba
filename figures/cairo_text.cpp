#include "figures/cairo_text.h"

#include <algorithm>
#include <cmath>

namespace attnscope {

namespace {
thread_local FigureTextLog* open_log = nullptr;
}  // namespace

FigureTextLog::FigureTextLog() { open_log = this; }
FigureTextLog::~FigureTextLog() { open_log = nullptr; }

void show_text(cairo_t* cr, const std::string& text) {
  if (open_log && !text.empty()) {
    double x = 0, y = 0;
    cairo_get_current_point(cr, &x, &y);
    cairo_text_extents_t extents;
    cairo_text_extents(cr, text.c_str(), &extents);
    // The ink box's corners in device space (a rotated label's box turns with it).
    double left = INFINITY, top = INFINITY, right = -INFINITY, bottom = -INFINITY;
    for (double dx : {extents.x_bearing, extents.x_bearing + extents.width})
      for (double dy : {extents.y_bearing, extents.y_bearing + extents.height}) {
        double cx = x + dx, cy = y + dy;
        cairo_user_to_device(cr, &cx, &cy);
        left = std::min(left, cx), right = std::max(right, cx), top = std::min(top, cy), bottom = std::max(bottom, cy);
      }
    // The size as drawn: the font matrix's scale through the current transformation.
    cairo_matrix_t font;
    cairo_get_font_matrix(cr, &font);
    double ux = font.xx, uy = font.yx;
    cairo_user_to_device_distance(cr, &ux, &uy);
    open_log->texts.push_back({text, std::hypot(ux, uy), {left, top, right - left, bottom - top}});
  }
  cairo_show_text(cr, text.c_str());
}

// One font everywhere; render.cpp gives every context unhinted metrics, so layout is scale-free.
void set_font(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(cr, kFont, CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double text_width(cairo_t* cr, const std::string& text) {
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text.c_str(), &extents);
  return extents.x_advance;
}

double tick_label_width(cairo_t* cr, const Metrics& m, const Tick& tick) {
  set_font(cr, m.small);
  double width = text_width(cr, tick.text);
  if (!tick.exponent.empty()) {
    set_font(cr, m.exponent);
    width += text_width(cr, tick.exponent);
  }
  return width;
}

void ink(cairo_t* cr) { cairo_set_source_rgb(cr, kInk, kInk, kInk); }

void draw_text(cairo_t* cr, const std::string& text, double x, double baseline, Align align) {
  const double width = text_width(cr, text);
  const double left = align == Align::Left ? x : align == Align::Centre ? x - width / 2 : x - width;
  cairo_move_to(cr, left, baseline);
  show_text(cr, text);
}

void draw_vertical_text(cairo_t* cr, const std::string& text, double x, double y) {
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, -M_PI / 2);
  draw_text(cr, text, 0, 0, Align::Centre);
  cairo_restore(cr);
}

void draw_tick_label(cairo_t* cr, const Metrics& m, const Tick& tick, double x, double y, Align align, bool middle) {
  const double width = tick_label_width(cr, m, tick);
  double left = align == Align::Left ? x : align == Align::Centre ? x - width / 2 : x - width;
  const double baseline = middle ? y + 0.36 * m.small : y + 0.95 * m.small;
  set_font(cr, m.small);
  cairo_move_to(cr, left, baseline);
  show_text(cr, tick.text);
  if (!tick.exponent.empty()) {
    left += text_width(cr, tick.text);
    set_font(cr, m.exponent);
    cairo_move_to(cr, left, baseline - 0.42 * m.small);
    show_text(cr, tick.exponent);
  }
}

void stroke_rect(cairo_t* cr, const Rect& r) {
  cairo_rectangle(cr, r.x, r.y, r.width, r.height);
  cairo_set_line_width(cr, kLineWidth);
  ink(cr);
  cairo_stroke(cr);
}

std::vector<Tick> ticks_that_fit(const std::vector<Tick>& ticks, const std::function<double(const Tick&)>& position,
                                 const std::function<double(const Tick&)>& extent, double gap) {
  for (size_t step = 1; step < ticks.size(); ++step) {
    std::vector<Tick> kept;
    for (size_t i = 0; i < ticks.size(); i += step) kept.push_back(ticks[i]);
    bool apart = true;
    for (size_t i = 1; i < kept.size() && apart; ++i)
      apart = std::abs(position(kept[i]) - position(kept[i - 1])) >= (extent(kept[i]) + extent(kept[i - 1])) / 2 + gap;
    if (apart) return kept;
  }
  return ticks.empty() ? ticks : std::vector<Tick>{ticks.front()};
}

constexpr const char* kSeparator = "  \u00b7  ";

// `text` in lines no wider than `width` with the current font: pieces between " · " separators
// joined while they fit, a piece too wide broken at its spaces. A single word wider than `width`
// keeps its own line (widest_word says how wide the figure must then be).
std::vector<std::string> wrapped_lines(cairo_t* cr, const std::string& text, double width) {
  if (text.empty()) return {};
  const std::string separator = kSeparator;
  std::vector<std::string> lines;
  auto place = [&](const std::string& piece, const std::string& joiner) {
    if (!lines.empty() && text_width(cr, lines.back() + joiner + piece) <= width)
      lines.back() += joiner + piece;
    else
      lines.push_back(piece);
  };
  for (size_t from = 0;;) {
    const size_t at = text.find(separator, from);
    const std::string piece = text.substr(from, at == std::string::npos ? std::string::npos : at - from);
    if (text_width(cr, piece) <= width) {
      place(piece, separator);
    } else {
      bool first = true;
      for (size_t word_from = 0;;) {
        const size_t space = piece.find(' ', word_from);
        const std::string word =
            piece.substr(word_from, space == std::string::npos ? std::string::npos : space - word_from);
        if (!word.empty()) {
          if (first)
            lines.push_back(word);
          else
            place(word, " ");
          first = false;
        }
        if (space == std::string::npos) break;
        word_from = space + 1;
      }
    }
    if (at == std::string::npos) break;
    from = at + separator.size();
  }
  return lines;
}

// The widest word of `text` with the current font: no wrapping makes a line narrower.
double widest_word(cairo_t* cr, const std::string& text) {
  double widest = 0;
  for (size_t from = 0; from <= text.size();) {
    size_t space = text.find(' ', from);
    if (space == std::string::npos) space = text.size();
    widest = std::max(widest, text_width(cr, text.substr(from, space - from)));
    from = space + 1;
  }
  return widest;
}

}  // namespace attnscope
