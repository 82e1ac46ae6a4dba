// Draws a Figure with cairo: PNG (raster), SVG and PDF (vector axes, text and colour bars, with the
// heatmaps embedded as images that keep their cells crisp). No cairo type leaks out of here.
#pragma once

#include "core/enum_names.h"

#include <string>
#include <vector>

#include "figures/figure.h"
#include "figures/figure_output.h"

namespace attnscope {

struct Rect {
  double x = 0, y = 0, width = 0, height = 0;
};

struct PanelGeometry {
  Rect cell;     // the panel's slot in the grid
  Rect content;  // heatmap: where its image is drawn; plot: the axes box
};

// Where everything goes, in points from the top-left corner. The same for every format, so a test
// can find a heatmap's cells in a PNG: pixel = point * pixels_per_point.
struct FigureGeometry {
  double width = 0, height = 0;       // points
  std::vector<PanelGeometry> panels;  // as Figure::panels
  std::vector<Rect> colour_bars;      // as Figure::scales
  double pixels_per_point = 1.0;      // PNG scale for the style
  int png_width = 0, png_height = 0;  // PNG size in pixels
};

// Whether this build draws figures. The engine-only build has no cairo (figures/render_engine.cpp):
// there the functions below throw std::logic_error, and a figure's bundle holds its numbers only.
bool figures_are_drawn();
// Why a figure was not drawn, for messages.
inline constexpr const char* kNoFigures = "this engine-only build has no cairo to draw figures with";

FigureGeometry layout_figure(const Figure& figure, const FigureStyle& style);

// One piece of text as the figure draws it: its size and ink box in points (the geometry's frame).
struct FigureText {
  std::string text;
  double size_pt = 0;
  Rect box;
};
// Every text the figure draws (titles, labels, tick labels, legends), for checking sizes and overlap.
std::vector<FigureText> figure_texts(const Figure& figure, const FigureStyle& style);

// `style` with the panel width (and, where panels alone cannot get there, a smaller font) that
// makes the figure `width_pt` points wide: a paper column is about 240. Throws
// std::invalid_argument when even kSmallestFont does not fit.
FigureStyle style_for_width(const Figure& figure, FigureStyle style, double width_pt);

// The file's bytes. PNG output is byte-for-byte deterministic; PDF carries a fixed creation date.
// Throws std::invalid_argument for an invalid figure, std::runtime_error if cairo fails.
std::string render_figure(const Figure& figure, const FigureStyle& style, FigureFormat format);

}  // namespace attnscope
