// A figure on disk: the rendered figure, a manifest of its geometry and colour scales, the session
// that reproduces it, and the numbers behind every panel, written atomically. Model-free: the
// figures of models (exports/) and the analyses' figures (views/) both write through here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "figures/figure.h"
#include "figures/render.h"

namespace attnscope {

class OutputFiles;

// What one export wrote. Files, for a figure stem S in folder D:
//   D/S.<png|svg|pdf>        the figure
//   D/S.<format>.json        geometry (points and PNG pixels), colour scales, panel files
//   D/S.<format>.session.json the session that reproduces the figure (`export --session`)
//   D/S_data/<panel>.npy     heatmap values (float32 [rows, cols]), colour-mapped as in the figure
//   D/S_data/<panel>.csv     plot series: series,<x label>,<y label>
//   D/S_data/input.png       the image as the model saw it
struct ExportedFigure {
  std::string stem;
  std::string figure_path;              // empty where the build draws no figures (figures_are_drawn)
  std::vector<std::string> data_paths;  // the other files written (identical ones left in place are not listed)
  FigureGeometry geometry;
  std::string note;  // what the user should know about the figure (text under 7 pt), else empty
};

// A figure as a bundle writes it at `output.width_pt`: the style fitted to the width (style_for_width;
// width_pt then 0). A figure whose columns cannot fit side by side (three panels, each with its own
// colour bar, in a single column) is set with its columns as rows (transposed) where that fits, and
// `note` says so. Unchanged without a width or where the build draws no figures. Throws
// std::invalid_argument when neither arrangement fits.
struct FittedFigure {
  Figure figure;
  FigureOutput output;
  std::string note;  // how it was rearranged to fit; empty: as built
};
FittedFigure fit_to_width(const Figure& figure, FigureOutput output);
// What the user is told of a fitted figure: how it was rearranged, and its text under 7 pt
// (small_text_note), as an export prints them.
std::string fitted_notes(const FittedFigure& fitted);

// "photos/cat.jpg" + "grid-layers" -> "cat_grid-layers".
std::string figure_stem(const std::string& image_path, const std::string& layout);

// Renders and writes a built figure with its data and `session` (the session file's JSON). Every
// file is rendered in memory first, then the bundle is written as a whole (core/atomic_bundle.h:
// staged, then moved into place under a lock on the folder, the figure last). Without
// output.overwrite an existing figure is an error, raised before anything is in place; an existing
// data folder with other content is too (an identical one is left as it is, so a PDF and a PNG of
// one figure share their data).
ExportedFigure write_figure_bundle(const Figure& figure, const FigureOutput& output, const nlohmann::json& session,
                                   const RgbImage& input_rgb, const std::string& out_dir, const std::string& stem);

// The same bundle added to a command's other outputs (core/output_files.h), with names relative to
// their folder `out_dir`: it is refused and written with them (no shared-data exception), so an
// existing figure is an error unless the command may overwrite. Nothing is written here. Where the
// build draws no figures, the bundle is the session and the data folder alone.
ExportedFigure add_figure_bundle(OutputFiles& outputs, const Figure& figure, const FigureOutput& output,
                                 const nlohmann::json& session, const RgbImage& input_rgb, const std::string& out_dir,
                                 const std::string& stem);

}  // namespace attnscope
