// Figure files on disk: one figure per image with the numbers behind every panel and the session
// that reproduces it, written atomically; and the batch over a folder that `attnscope export` and
// the GUI's Export button both run.
//
// Typical use (the GUI's Export button, on its worker thread, with the model it already holds):
//   ExportedFigure done = export_figure(state, model, state.image, folder);
// The CLI:  export_figures(state, model, list_images(dir), out, progress).
// Lower level: FigureRequest::from_state + build_figure (figures/layouts.h) give the Figure;
// write_figure_bundle writes it; render_figure / layout_figure (figures/render.h) draw it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "figures/layouts.h"

namespace attnscope {

class OutputFiles;

// What one export wrote. Files, for a figure stem S in folder D:
//   D/S.<png|svg|pdf>        the figure
//   D/S_data/<panel>.npy     heatmap values (float32 [rows, cols]), colour-mapped as in the figure
//   D/S_data/<panel>.csv     plot series: series,<x label>,<y label>
//   D/S_data/figure.json     geometry (points and PNG pixels), colour scales, panel files
//   D/S_data/session.json    the AppState that reproduces the figure (`export --session`)
//   D/S_data/input.png       the image as the model saw it
struct ExportedFigure {
  std::string figure_path;
  std::vector<std::string> data_paths;  // the other files written (identical ones left in place are not listed)
  FigureGeometry geometry;
};

// "photos/cat.jpg" + "grid-layers" -> "cat_grid-layers".
std::string figure_stem(const std::string& image_path, const std::string& layout);

// Renders and writes a built figure with its data. Every file is rendered in memory first, then the
// bundle is written as a whole (core/atomic_bundle.h: staged, then moved into place under a lock on
// the folder, the figure last). Without request.overwrite an existing figure is an error, raised
// before anything is in place; an existing data folder with other content is too (an identical one
// is left as it is, so a PDF and a PNG of one figure share their data).
ExportedFigure write_figure_bundle(const Figure& figure, const FigureRequest& request, const AppState& session,
                                   const cv::Mat& input_rgb, const std::string& out_dir, const std::string& stem);

// The same bundle added to a command's other outputs (core/output_files.h), with names relative to
// their folder `out_dir`: it is refused and written with them (no shared-data exception), so an
// existing figure is an error unless the command may overwrite. Nothing is written here.
ExportedFigure add_figure_bundle(OutputFiles& outputs, const Figure& figure, const FigureRequest& request,
                                 const AppState& session, const cv::Mat& input_rgb, const std::string& out_dir,
                                 const std::string& stem);

// One image: load, prepare for the model, build the state's layout, write the bundle to out_dir.
// Rows that name their own checkpoint load it through `cache` (a temporary one when null).
ExportedFigure export_figure(const AppState& state, LoadedModel& model, const std::string& image_path,
                             const std::string& out_dir, ModelCache* cache = nullptr);

// Called before each image (done = images finished so far) and once at the end (done = total).
// Returning false stops the batch before the next image.
using ExportProgress = std::function<bool(size_t done, size_t total, const std::string& image)>;

struct ExportFailure {
  std::string image;
  std::string message;
};

struct BatchExport {
  std::vector<ExportedFigure> written;
  std::vector<ExportFailure> failed;  // one image's error never stops the others
  bool stopped = false;               // progress returned false
};

BatchExport export_figures(const AppState& state, LoadedModel& model, const std::vector<std::string>& images,
                           const std::string& out_dir, const ExportProgress& progress = {});

// The images in a folder (not recursive), sorted by name: .png .jpg .jpeg .bmp .tif .tiff .webp
// (any case). Throws std::invalid_argument if the folder cannot be read.
std::vector<std::string> list_images(const std::string& folder);

}  // namespace attnscope
