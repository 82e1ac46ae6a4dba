// A figure as plain data: a grid of panels (heatmaps, line plots) with labels and shared colour
// scales. Layouts (figures/layouts.h) fill it from the engine; figures/render.h draws it.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "core/colormap.h"
#include "core/grid_map.h"
#include "core/rgb_image.h"
#include "core/value_scale.h"

namespace attnscope {

// One value-to-colour mapping shared by every heatmap that names it; drawn as one colour bar.
// Values map to LUT entries as core/value_scale.h says (clamped to [vmin, vmax], log when `log`).
struct ColorScale {
  Colormap colormap = Colormap::Viridis;
  float vmin = 0.0f;
  float vmax = 1.0f;
  std::string label;  // beside the colour bar
  bool log = false;
  ValueScale value_scale() const;
};
// A figure scale from a resolved value scale; the bar reads "<label> (<the scale's mode>)".
ColorScale figure_scale(const ValueScale& scale, const std::string& label);

// A map of values drawn as coloured cells, optionally blended over an RGB image (an overlay).
struct HeatmapPanel {
  GridMap values;       // the numbers written beside the figure
  int scale = 0;        // index into Figure::scales
  RgbImage background;  // optional; the cells are stretched over it (nearest) and blended
  float opacity = 1.0f;
  OverlayAlpha alpha = OverlayAlpha::Constant;  // Value: the colour's weight follows the value
  int marked_row = -1;                          // a cell to outline (the query patch), -1: none
  int marked_col = -1;
  std::string x_label, y_label;  // optional axis captions (e.g. "key token", "query token")
  bool colour_bar = false;       // its scale's colour bar right beside it (not only at the figure's right)
};

struct Series {
  std::string label;  // shown in a legend when a plot has more than one labelled series
  std::vector<double> x, y;
  bool markers = false;  // dots at the points (a scatter when `line` is false)
  bool line = true;
  bool pairs = false;  // the line is separate segments (x[2i], y[2i]) - (x[2i+1], y[2i+1])
  int colour = -1;     // an index into the plot colours; -1: the series' position
};

// A reference line across a plot: vertical at x = value for x guides, horizontal for y guides.
struct Guide {
  double value = 0.0;
  std::string label;
};

struct PlotPanel {
  std::vector<Series> series;
  std::string x_label, y_label;
  bool log_y = false;  // points with y <= 0 are left out on a log axis
  std::vector<Guide> x_guides, y_guides;
  double y_lo = 0, y_hi = 0;   // y_hi > y_lo: this y range instead of the data's (rows sharing one axis)
  bool same_xy_range = false;  // x and y cover the same range (a 2-D projection)
  bool whole_x = false;        // x values are indices (heads, layers): ticks at whole numbers only
};

struct Panel {
  std::string title;      // above the panel
  std::string data_name;  // names the file with its numbers: "<data_name>.npy" or ".csv"; unique
  std::variant<std::monostate, HeatmapPanel, PlotPanel> content;  // monostate: an empty cell
};

// A line from a cell of one heatmap panel to a cell of another, drawn over the panels between the
// cells' centres (matched patches of two images: the similarity view's best buddies).
struct CellLink {
  int from_panel = 0, from_row = 0, from_col = 0;
  int to_panel = 0, to_row = 0, to_col = 0;
};

struct Figure {
  std::string title;
  int rows = 1;
  int cols = 1;
  std::vector<std::string> row_labels;  // left of each row; empty or `rows` entries
  std::vector<std::string> col_labels;  // above each column; empty or `cols` entries
  std::vector<Panel> panels;            // rows * cols, row-major
  std::vector<ColorScale> scales;
  std::vector<CellLink> links;  // coloured by where they start, so neighbouring pairs share a hue

  Figure() = default;
  Figure(int rows_, int cols_) : rows(rows_), cols(cols_), panels(size_t(rows_ * cols_)) {}
  Panel& at(int row, int col) { return panels.at(size_t(row * cols + col)); }
  const Panel& at(int row, int col) const { return panels.at(size_t(row * cols + col)); }
};

// Figures one below the other, each keeping its panels, scales, links and column span (the grid is as
// wide as the widest; shorter rows end in empty cells). `names`, one per figure, label each figure's
// first row and prefix its panels' data names, so that those stay unique. The title is the caller's.
Figure stacked_figures(const std::vector<Figure>& figures, const std::vector<std::string>& names);

// The figure with its rows as columns and its columns as rows: panel (r, c) at (c, r), the row and
// column labels swapped, links following their panels.
Figure transposed(const Figure& figure);

// Gives each panel whose data name an earlier panel has the first free "_2", "_3", ... suffix, so
// that every panel's numbers have a file of their own.
void number_repeated_data_names(Figure& figure);

// Throws std::invalid_argument when the figure is inconsistent (panel count, label counts, scale
// indices, value types, series lengths), so renderers can trust it.
void validate_figure(const Figure& figure);

}  // namespace attnscope
