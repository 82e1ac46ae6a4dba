// The figures of models on disk: one figure per image (its layout built by exports/layouts.h,
// written as a bundle by figures/bundle.h with the session that reproduces it), and the batch over
// a folder that `attnscope export` and the GUI's Export button both run.
//
// Typical use (the GUI's Export button, on its worker thread, with the model it already holds):
//   ExportedFigure done = export_figure(state, model, state.image, folder);
// The CLI:  export_figures(state, model, list_images(dir), out, progress).
// Lower level: FigureRequest::from_state + build_figure (exports/layouts.h) give the Figure;
// write_figure_bundle (figures/bundle.h) writes it; render_figure / layout_figure (figures/render.h) draw it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "exports/layouts.h"
#include "figures/bundle.h"

namespace attnscope {

// One image's figure of the state's layout, as export_figure writes it: the image loaded and prepared
// for the model, the layout built. Rows that name their own checkpoint load it through `cache` (a
// temporary one when null).
struct LayoutFigure {
  Figure figure;
  FigureRequest request;
  RgbImage prepared;
};
LayoutFigure build_layout_figure(const AppState& state, LoadedModel& model, const std::string& image_path,
                                 ModelCache* cache = nullptr);

// One image: build_layout_figure, then the bundle written to out_dir.
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

}  // namespace attnscope
