#include "figures/figure.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

namespace attnscope {

namespace {

[[noreturn]] void invalid(const std::string& why) { throw std::invalid_argument("figure: " + why); }

}  // namespace

ValueScale ColorScale::value_scale() const {
  ValueScale scale;
  scale.colormap = colormap;
  scale.vmin = vmin;
  scale.vmax = vmax;
  scale.log = log;
  scale.diverging = colormap == Colormap::RdBu;
  return scale;
}

ColorScale figure_scale(const ValueScale& scale, const std::string& label) {
  ColorScale out;
  out.colormap = scale.colormap;
  out.vmin = float(scale.vmin);
  out.vmax = float(scale.vmax);
  out.log = scale.log;
  out.label = scale.label.empty() ? label : label + " (" + scale.label + ")";
  return out;
}

Figure stacked_figures(const std::vector<Figure>& figures, const std::vector<std::string>& names) {
  if (figures.empty() || names.size() != figures.size())
    throw std::invalid_argument("stacked figures need at least one figure and one name each");
  int rows = 0, cols = 1;
  for (const Figure& part : figures) rows += part.rows, cols = std::max(cols, part.cols);
  Figure stacked(rows, cols);
  int row_offset = 0;
  for (size_t f = 0; f < figures.size(); ++f) {
    const Figure& part = figures[f];
    const int scale_offset = int(stacked.scales.size());
    stacked.scales.insert(stacked.scales.end(), part.scales.begin(), part.scales.end());
    auto moved = [&](int index) { return (row_offset + index / part.cols) * cols + index % part.cols; };
    for (int r = 0; r < part.rows; ++r) {
      for (int c = 0; c < part.cols; ++c) {
        Panel panel = part.at(r, c);
        if (!std::holds_alternative<std::monostate>(panel.content)) panel.data_name = names[f] + "_" + panel.data_name;
        if (auto* heatmap = std::get_if<HeatmapPanel>(&panel.content)) heatmap->scale += scale_offset;
        stacked.at(row_offset + r, c) = std::move(panel);
      }
      const std::string label = r < int(part.row_labels.size()) ? part.row_labels[size_t(r)] : "";
      stacked.row_labels.push_back(r == 0 ? names[f] + (label.empty() ? "" : " " + label) : label);
    }
    for (CellLink link : part.links) {
      link.from_panel = moved(link.from_panel);
      link.to_panel = moved(link.to_panel);
      stacked.links.push_back(link);
    }
    row_offset += part.rows;
  }
  return stacked;
}

void validate_figure(const Figure& figure) {
  if (figure.rows < 1 || figure.cols < 1) invalid("needs at least one row and one column");
  if (figure.panels.size() != size_t(figure.rows * figure.cols))
    invalid(std::to_string(figure.panels.size()) + " panels for a " + std::to_string(figure.rows) + " x " +
            std::to_string(figure.cols) + " grid");
  if (!figure.row_labels.empty() && figure.row_labels.size() != size_t(figure.rows))
    invalid("row labels must be one per row");
  if (!figure.col_labels.empty() && figure.col_labels.size() != size_t(figure.cols))
    invalid("column labels must be one per column");
  for (const auto& scale : figure.scales)
    if (!std::isfinite(scale.vmin) || !std::isfinite(scale.vmax) || !(scale.vmax > scale.vmin))
      invalid("colour scale '" + scale.label + "' needs finite vmin < vmax");
    else if (scale.log && !(scale.vmin > 0))
      invalid("log colour scale '" + scale.label + "' needs vmin > 0");
  std::vector<std::string> data_names;
  for (const auto& panel : figure.panels) {
    if (!std::holds_alternative<std::monostate>(panel.content)) {
      // The name becomes a file beside the figure: one per panel, never a path.
      if (panel.data_name.empty() || panel.data_name.find_first_of("/\\") != std::string::npos ||
          panel.data_name[0] == '.')
        invalid("panel '" + panel.title + "' needs a data name that is a plain file name, got '" + panel.data_name +
                "'");
      if (std::find(data_names.begin(), data_names.end(), panel.data_name) != data_names.end())
        invalid("two panels share the data name '" + panel.data_name + "'");
      data_names.push_back(panel.data_name);
    }
    if (const auto* heatmap = std::get_if<HeatmapPanel>(&panel.content)) {
      const GridMap& values = heatmap->values;
      if (values.empty() || values.grid_h < 1 || values.grid_w < 1 ||
          values.values.size() != size_t(values.grid_h) * size_t(values.grid_w))
        invalid("heatmap '" + panel.title + "' needs a non-empty grid of values");
      if (!std::all_of(values.values.begin(), values.values.end(), [](float v) { return std::isfinite(v); }))
        invalid("heatmap '" + panel.title + "' holds NaN or Inf (the model's numbers are not finite): nothing drawn");
      if (heatmap->scale < 0 || size_t(heatmap->scale) >= figure.scales.size())
        invalid("heatmap '" + panel.title + "' names a missing colour scale");
      if (!(heatmap->opacity >= 0.0f && heatmap->opacity <= 1.0f))
        invalid("heatmap '" + panel.title + "' opacity must be in [0, 1]");
    } else if (const auto* plot = std::get_if<PlotPanel>(&panel.content)) {
      for (const auto& series : plot->series)
        if (series.x.size() != series.y.size())
          invalid("series '" + series.label + "' in '" + panel.title + "' has x and y of different lengths");
    }
  }
  auto check_cell = [&](int index, int row, int col) {
    const HeatmapPanel* heatmap = index >= 0 && size_t(index) < figure.panels.size()
                                      ? std::get_if<HeatmapPanel>(&figure.panels[size_t(index)].content)
                                      : nullptr;
    if (!heatmap) invalid("a link ends at panel " + std::to_string(index) + ", which is no heatmap");
    if (row < 0 || col < 0 || row >= heatmap->values.grid_h || col >= heatmap->values.grid_w)
      invalid("a link ends at cell (" + std::to_string(row) + ", " + std::to_string(col) + ") outside panel " +
              std::to_string(index));
  };
  for (const CellLink& link : figure.links) {
    check_cell(link.from_panel, link.from_row, link.from_col);
    check_cell(link.to_panel, link.to_row, link.to_col);
  }
}

Figure transposed(const Figure& figure) {
  Figure turned(figure.cols, figure.rows);
  turned.title = figure.title;
  turned.row_labels = figure.col_labels;
  turned.col_labels = figure.row_labels;
  turned.scales = figure.scales;
  for (int r = 0; r < figure.rows; ++r)
    for (int c = 0; c < figure.cols; ++c) turned.at(c, r) = figure.at(r, c);
  const auto moved = [&](int panel) { return (panel % figure.cols) * figure.rows + panel / figure.cols; };
  for (CellLink link : figure.links) {
    link.from_panel = moved(link.from_panel);
    link.to_panel = moved(link.to_panel);
    turned.links.push_back(link);
  }
  return turned;
}

void number_repeated_data_names(Figure& figure) {
  std::set<std::string> taken;
  for (const Panel& panel : figure.panels)
    if (!panel.data_name.empty()) taken.insert(panel.data_name);
  std::set<std::string> seen;
  for (Panel& panel : figure.panels) {
    if (panel.data_name.empty() || seen.insert(panel.data_name).second) continue;
    int number = 2;
    while (taken.count(panel.data_name + "_" + std::to_string(number))) ++number;
    panel.data_name += "_" + std::to_string(number);
    taken.insert(panel.data_name);
    seen.insert(panel.data_name);
  }
}

}  // namespace attnscope
