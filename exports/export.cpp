#include "exports/export.h"
#include "core/cv_image.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "core/torch_error.h"
#include "models/inference.h"
#include "views/option_catalog.h"

namespace attnscope {

namespace fs = std::filesystem;

LayoutFigure build_layout_figure(const AppState& state, LoadedModel& model, const std::string& image_path,
                                 ModelCache* cache) {
  LayoutFigure built;
  built.request = FigureRequest::from_state(state);
  const RgbImage image = load_image_rgb(image_path, state.max_pixels);
  built.prepared = prepare_model_input(image, state.input_settings(), model);
  ModelCache temporary;
  const RowModels rows{cache ? cache : &temporary, image, state.arch, state.device};
  built.figure = build_figure(built.request, model, built.prepared, fs::path(image_path).filename().string(), &rows);
  return built;
}

ExportedFigure export_figure(const AppState& state, LoadedModel& model, const std::string& image_path,
                             const std::string& out_dir, ModelCache* cache) {
  const LayoutFigure built = build_layout_figure(state, model, image_path, cache);
  const Figure& figure = built.figure;
  const FigureRequest& request = built.request;
  const RgbImage& prepared = built.prepared;
  // The session names absolute files so that it reproduces the figure from any folder.
  AppState session = state;
  session.image = fs::absolute(image_path).string();
  session.model = absolute_model_name(session.model);
  session.out = fs::absolute(out_dir).string();
  return write_figure_bundle(figure, request, to_session_file_json(session), prepared, out_dir,
                             figure_stem(image_path, request.layout) + state.figure.stem_suffix);
}

BatchExport export_figures(const AppState& state, LoadedModel& model, const std::vector<std::string>& images,
                           const std::string& out_dir, const ExportProgress& progress) {
  FigureRequest::from_state(state);  // a bad option fails once, not once per image
  BatchExport batch;
  ModelCache rows_models;  // checkpoints rows name, loaded once for the whole batch
  std::vector<std::string> stems;
  for (size_t i = 0; i < images.size(); ++i) {
    if (progress && !progress(i, images.size(), images[i])) {
      batch.stopped = true;
      return batch;
    }
    // cat.png and cat.jpg would both become cat_<layout>.*: the second is an error, not a silent skip.
    const std::string stem = fs::path(images[i]).stem().string();
    if (std::find(stems.begin(), stems.end(), stem) != stems.end()) {
      batch.failed.push_back({images[i], "another image of this batch has the same name '" + stem + "'"});
      continue;
    }
    stems.push_back(stem);
    try {
      batch.written.push_back(export_figure(state, model, images[i], out_dir, &rows_models));
    } catch (const c10::Error& e) {
      batch.failed.push_back({images[i], torch_error_text(e)});
    } catch (const std::exception& e) {
      batch.failed.push_back({images[i], e.what()});
    }
  }
  if (progress) progress(images.size(), images.size(), "");
  return batch;
}

}  // namespace attnscope
