// What the statistics over a folder of images share (headstats, dino-masks, erf, cka): the folder
// option, the second model of `analyze`, each image prepared as the session prepares the model's
// input, and one pass over the images that reports progress (the CLI's bar, the workbench worker's
// status line), stops between images when a newer request wins, and keeps its result (and, when
// stopped, what it had done, to go on from there) in the analysis cache.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "views/analysis_registry.h"
#include "views/folder_view.h"
#include "views/representation_features.h"  // kTitleBreak, where a figure title may wrap

namespace attnscope {

// --images DIR: the folder option of the statistics (kept in AnalysisSettings::options).
OptionSpec images_option();
std::string images_folder(const AnalysisSettings& settings);
// --compare-model FILE: `analyze`'s second model (the workbench compares panels instead).
extern const CommandFlag kCompareModelFlag;

// What a statistics run of `analyze` goes over: the folder's images (sorted by name), or --image
// alone as a folder of one, and its models: --model with the session's attention, then
// --compare-model (when given) with its own. Throws std::invalid_argument when a part is missing.
struct AnalyzeFolder {
  std::string folder;                                        // as given (or the one image)
  std::vector<std::string> images;                           // those that decode; the others are in `skipped`
  std::vector<std::pair<std::string, std::string>> skipped;  // file, why
  bool from_folder = false;                                  // --images DIR (not --image alone)
  std::vector<std::string> models;
  std::vector<AttentionSettings> settings;  // per model
};
// Every image of the folder is decoded once first: one that does not (a macOS "._x.png") is
// skipped, said as a warning and listed in summary.json (folder_images_json), as `export` goes on past a
// bad image. The models are loaded here too, before any pass, so a broken --compare-model is said
// before the first model's pass, not after it.
AnalyzeFolder analyze_folder(const AnalyzeContext& context);
// The images a folder run read and skipped, as summary.json lists them (nothing for --image alone).
nlohmann::json folder_images_json(const AnalyzeFolder& run);
// each(m, model, settings, label) for the run's models, all loaded first with the session's input
// settings. Returns the first image as --model takes it (the figures' background).
RgbImage for_each_analyze_model(
    const AnalyzeContext& context, const AnalyzeFolder& run,
    const std::function<void(size_t, LoadedModel&, const AttentionSettings&, const std::string&)>& each);
// The file of model m: "erf.npy" for --model, "erf_compare.npy" for --compare-model.
std::string model_file(const std::string& stem, size_t model, const std::string& extension);
// The workbench's: the folder option and its images, or why there are none (`error`: no folder
// set, for `purpose`, or none in it).
struct ViewFolder {
  std::string folder, error;
  std::vector<std::string> images;
};
ViewFolder view_folder(const InferenceRequest& request, const std::string& purpose);
// Whether the request's analysis view is a folder job: an analysis that reads the folder option,
// with a folder given. The workbench runs those on a thread of their own beside the panels.
bool is_folder_job(const InferenceRequest& request);
// "erf over glyphs with flatten (softmax window=8), panel 2 deit (linear)": what a folder job
// computes and with which models and settings, as its result names it.
std::string folder_job_description(const InferenceRequest& request);

// A model for `analyze` with the session's input settings (its own --arch only for --model).
LoadedModel load_analyze_model(const AnalyzeContext& context, const std::string& path);
// A short name for figures: the file's stem (its folder's name for a hub download's "model.*"), and the
// variant with every knob away from its default when either differs ("softmax (focused p=4)").
std::string model_label(const std::string& path, const AttentionSettings& settings);

// One image as a model takes it: `rgb` after resize and crop, `input` [1, 3, H, W] normalised on
// the model's device.
struct PreparedImage {
  RgbImage rgb;
  torch::Tensor input;
};
PreparedImage prepare_image_file(const LoadedModel& model, const InputSettings& input, const std::string& path,
                                 int64_t max_pixels);

// Progress and stopping between images: `report(done, total)` before each image and at the end.
struct FolderProgress {
  std::function<bool()> cancelled;
  std::function<void(int done, int total)> report;
};
// The CLI's: its progress (a bar on stderr) naming each image.
FolderProgress folder_progress(const AnalyzeContext& context, const std::vector<std::string>& images);
// The worker's: its cancel check and progress report.
FolderProgress view_progress(const AnalysisViewInput& input);

// Sets the view's folder, image count and (no folder, no images) error from the request; returns
// its images (empty on error).
std::vector<std::string> open_view_folder(const InferenceRequest& request, const std::string& purpose,
                                          FolderViewData& view);

// "panel 2: softmax (linear)".
std::string panel_label(size_t index, const PanelForwardView& panel);
// each(p, panel, progress) for every panel whose model loaded, with every panel's pass on one
// progress bar; failed(p, why) for the others and for a pass that throws std::invalid_argument.
void for_each_panel_pass(const AnalysisViewInput& input,
                         const std::function<void(size_t, const PanelForwardView&, const FolderProgress&)>& each,
                         const std::function<void(size_t, const std::string&)>& failed);
// The same into one result per panel (a PanelPass): labelled, its error set where it failed;
// each(result, panel, progress, p).
template <typename Result, typename Each>
void panel_passes(const AnalysisViewInput& input, std::vector<Result>& results, Each each) {
  results.resize(input.panels.size());
  for (size_t p = 0; p < results.size(); ++p) results[p].label = panel_label(p, input.panels[p]);
  for_each_panel_pass(
      input,
      [&](size_t p, const PanelForwardView& panel, const FolderProgress& progress) {
        each(results[p], panel, progress, p);
      },
      [&](size_t p, const std::string& why) { results[p].error = why; });
}

// A cache key for a pass of `analysis` over `images` by a panel's model: the model, its attention
// and input settings, the images and `extra` (the analysis's own settings).
std::string folder_key(const std::string& analysis, const InferenceRequest& request, const PanelForwardView& panel,
                       const std::vector<std::string>& images, const std::string& extra);

// What a pass has done so far: `value` after `done` images.
template <typename T>
struct FolderPartial {
  T value;
  size_t done = 0;
};

// step(value, index) for each image in turn, from where a stopped pass under `key` left off; when
// `progress.cancelled` says so between images, what was done is kept and Cancelled is thrown. The
// finished value is kept under `key`, and returned from there when it is already known. `cache`
// may be null (the CLI). `value` must copy as a snapshot (no tensor updated in place), and `step`
// may change it only after everything that can be cancelled (its forward passes) is done.
template <typename T, typename Step>
std::shared_ptr<const T> folder_pass(AnalysisCache* cache, const std::string& key, size_t count,
                                     const FolderProgress& progress, T initial, Step step) {
  if (cache)
    if (auto done = cache->get<T>(key)) return done;
  FolderPartial<T> partial{std::move(initial), 0};
  if (cache)
    if (auto paused = cache->get<FolderPartial<T>>("stopped|" + key)) partial = *paused;
  auto keep_and_stop = [&] {
    if (cache) cache->put("stopped|" + key, std::make_shared<const FolderPartial<T>>(partial));
    throw Cancelled();
  };
  for (; partial.done < count; ++partial.done) {
    if (progress.cancelled && progress.cancelled()) keep_and_stop();
    if (progress.report) progress.report(int(partial.done), int(count));
    try {
      step(partial.value, partial.done);  // changes `value` only once its image is done
    } catch (const Cancelled&) {
      keep_and_stop();  // within an image's forward pass: the images before it are kept
    }
  }
  if (progress.report) progress.report(int(count), int(count));
  auto result = std::make_shared<const T>(std::move(partial.value));
  if (cache) cache->put(key, result);
  return result;
}

// "12 images of glyphs": what a statistics figure was made from.
std::string images_heading(int images, const std::string& folder);

// The view's outcome-only figure drawn for `analyze`: what the workbench would show for these data.
Figure analyze_figure(const AnalysisEntry& entry, std::shared_ptr<const AnalysisViewData> data, const RgbImage& image,
                      const AppState& state);
// Adds the figure to the outputs as `<stem>.png` with its data folder (its data folder alone, and a
// warning, where the build draws no figures). Returns what the report lists: "<stem>.png", or
// "<stem>_data/" where it was not drawn.
std::string add_analyze_figure(const AnalyzeContext& context, const Figure& figure, const RgbImage& image,
                               const std::string& stem);

}  // namespace attnscope
