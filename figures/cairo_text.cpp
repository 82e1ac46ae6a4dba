#include "figures/cairo_text.h"

#include <cmath>

namespace attnscope {

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
    set_font(cr, m.small * 0.72);
    width += text_width(cr, tick.exponent);
  }
  return width;
}

void ink(cairo_t* cr) { cairo_set_source_rgb(cr, kInk, kInk, kInk); }

void draw_text(cairo_t* cr, const std::string& text, double x, double baseline, Align align) {
  const double width = text_width(cr, text);
  const double left = align == Align::Left ? x : align == Align::Centre ? x - width / 2 : x - width;
  cairo_move_to(cr, left, baseline);
  cairo_show_text(cr, text.c_str());
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
  cairo_show_text(cr, tick.text.c_str());
  if (!tick.exponent.empty()) {
    left += text_width(cr, tick.text);
    set_font(cr, m.small * 0.72);
    cairo_move_to(cr, left, baseline - 0.42 * m.small);
    cairo_show_text(cr, tick.exponent.c_str());
  }
}

void stroke_rect(cairo_t* cr, const Rect& r) {
  cairo_rectangle(cr, r.x, r.y, r.width, r.height);
  cairo_set_line_width(cr, kLineWidth);
  ink(cr);
  cairo_stroke(cr);
}

}  // namespace attnscope
