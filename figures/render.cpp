// Layout in points, then one drawing pass shared by the three cairo surfaces.
#include "figures/render.h"
#include "core/colormap_image.h"
#include "core/cv_image.h"
#include "figures/render_image.h"

#include "core/excerpt.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

#include "figures/cairo_text.h"
#include "figures/plot.h"
#include "figures/ticks.h"

namespace attnscope {

bool figures_are_drawn() { return true; }

cv::Mat heatmap_image(const HeatmapPanel& heatmap, const ColorScale& scale) {
  const ValueScale value_scale = scale.value_scale();
  if (heatmap.background.empty()) return to_mat(colour_values(heatmap.values.view(), value_scale));
  return to_mat(overlay_values(heatmap.background, heatmap.values.view(), value_scale, heatmap.opacity, heatmap.alpha));
}

namespace {

constexpr double kPlotAspect = 1.3;  // plot width / heatmap panel width
// A panel's own colour bar (HeatmapPanel::colour_bar): its gap and width, in font sizes.
constexpr double kPanelBarGap = 0.6;
constexpr double kPanelBarWidth = 0.7;

using SurfacePtr = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
using ContextPtr = std::unique_ptr<cairo_t, decltype(&cairo_destroy)>;

void check(cairo_status_t status, const char* what) {
  if (status != CAIRO_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cairo: ") + what + ": " + cairo_status_to_string(status));
}

// Space a panel needs around its content box for titles, tick labels and axis captions.
struct Decorations {
  double left = 0, right = 0, top = 0, bottom = 0;
};

// A panel title's lines stand this far apart.
double panel_title_step(const Metrics& m) { return 1.2 * m.small; }

// Everything but the title (whose lines depend on the column's width).
Decorations decorations(cairo_t* cr, const Metrics& m, const Panel& panel) {
  Decorations d;
  if (const auto* heatmap = std::get_if<HeatmapPanel>(&panel.content)) {
    if (!heatmap->y_label.empty()) d.left = m.label_line;
    if (!heatmap->x_label.empty()) d.bottom = m.label_line;
  } else if (const auto* plot = std::get_if<PlotPanel>(&panel.content)) {
    const PlotMargins margins = plot_margins(cr, m, *plot);
    d.left = margins.left;
    d.right = margins.right;
    d.bottom = margins.bottom;
  }
  return d;
}

double heatmap_aspect(const HeatmapPanel& heatmap) {
  if (heatmap.background.empty()) return double(heatmap.values.grid_h) / heatmap.values.grid_w;
  return double(heatmap.background.rows) / heatmap.background.cols;
}

// A heatmap's width: the style's panel width, or more where its axis captions need it (the x caption
// along its width, the y caption along its height).
double heatmap_width(cairo_t* cr, const Metrics& m, const HeatmapPanel& heatmap, const FigureStyle& style) {
  set_font(cr, m.font);
  return std::max(
      {style.panel_width, text_width(cr, heatmap.x_label), text_width(cr, heatmap.y_label) / heatmap_aspect(heatmap)});
}

// A colour bar's caption in lines that fit along a bar `length` points long: whole, or split before
// its parenthesis ("attention weight" / "(0..max)") when it would run past the bar's ends, and each
// name wrapped at its spaces where it is still longer (a short bar beside a small panel: rollout's
// "rollout attention weight" beside a 60-point map ran into the row above). A single word, and the
// parenthesis, stay whole.
std::vector<std::string> bar_label_lines(cairo_t* cr, const Metrics& m, const std::string& label, double length) {
  if (label.empty()) return {};
  set_font(cr, m.font);
  if (text_width(cr, label) <= length) return {label};
  const size_t split = label.find(" (");
  std::vector<std::string> parts{label};
  if (split != std::string::npos) parts = {label.substr(0, split), label.substr(split + 1)};
  std::vector<std::string> lines;
  for (const std::string& part : parts) {
    if (part.front() == '(') {  // the scale's mode in parentheses reads as one piece
      lines.push_back(part);
      continue;
    }
    std::string line;
    size_t begin = 0;
    while (begin <= part.size()) {
      const size_t space = part.find(' ', begin);
      const std::string word = part.substr(begin, space == std::string::npos ? std::string::npos : space - begin);
      const std::string longer = line.empty() ? word : line + " " + word;
      if (!line.empty() && text_width(cr, longer) > length) {
        lines.push_back(line);
        line = word;
      } else {
        line = longer;
      }
      if (space == std::string::npos) break;
      begin = space + 1;
    }
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// The colour bars' tick labels and captions, for their width.
double colour_bar_width(cairo_t* cr, const Metrics& m, const ColorScale& scale, double bar, double length) {
  double widest = 0;
  for (const auto& tick : scale_ticks(scale.value_scale())) widest = std::max(widest, tick_label_width(cr, m, tick));
  const size_t lines = bar_label_lines(cr, m, scale.label, length).size();
  return bar + m.tick + 0.3 * m.font + widest + (lines ? 0.4 * m.font + double(lines) * m.label_line : 0);
}

// The figure's title in lines no wider than `width`.
std::vector<std::string> title_lines(cairo_t* cr, const Metrics& m, const std::string& title, double width) {
  set_font(cr, m.title, true);
  return wrapped_lines(cr, title, width);
}

// A panel's title in lines no wider than its column.
std::vector<std::string> panel_title_lines(cairo_t* cr, const Metrics& m, const std::string& title, double width) {
  set_font(cr, m.small);
  return wrapped_lines(cr, title, width);
}

// Everything layout decides, including what drawing needs beyond FigureGeometry.
struct Layout {
  FigureGeometry geometry;
  std::vector<std::string> title;  // its lines
  double title_baseline = 0, col_label_baseline = 0, row_label_right = 0;
  std::vector<double> col_centre, row_centre;
  std::vector<std::vector<std::string>> panel_titles;  // each panel's title lines, as Figure::panels
  std::vector<std::vector<std::string>> col_labels;    // each column label's lines
  std::vector<std::vector<std::string>> row_labels;    // each row label's lines
};

Layout compute_layout(cairo_t* cr, const Figure& figure, const FigureStyle& style) {
  const Metrics m(style);
  Layout out;
  FigureGeometry& g = out.geometry;
  const int rows = figure.rows, cols = figure.cols;
  std::vector<double> col_w(size_t(cols), 0), col_left(size_t(cols), 0), col_right(size_t(cols), 0);
  std::vector<double> row_h(size_t(rows), 0), row_top(size_t(rows), 0), row_bottom(size_t(rows), 0);

  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const Panel& panel = figure.at(r, c);
      Decorations d = decorations(cr, m, panel);
      if (const auto* heatmap = std::get_if<HeatmapPanel>(&panel.content); heatmap && heatmap->colour_bar)
        d.right += kPanelBarGap * m.font + colour_bar_width(cr, m, figure.scales[size_t(heatmap->scale)],
                                                            kPanelBarWidth * m.font,
                                                            style.panel_width * heatmap_aspect(*heatmap));
      col_left[size_t(c)] = std::max(col_left[size_t(c)], d.left);
      col_right[size_t(c)] = std::max(col_right[size_t(c)], d.right);
      row_top[size_t(r)] = std::max(row_top[size_t(r)], d.top);
      row_bottom[size_t(r)] = std::max(row_bottom[size_t(r)], d.bottom);
      if (const auto* heatmap = std::get_if<HeatmapPanel>(&panel.content)) {
        set_font(cr, m.font);
        const double width = heatmap_width(cr, m, *heatmap, style);
        col_w[size_t(c)] = std::max(col_w[size_t(c)], width);
        row_h[size_t(r)] = std::max(row_h[size_t(r)], width * heatmap_aspect(*heatmap));
      } else if (const auto* plot = std::get_if<PlotPanel>(&panel.content)) {
        set_font(cr, m.font);
        col_w[size_t(c)] = std::max({col_w[size_t(c)], style.panel_width * kPlotAspect, legend_min_width(cr, m, *plot),
                                     text_width(cr, plot->x_label)});
      }
    }
  for (auto& h : row_h)
    if (h == 0) h = style.panel_width;  // a row of plots only (or empty cells)
  for (auto& w : col_w)
    if (w == 0) w = style.panel_width;
  // A column is at least as wide as its label and its panels' longest title words; the titles wrap to
  // it, so that neighbours never touch, and their lines make room above the row.
  for (int c = 0; c < cols; ++c) {
    double widest = 0;
    set_font(cr, m.font, true);
    if (size_t(c) < figure.col_labels.size()) widest = widest_word(cr, figure.col_labels[size_t(c)]);
    set_font(cr, m.small);
    for (int r = 0; r < rows; ++r) widest = std::max(widest, widest_word(cr, figure.at(r, c).title));
    col_w[size_t(c)] = std::max(col_w[size_t(c)], widest + 0.6 * m.font);
  }
  size_t col_label_lines = 0;
  for (size_t c = 0; c < figure.col_labels.size(); ++c) {
    set_font(cr, m.font, true);
    out.col_labels.push_back(wrapped_lines(cr, figure.col_labels[c], col_w[c]));
    col_label_lines = std::max(col_label_lines, out.col_labels.back().size());
  }
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const Panel& panel = figure.at(r, c);
      std::vector<std::string> lines;
      if (!std::holds_alternative<std::monostate>(panel.content))
        lines = panel_title_lines(cr, m, panel.title, col_w[size_t(c)]);
      if (!lines.empty())
        row_top[size_t(r)] =
            std::max(row_top[size_t(r)], m.label_line + double(lines.size() - 1) * panel_title_step(m));
      out.panel_titles.push_back(std::move(lines));
    }

  set_font(cr, m.font, true);
  // Row labels wrap at six ems (or their longest word), so that a long one does not take the panels' width.
  double row_label_w = 0;
  for (const auto& label : figure.row_labels) {
    out.row_labels.push_back(wrapped_lines(cr, label, std::max(6.0 * m.font, widest_word(cr, label))));
    for (const std::string& line : out.row_labels.back()) row_label_w = std::max(row_label_w, text_width(cr, line));
  }
  if (row_label_w > 0) row_label_w += 0.8 * m.font;

  // The grid's height does not depend on what is above it: colour bars (as tall as the grid) need it
  // before the width is known, and the title's lines need the width.
  double grid_height = 0;
  for (int r = 0; r < rows; ++r)
    grid_height +=
        (r > 0 ? row_top[size_t(r)] : 0) + row_h[size_t(r)] + (r + 1 < rows ? row_bottom[size_t(r)] + m.gap : 0);

  double x = m.margin + row_label_w;
  out.row_label_right = m.margin + row_label_w - 0.8 * m.font;
  std::vector<double> col_x(static_cast<size_t>(cols));
  for (int c = 0; c < cols; ++c) {
    x += col_left[size_t(c)];
    col_x[size_t(c)] = x;
    out.col_centre.push_back(x + col_w[size_t(c)] / 2);
    x += col_w[size_t(c)] + col_right[size_t(c)] + (c + 1 < cols ? m.gap : 0);
  }

  // Colour bars of the scales some heatmap uses, side by side at the right, as tall as the grid.
  std::vector<bool> used(figure.scales.size(), false);
  for (const auto& panel : figure.panels)
    if (const auto* heatmap = std::get_if<HeatmapPanel>(&panel.content); heatmap && !heatmap->colour_bar)
      used[size_t(heatmap->scale)] = true;
  const double bar = 0.9 * m.font;
  for (size_t s = 0; s < figure.scales.size(); ++s) {
    if (!used[s]) {
      g.colour_bars.push_back({});
      continue;
    }
    x += 1.2 * m.font;
    g.colour_bars.push_back({x, 0, bar, grid_height});  // y set below
    x += colour_bar_width(cr, m, figure.scales[s], bar, grid_height);
  }
  // The title wraps to the grid's width; only a word wider than that widens the figure.
  out.title = title_lines(cr, m, figure.title, x - m.margin);
  for (const std::string& line : out.title) x = std::max(x, m.margin + text_width(cr, line));

  double y = m.margin;
  if (!out.title.empty()) {
    out.title_baseline = y + m.title;
    y += m.title * (1.6 + 1.25 * double(out.title.size() - 1));
  }
  if (col_label_lines > 0) {
    out.col_label_baseline = y + m.font;
    y += m.font * (1.5 + 1.2 * double(col_label_lines - 1));
  }
  std::vector<double> row_y(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    y += row_top[size_t(r)];
    row_y[size_t(r)] = y;
    out.row_centre.push_back(y + row_h[size_t(r)] / 2);
    y += row_h[size_t(r)] + row_bottom[size_t(r)] + (r + 1 < rows ? m.gap : 0);
  }
  // A bar's caption longer than the bar reaches past its ends: the figure makes room below it (above
  // it lie the title and column labels, which leave the bars' side free).
  double below = y;
  for (size_t s = 0; s < g.colour_bars.size(); ++s) {
    Rect& bar_rect = g.colour_bars[s];
    if (!(bar_rect.height > 0)) continue;
    bar_rect.y = row_y.front();
    set_font(cr, m.font);
    for (const std::string& line : bar_label_lines(cr, m, figure.scales[s].label, bar_rect.height))
      below = std::max(below, bar_rect.y + bar_rect.height / 2 + text_width(cr, line) / 2);
  }
  g.width = std::ceil(x + m.margin);
  g.height = std::ceil(below + m.margin);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      PanelGeometry panel;
      panel.cell = {col_x[size_t(c)], row_y[size_t(r)], col_w[size_t(c)], row_h[size_t(r)]};
      panel.content = panel.cell;
      if (const auto* heatmap = std::get_if<HeatmapPanel>(&figure.at(r, c).content)) {
        // Keep the map's aspect; centre it in its slot.
        double w = std::min(panel.cell.width, heatmap_width(cr, m, *heatmap, style)), h = w * heatmap_aspect(*heatmap);
        if (h > panel.cell.height) h = panel.cell.height, w = h / heatmap_aspect(*heatmap);
        panel.content = {panel.cell.x + (panel.cell.width - w) / 2, panel.cell.y + (panel.cell.height - h) / 2, w, h};
      }
      g.panels.push_back(panel);
    }

  g.pixels_per_point = style.png_width > 0 ? style.png_width / g.width : style.dpi / 72.0;
  g.png_width = style.png_width > 0 ? style.png_width : int(std::lround(g.width * g.pixels_per_point));
  g.png_height = int(std::lround(g.height * g.pixels_per_point));
  return out;
}

// A context on a scratch surface, only for measuring text during layout.
ContextPtr measuring_context(SurfacePtr& surface) {
  surface.reset(cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1));
  ContextPtr cr(cairo_create(surface.get()), &cairo_destroy);
  cairo_font_options_t* options = cairo_font_options_create();
  cairo_font_options_set_hint_metrics(options, CAIRO_HINT_METRICS_OFF);
  cairo_font_options_set_hint_style(options, CAIRO_HINT_STYLE_NONE);
  cairo_set_font_options(cr.get(), options);
  cairo_font_options_destroy(options);
  return cr;
}

// An 8-bit RGB image as a cairo surface (native-endian xRGB words).
SurfacePtr rgb_surface(const cv::Mat& rgb) {
  SurfacePtr surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, rgb.cols, rgb.rows), &cairo_surface_destroy);
  check(cairo_surface_status(surface.get()), "image surface");
  cairo_surface_flush(surface.get());
  unsigned char* data = cairo_image_surface_get_data(surface.get());
  const int stride = cairo_image_surface_get_stride(surface.get());
  for (int y = 0; y < rgb.rows; ++y) {
    auto* row = reinterpret_cast<uint32_t*>(data + size_t(y) * size_t(stride));
    for (int x = 0; x < rgb.cols; ++x) {
      const cv::Vec3b& p = rgb.at<cv::Vec3b>(y, x);
      row[x] = 0xFF000000u | uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | uint32_t(p[2]);
    }
  }
  cairo_surface_mark_dirty(surface.get());
  return surface;
}

// Vector viewers resample embedded images as they like (librsvg and pdf.js smooth them whatever
// the file asks), blurring about one image pixel. So in SVG and PDF a plain heatmap is upscaled
// (nearest) to at least 4 image pixels per point, which makes that blur invisible. Overlays keep
// their image's resolution: a patch already spans many pixels of the photo.
constexpr double kVectorPixelsPerPoint = 4.0;
constexpr int kVectorMaxImageSide = 2048;

void draw_heatmap(cairo_t* cr, const Metrics& m, const HeatmapPanel& heatmap, const ColorScale& scale, const Rect& box,
                  bool vector_output) {
  cv::Mat rgb = heatmap_image(heatmap, scale);
  if (vector_output && heatmap.background.empty()) {
    int factor = int(std::ceil(kVectorPixelsPerPoint * box.width / rgb.cols));
    factor = std::max(1, std::min(factor, kVectorMaxImageSide / std::max(rgb.cols, rgb.rows)));
    if (factor > 1) cv::resize(rgb, rgb, {}, factor, factor, cv::INTER_NEAREST);
  }
  SurfacePtr image = rgb_surface(rgb);
  cairo_save(cr);
  cairo_translate(cr, box.x, box.y);
  cairo_scale(cr, box.width / rgb.cols, box.height / rgb.rows);
  cairo_set_source_surface(cr, image.get(), 0, 0);
  // Nearest neighbour keeps every cell one flat colour. A plain paint (no repeat or pad) lets the
  // SVG surface place the image itself rather than a pattern that viewers resample smoothly.
  cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
  cairo_paint(cr);
  cairo_restore(cr);
  stroke_rect(cr, box);

  if (heatmap.marked_row >= 0 && heatmap.marked_col >= 0) {
    const double cw = box.width / heatmap.values.grid_w, ch = box.height / heatmap.values.grid_h;
    const Rect cell{box.x + heatmap.marked_col * cw, box.y + heatmap.marked_row * ch, cw, ch};
    cairo_rectangle(cr, cell.x, cell.y, cell.width, cell.height);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_line_width(cr, 1.2);
    cairo_stroke_preserve(cr);
    cairo_set_source_rgb(cr, 0.85, 0.1, 0.1);
    cairo_set_line_width(cr, 0.6);
    cairo_stroke(cr);
  }
  ink(cr);
  set_font(cr, m.font);
  if (!heatmap.x_label.empty())
    draw_text(cr, heatmap.x_label, box.x + box.width / 2, box.y + box.height + 1.05 * m.font, Align::Centre);
  if (!heatmap.y_label.empty()) draw_vertical_text(cr, heatmap.y_label, box.x - 0.4 * m.font, box.y + box.height / 2);
}

void draw_colour_bar(cairo_t* cr, const Metrics& m, const ColorScale& scale, const Rect& bar) {
  // A vector gradient through the same 256 LUT entries the heatmaps use, vmin at the bottom.
  const cv::Mat table = colormap_table(scale.colormap);
  cairo_pattern_t* gradient = cairo_pattern_create_linear(0, bar.y + bar.height, 0, bar.y);
  for (int i = 0; i < 256; ++i) {
    const cv::Vec3b& c = table.at<cv::Vec3b>(i);
    cairo_pattern_add_color_stop_rgb(gradient, i / 255.0, c[0] / 255.0, c[1] / 255.0, c[2] / 255.0);
  }
  cairo_rectangle(cr, bar.x, bar.y, bar.width, bar.height);
  cairo_set_source(cr, gradient);
  cairo_fill(cr);
  cairo_pattern_destroy(gradient);
  stroke_rect(cr, bar);

  double widest = 0;
  const ValueScale value_scale = scale.value_scale();
  auto tick_y = [&](const Tick& tick) { return bar.y + bar.height - value_scale.position(tick.value) * bar.height; };
  const std::vector<Tick> ticks = ticks_that_fit(
      scale_ticks(value_scale), tick_y,
      [&](const Tick& tick) { return tick.exponent.empty() ? m.small : 1.3 * m.small; }, 0.2 * m.small);
  for (const auto& tick : ticks) {
    const double y = tick_y(tick);
    ink(cr);
    cairo_set_line_width(cr, kLineWidth);
    cairo_move_to(cr, bar.x + bar.width, y);
    cairo_line_to(cr, bar.x + bar.width + m.tick, y);
    cairo_stroke(cr);
    draw_tick_label(cr, m, tick, bar.x + bar.width + m.tick + 0.3 * m.font, y, Align::Left, true);
    widest = std::max(widest, tick_label_width(cr, m, tick));
  }
  // Reads bottom to top, like a y axis label, right of the tick labels; in two lines where one
  // would run past the bar's ends.
  const std::vector<std::string> lines = bar_label_lines(cr, m, scale.label, bar.height);
  set_font(cr, m.font);
  ink(cr);
  for (size_t line = 0; line < lines.size(); ++line)
    draw_vertical_text(
        cr, lines[line],
        bar.x + bar.width + m.tick + 0.3 * m.font + widest + 0.4 * m.font + m.font + double(line) * m.label_line,
        bar.y + bar.height / 2);
}

// The centre of a heatmap panel's cell, in points.
std::pair<double, double> cell_centre(const Figure& figure, const FigureGeometry& g, int panel, int row, int col) {
  const GridMap& values = std::get<HeatmapPanel>(figure.panels[size_t(panel)].content).values;
  const Rect& box = g.panels[size_t(panel)].content;
  return {box.x + (col + 0.5) * box.width / values.grid_w, box.y + (row + 0.5) * box.height / values.grid_h};
}

// Each link a thin line with dots at its ends, over a white casing so it reads on any image; its hue
// follows its start cell's place in row-major order.
void draw_links(cairo_t* cr, const Figure& figure, const FigureGeometry& g, const Metrics& m) {
  const double width = 0.05 * m.font;
  for (const CellLink& link : figure.links) {
    const auto [x0, y0] = cell_centre(figure, g, link.from_panel, link.from_row, link.from_col);
    const auto [x1, y1] = cell_centre(figure, g, link.to_panel, link.to_row, link.to_col);
    const GridMap& start = std::get<HeatmapPanel>(figure.panels[size_t(link.from_panel)].content).values;
    const double hue = 6.0 * (link.from_row * start.grid_w + link.from_col) / double(start.values.size());
    const double r = std::clamp(std::abs(hue - 3.0) - 1.0, 0.0, 1.0),
                 gr = std::clamp(2.0 - std::abs(hue - 2.0), 0.0, 1.0),
                 b = std::clamp(2.0 - std::abs(hue - 4.0), 0.0, 1.0);
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 0)
        cairo_set_source_rgba(cr, 1, 1, 1, 0.8);
      else
        cairo_set_source_rgb(cr, r, gr, b);
      cairo_set_line_width(cr, pass == 0 ? 2.5 * width : width);
      cairo_move_to(cr, x0, y0);
      cairo_line_to(cr, x1, y1);
      cairo_stroke(cr);
      for (const auto& [x, y] : {std::pair{x0, y0}, std::pair{x1, y1}}) {
        cairo_arc(cr, x, y, pass == 0 ? 3.0 * width : 2.0 * width, 0, 2 * M_PI);
        cairo_fill(cr);
      }
    }
  }
}

void draw_figure(cairo_t* cr, const Figure& figure, const FigureStyle& style, const Layout& layout,
                 bool vector_output) {
  const Metrics m(style);
  const FigureGeometry& g = layout.geometry;
  if (!style.transparent) {
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, 0, 0, g.width, g.height);
    cairo_fill(cr);
  }
  ink(cr);
  set_font(cr, m.title, true);
  for (size_t line = 0; line < layout.title.size(); ++line)
    draw_text(cr, layout.title[line], g.width / 2, layout.title_baseline + double(line) * 1.25 * m.title,
              Align::Centre);
  set_font(cr, m.font, true);
  for (size_t c = 0; c < layout.col_labels.size(); ++c)
    for (size_t line = 0; line < layout.col_labels[c].size(); ++line)
      draw_text(cr, layout.col_labels[c][line], layout.col_centre[c],
                layout.col_label_baseline + double(line) * 1.2 * m.font, Align::Centre);
  for (size_t r = 0; r < layout.row_labels.size(); ++r) {
    const std::vector<std::string>& lines = layout.row_labels[r];
    for (size_t line = 0; line < lines.size(); ++line)
      draw_text(cr, lines[line], layout.row_label_right,
                layout.row_centre[r] + 0.36 * m.font + (double(line) - 0.5 * double(lines.size() - 1)) * 1.2 * m.font,
                Align::Right);
  }

  for (size_t i = 0; i < figure.panels.size(); ++i) {
    const Panel& panel = figure.panels[i];
    const Rect& box = g.panels[i].content;
    const std::vector<std::string>& title = layout.panel_titles[i];
    if (!title.empty()) {
      ink(cr);
      set_font(cr, m.small);
      const Rect& cell = g.panels[i].cell;
      for (size_t line = 0; line < title.size(); ++line)
        draw_text(cr, title[line], cell.x + cell.width / 2,
                  box.y - 0.45 * m.font - double(title.size() - 1 - line) * panel_title_step(m), Align::Centre);
    }
    if (const auto* heatmap = std::get_if<HeatmapPanel>(&panel.content)) {
      const ColorScale& scale = figure.scales[size_t(heatmap->scale)];
      draw_heatmap(cr, m, *heatmap, scale, box, vector_output);
      if (heatmap->colour_bar)
        draw_colour_bar(cr, m, scale,
                        {box.x + box.width + kPanelBarGap * m.font, box.y, kPanelBarWidth * m.font, box.height});
    } else if (const auto* plot = std::get_if<PlotPanel>(&panel.content))
      draw_plot(cr, m, *plot, box);
  }
  draw_links(cr, figure, g, m);
  for (size_t s = 0; s < figure.scales.size(); ++s)
    if (g.colour_bars[s].height > 0) draw_colour_bar(cr, m, figure.scales[s], g.colour_bars[s]);
}

// cairo 1.16 writes no image-rendering hint into SVG, so viewers would blur a 14 x 14 heatmap
// into a smooth gradient; the attribute (SVG 1.1) and the style (CSS, browsers) keep cells crisp.
std::string crisp_svg_images(const std::string& svg) {
  const std::string tag = "<image ";
  const std::string crisp = tag + "image-rendering=\"optimizeSpeed\" style=\"image-rendering:pixelated\" ";
  std::string out;
  size_t from = 0;
  for (size_t at = svg.find(tag); at != std::string::npos; at = svg.find(tag, from)) {
    out.append(svg, from, at - from).append(crisp);
    from = at + tag.size();
  }
  return out.append(svg, from, std::string::npos);
}

cairo_status_t append_bytes(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

FigureGeometry layout_figure(const Figure& figure, const FigureStyle& style) {
  validate_figure(figure);
  SurfacePtr scratch(nullptr, &cairo_surface_destroy);
  ContextPtr cr = measuring_context(scratch);
  return compute_layout(cr.get(), figure, style).geometry;
}

std::vector<FigureText> figure_texts(const Figure& figure, const FigureStyle& style) {
  validate_figure(figure);
  SurfacePtr scratch(nullptr, &cairo_surface_destroy);
  ContextPtr cr = measuring_context(scratch);
  const Layout layout = compute_layout(cr.get(), figure, style);
  FigureTextLog log;
  draw_figure(cr.get(), figure, style, layout, true);
  check(cairo_status(cr.get()), "drawing");
  return std::move(log.texts);
}

FigureStyle style_for_width(const Figure& figure, FigureStyle style, double width_pt) {
  validate_figure(figure);
  SurfacePtr scratch(nullptr, &cairo_surface_destroy);
  ContextPtr cr = measuring_context(scratch);
  auto width_at = [&](double panel_width) {
    style.panel_width = panel_width;
    return compute_layout(cr.get(), figure, style).geometry.width;
  };
  constexpr double kNarrowest = 16.0;  // points per heatmap: smaller is unreadable anyway
  while (width_at(kNarrowest) > width_pt) {
    if (style.font_size <= kSmallestFont)
      throw std::invalid_argument("the figure cannot be " + std::to_string(int(width_pt)) + " points wide with " +
                                  std::to_string(int(kSmallestFont)) +
                                  "-point text: its labels alone are wider; use fewer columns or a larger width");
    // Down to the journals' 7 pt first; below it only where 7 cannot fit.
    style.font_size = std::max(style.font_size > kJournalFont ? kJournalFont : kSmallestFont, style.font_size * 0.9);
  }
  // The width grows with the panel width (ceil makes it a staircase): bisect for the widest fit.
  double low = kNarrowest, high = std::max(kNarrowest * 2, width_pt);
  for (int step = 0; step < 40; ++step) {
    const double middle = 0.5 * (low + high);
    (width_at(middle) <= width_pt ? low : high) = middle;
  }
  style.panel_width = low;
  return style;
}

PrintPreview print_preview(const Figure& figure, FigureStyle style, double screen_dpi) {
  style.dpi = screen_dpi;
  style.png_width = 0;
  PrintPreview preview;
  const FigureGeometry geometry = layout_figure(figure, style);
  preview.width_pt = geometry.width;
  preview.height_pt = geometry.height;
  const std::vector<FigureText> texts = figure_texts(figure, style);
  for (size_t i = 0; i < texts.size(); ++i) {
    preview.smallest_text_pt = i == 0 ? texts[i].size_pt : std::min(preview.smallest_text_pt, texts[i].size_pt);
    preview.largest_text_pt = std::max(preview.largest_text_pt, texts[i].size_pt);
  }
  preview.note = small_text_note(style);
  preview.image = render_figure_image(figure, style);
  return preview;
}

cv::Mat render_figure_image(const Figure& figure, const FigureStyle& style) {
  const std::string png = render_figure(figure, style, FigureFormat::Png);
  cv::Mat bgr = cv::imdecode(cv::Mat(1, int(png.size()), CV_8UC1, const_cast<char*>(png.data())), cv::IMREAD_COLOR);
  if (bgr.empty()) throw std::runtime_error("cannot decode the rendered figure");
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

std::string render_figure(const Figure& figure, const FigureStyle& style, FigureFormat format) {
  validate_figure(figure);
  if (!(style.panel_width > 0) || !(style.font_size > 0) || !(style.dpi > 0))
    throw std::invalid_argument("figure style needs positive panel width, font size and dpi");
  SurfacePtr scratch(nullptr, &cairo_surface_destroy);
  const Layout layout = compute_layout(measuring_context(scratch).get(), figure, style);
  const FigureGeometry& g = layout.geometry;
  if (g.png_width > 30000 || g.png_height > 30000)
    throw std::invalid_argument("figure of " + std::to_string(g.png_width) + " x " + std::to_string(g.png_height) +
                                " pixels is too large for PNG; lower --dpi or --png-width");

  std::string bytes;
  SurfacePtr surface(nullptr, &cairo_surface_destroy);
  switch (format) {
    case FigureFormat::Png:
      surface.reset(cairo_image_surface_create(style.transparent ? CAIRO_FORMAT_ARGB32 : CAIRO_FORMAT_RGB24,
                                               g.png_width, g.png_height));
      break;
    case FigureFormat::Svg:
      surface.reset(cairo_svg_surface_create_for_stream(append_bytes, &bytes, g.width, g.height));
      break;
    case FigureFormat::Pdf:
      surface.reset(cairo_pdf_surface_create_for_stream(append_bytes, &bytes, g.width, g.height));
      // A fixed date keeps the same figure the same file.
      cairo_pdf_surface_set_metadata(surface.get(), CAIRO_PDF_METADATA_CREATE_DATE, "2000-01-01T00:00:00Z");
      cairo_pdf_surface_set_metadata(surface.get(), CAIRO_PDF_METADATA_CREATOR, "attnscope");
      if (!figure.title.empty())
        cairo_pdf_surface_set_metadata(surface.get(), CAIRO_PDF_METADATA_TITLE, figure.title.c_str());
      break;
  }
  check(cairo_surface_status(surface.get()), "surface");
  {
    ContextPtr cr(cairo_create(surface.get()), &cairo_destroy);
    cairo_font_options_t* options = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(options, CAIRO_HINT_METRICS_OFF);
    cairo_font_options_set_hint_style(options, CAIRO_HINT_STYLE_NONE);
    cairo_font_options_set_antialias(options, CAIRO_ANTIALIAS_GRAY);
    cairo_set_font_options(cr.get(), options);
    cairo_font_options_destroy(options);
    if (format == FigureFormat::Png) cairo_scale(cr.get(), g.pixels_per_point, g.pixels_per_point);
    draw_figure(cr.get(), figure, style, layout, format != FigureFormat::Png);
    check(cairo_status(cr.get()), "drawing");
  }
  if (format == FigureFormat::Png)
    check(cairo_surface_write_to_png_stream(surface.get(), append_bytes, &bytes), "PNG encoding");
  cairo_surface_finish(surface.get());
  check(cairo_surface_status(surface.get()), "finishing the file");
  if (format == FigureFormat::Svg) bytes = crisp_svg_images(bytes);
  return bytes;
}

}  // namespace attnscope
