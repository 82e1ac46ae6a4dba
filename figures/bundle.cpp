#include "figures/bundle.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/atomic_bundle.h"
#include "core/image_encode.h"
#include "core/npy.h"
#include "core/output_files.h"

namespace attnscope {

namespace fs = std::filesystem;

std::string figure_stem(const std::string& image_path, const std::string& layout) {
  return fs::path(image_path).stem().string() + "_" + layout;
}

namespace {

// A plot's series as CSV; numbers with round-trip precision.
std::string plot_csv(const PlotPanel& plot) {
  auto column = [](const std::string& label, const char* fallback) {
    std::string name = label.empty() ? fallback : label;
    std::replace(name.begin(), name.end(), ',', ';');
    std::replace(name.begin(), name.end(), ' ', '_');
    return name;
  };
  std::ostringstream csv;
  csv.precision(9);
  csv << "series," << column(plot.x_label, "x") << "," << column(plot.y_label, "y") << "\n";
  for (size_t s = 0; s < plot.series.size(); ++s) {
    const Series& series = plot.series[s];
    const std::string name = series.label.empty() ? std::to_string(s) : column(series.label, "");
    for (size_t i = 0; i < series.x.size(); ++i) csv << name << "," << series.x[i] << "," << series.y[i] << "\n";
  }
  return csv.str();
}

nlohmann::json rect_json(const Rect& r, double scale = 1.0) {
  return {r.x * scale, r.y * scale, r.width * scale, r.height * scale};
}

nlohmann::json manifest(const Figure& figure, const FigureOutput& request, const FigureGeometry& geometry,
                        const std::string& figure_file, const std::string& data_folder) {
  nlohmann::json scales = nlohmann::json::array();
  for (const auto& scale : figure.scales)
    scales.push_back({{"colormap", to_string(scale.colormap)},
                      {"vmin", scale.vmin},
                      {"vmax", scale.vmax},
                      {"label", scale.label},
                      {"mapping", "lut[round((clamp(v, vmin, vmax) - vmin) * 255 / (vmax - vmin))]"}});
  nlohmann::json panels = nlohmann::json::array();
  for (int r = 0; r < figure.rows; ++r)
    for (int c = 0; c < figure.cols; ++c) {
      const Panel& panel = figure.at(r, c);
      const PanelGeometry& where = geometry.panels[size_t(r * figure.cols + c)];
      nlohmann::json entry = {{"row", r}, {"col", c}, {"title", panel.title}};
      if (const auto* heatmap = std::get_if<HeatmapPanel>(&panel.content)) {
        entry["kind"] = "heatmap";
        entry["data"] = data_folder + "/" + panel.data_name + ".npy";
        entry["scale"] = heatmap->scale;
        entry["cells"] = {heatmap->values.grid_h, heatmap->values.grid_w};
        entry["overlay_opacity"] = heatmap->background.empty() ? 1.0f : heatmap->opacity;
      } else if (std::holds_alternative<PlotPanel>(panel.content)) {
        entry["kind"] = "plot";
        entry["data"] = data_folder + "/" + panel.data_name + ".csv";
      } else {
        entry["kind"] = "empty";
      }
      entry["content_pt"] = rect_json(where.content);
      entry["content_px"] = rect_json(where.content, geometry.pixels_per_point);
      panels.push_back(entry);
    }
  nlohmann::json links = nlohmann::json::array();
  for (const CellLink& link : figure.links)
    links.push_back({link.from_panel, link.from_row, link.from_col, link.to_panel, link.to_row, link.to_col});
  return {{"figure", figure_file},
          {"layout", request.layout},
          {"format", to_string(request.format)},
          {"title", figure.title},
          {"size_pt", {geometry.width, geometry.height}},
          {"png_size_px", {geometry.png_width, geometry.png_height}},
          {"pixels_per_point", geometry.pixels_per_point},
          {"font_pt", request.style.font_size},
          {"note", small_text_note(request.style)},
          {"row_labels", figure.row_labels},
          {"col_labels", figure.col_labels},
          {"scales", scales},
          {"panels", panels},
          {"links", links}};  // [from panel, row, col, to panel, row, col], panels in figure order
}

}  // namespace

namespace {

// The bundle's files, rendered in memory, with paths relative to the output folder (BundleFile's).
std::vector<BundleFile> bundle_files(const Figure& figure, const FigureOutput& request, const nlohmann::json& session,
                                     const RgbImage& input_rgb, const std::string& stem, FigureGeometry& geometry) {
  const std::string figure_file = stem + "." + to_string(request.format);
  const std::string data_folder = stem + "_data";
  std::vector<BundleFile> files;
  if (figures_are_drawn()) {
    geometry = layout_figure(figure, request.style);
    files.push_back({figure_file, render_figure(figure, request.style, request.format)});
    files.push_back(
        {figure_file + ".json", manifest(figure, request, geometry, figure_file, data_folder).dump(2) + "\n"});
  } else {
    validate_figure(figure);  // what render_figure checks: the numbers written are a figure's
  }
  files.push_back({figure_file + ".session.json", session.dump(2) + "\n"});
  for (const auto& panel : figure.panels) {
    if (const auto* heatmap = std::get_if<HeatmapPanel>(&panel.content)) {
      const GridMap& values = heatmap->values;
      const torch::Tensor tensor =
          torch::from_blob(const_cast<float*>(values.values.data()), {values.grid_h, values.grid_w}, torch::kFloat);
      files.push_back({data_folder + "/" + panel.data_name + ".npy", npy_bytes(tensor)});
    } else if (const auto* plot = std::get_if<PlotPanel>(&panel.content)) {
      files.push_back({data_folder + "/" + panel.data_name + ".csv", plot_csv(*plot)});
    }
  }
  if (!input_rgb.empty()) files.push_back({data_folder + "/input.png", encode_png(input_rgb)});
  return files;
}

}  // namespace

// Once per bundle: every figure a bundle holds (a layout, an analysis view, `analyze`'s) takes the
// width the user asked for.
FittedFigure fit_to_width(const Figure& figure, FigureOutput output) {
  FittedFigure fitted{figure, output, ""};
  if (output.width_pt <= 0 || !figures_are_drawn()) return fitted;
  fitted.output.width_pt = 0;
  try {
    fitted.output.style = style_for_width(figure, output.style, output.width_pt);
  } catch (const std::invalid_argument&) {
    if (figure.cols <= 1) throw;
    // Its columns as rows: narrower, and every panel keeps its colour bar, legend or curve.
    fitted.figure = transposed(figure);
    fitted.output.style = style_for_width(fitted.figure, output.style, output.width_pt);
    fitted.note = "its " + std::to_string(figure.cols) + " columns are set as rows to fit " +
                  std::to_string(int(output.width_pt)) + " pt";
  }
  return fitted;
}

std::string fitted_notes(const FittedFigure& fitted) {
  const std::string small = small_text_note(fitted.output.style);
  return fitted.note.empty() ? small : small.empty() ? fitted.note : fitted.note + "; " + small;
}

ExportedFigure write_figure_bundle(const Figure& figure, const FigureOutput& asked, const nlohmann::json& session,
                                   const RgbImage& input_rgb, const std::string& out_dir, const std::string& stem) {
  // Everything is rendered in memory, then the bundle is written as a whole (core/atomic_bundle):
  // a failure, a kill or a concurrent export never leaves a mix of files.
  if (!figures_are_drawn()) throw std::logic_error(std::string("cannot export a figure: ") + kNoFigures);
  const FittedFigure fitted = fit_to_width(figure, asked);
  const FigureOutput& request = fitted.output;
  ExportedFigure exported;
  exported.stem = stem;
  exported.note = fitted_notes(fitted);
  const std::vector<BundleFile> files =
      bundle_files(fitted.figure, request, session, input_rgb, stem, exported.geometry);
  // The data folder is shared by every format of a figure: identical existing data is kept.
  const std::vector<std::string> written =
      write_bundle_atomically(out_dir, stem, files, request.overwrite, {stem + "_data"});
  exported.figure_path = (fs::path(out_dir) / files.front().path).string();
  for (const std::string& path : written)
    if (path != exported.figure_path) exported.data_paths.push_back(path);
  return exported;
}

ExportedFigure add_figure_bundle(OutputFiles& outputs, const Figure& figure, const FigureOutput& asked,
                                 const nlohmann::json& session, const RgbImage& input_rgb, const std::string& out_dir,
                                 const std::string& stem) {
  const FittedFigure fitted = fit_to_width(figure, asked);
  const FigureOutput& request = fitted.output;
  const fs::path out(out_dir);
  ExportedFigure exported;
  exported.stem = stem;
  exported.note = fitted_notes(fitted);
  std::vector<BundleFile> files = bundle_files(fitted.figure, request, session, input_rgb, stem, exported.geometry);
  const size_t first_data = figures_are_drawn() ? 1 : 0;
  if (first_data == 1) exported.figure_path = (out / files.front().path).string();
  for (size_t i = 0; i < files.size(); ++i) {
    if (i >= first_data) exported.data_paths.push_back((out / files[i].path).string());
    outputs.add_bytes(files[i].path, std::move(files[i].bytes));
  }
  return exported;
}

}  // namespace attnscope
