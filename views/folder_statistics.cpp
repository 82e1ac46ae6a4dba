#include "views/folder_statistics.h"

#include "views/analysis_options.h"
#include "views/option_catalog.h"

#include <filesystem>

#include "core/excerpt.h"
#include "figures/bundle.h"
#include "models/inference.h"

namespace attnscope {

namespace fs = std::filesystem;

const AnalysisOption<std::string>& images_folder_option() {
  static const auto option = text_option(
      "images", "DIR",
      "headstats, erf, cka: a folder of images the statistics run over (sorted by name; the workbench runs them on "
      "its worker with a progress line)");
  return option;
}

OptionSpec images_option() { return images_folder_option().spec(); }

std::string images_folder(const AnalysisSettings& settings) { return images_folder_option()(settings); }

const CommandFlag kCompareModelFlag = {
    "compare-model", "FILE",
    "headstats, erf, cka: a second model on the same images (its own variant, the session's input settings)", ""};

AnalyzeFolder analyze_folder(const AnalyzeContext& context) {
  const AppState& state = context.state;
  AnalyzeFolder run;
  if (state.model.empty()) throw std::invalid_argument("--model is required");
  run.models = {state.model};
  run.settings = {state.attention};
  const std::string compare = context.line.flags.at("compare-model");
  if (!compare.empty()) {
    run.models.push_back(compare);
    run.settings.push_back(AttentionSettings{});
  }
  run.folder = images_folder(state);
  if (!run.folder.empty() && !state.image.empty())
    throw std::invalid_argument("give --images DIR or --image FILE, not both");
  if (run.folder.empty()) {
    if (state.image.empty()) throw std::invalid_argument("--images DIR is required");
    run.folder = state.image;
    run.images = {state.image};
    return run;
  }
  run.from_folder = true;
  const std::vector<std::string> listed = list_images(run.folder);
  if (listed.empty()) throw std::invalid_argument("no images in " + run.folder);
  for (const std::string& image : listed) {
    try {
      load_image_rgb(image, state.max_pixels);
      run.images.push_back(image);
    } catch (const std::exception& e) {
      run.skipped.emplace_back(image, e.what());
      context.warnings.push_back("skipped " + fs::path(image).filename().string() + ": " + excerpt(e.what(), 200));
    }
  }
  if (run.images.empty())
    throw std::invalid_argument("none of the " + std::to_string(listed.size()) + " images in " + run.folder +
                                " could be read (the first: " + excerpt(run.skipped.front().second, 200) + ")");
  return run;
}

nlohmann::json folder_images_json(const AnalyzeFolder& run) {
  if (!run.from_folder) return nlohmann::json::object();
  nlohmann::json used = nlohmann::json::array(), skipped = nlohmann::json::array();
  for (const std::string& image : run.images) used.push_back(fs::path(image).filename().string());
  for (const auto& [image, why] : run.skipped)
    skipped.push_back({{"file", fs::path(image).filename().string()}, {"why", why}});
  return {{"images_used", used}, {"images_skipped", skipped}};
}

ViewFolder view_folder(const InferenceRequest& request, const std::string& purpose) {
  ViewFolder folder;
  folder.folder = images_folder(request);
  if (folder.folder.empty()) {
    folder.error = "give a folder of images (images) to " + purpose;
    return folder;
  }
  try {
    folder.images = list_images(folder.folder);
    if (folder.images.empty()) folder.error = "no images in " + folder.folder;
  } catch (const std::invalid_argument& e) {
    folder.error = e.what();
  }
  return folder;
}

void FolderViewData::describe(nlohmann::json& about) const {
  about["folder"] = folder;
  about["folder_images"] = images;
  about["folder_error"] = error;
}

bool is_folder_job(const InferenceRequest& request) {
  const AnalysisEntry* entry = find_analysis(request.analysis);
  if (!entry || images_folder(request).empty()) return false;
  static const std::string folder_option = images_option().name;  // asked every frame: named once
  for (const OptionSpec& option : entry->options)
    if (option.name == folder_option) return true;
  return false;
}

std::string folder_job_description(const InferenceRequest& request) {
  const fs::path folder(images_folder(request));
  std::string description = request.analysis + " over " +
                            (folder.has_filename() ? folder.filename() : folder.parent_path().filename()).string();
  for (size_t p = 0; p < request.panels.size(); ++p)
    description += (p == 0 ? " with " : ", panel " + std::to_string(p + 1) + " ") +
                   model_label(request.panels[p].model_path, request.panels[p].settings);
  return description;
}

LoadedModel load_analyze_model(const AnalyzeContext& context, const std::string& path) {
  const AppState& state = context.state;
  configure_threads();
  LoadedModel model =
      load_model(path, path == state.model ? state.arch_overrides() : ArchOverrides{}, resolve_device(state.device));
  for (const auto& warning : model.report.warnings) context.warnings.push_back(warning);
  configure_input(model, state.input_settings());
  return model;
}

RgbImage for_each_analyze_model(
    const AnalyzeContext& context, const AnalyzeFolder& run,
    const std::function<void(size_t, LoadedModel&, const AttentionSettings&, const std::string&)>& each) {
  const AppState& state = context.state;
  std::vector<LoadedModel> models;  // every model loaded before the first pass: a broken one fails first
  for (const std::string& path : run.models) models.push_back(load_analyze_model(context, path));
  const RgbImage first_image =
      prepare_image_file(models.front(), state.input_settings(), run.images.front(), state.max_pixels).rgb;
  for (size_t m = 0; m < run.models.size(); ++m)
    each(m, models[m], run.settings[m], model_label(run.models[m], run.settings[m]));
  return first_image;
}

std::string model_file(const std::string& stem, size_t model, const std::string& extension) {
  return stem + (model == 0 ? "" : "_compare") + extension;
}

std::string model_label(const std::string& path, const AttentionSettings& settings) {
  // A hub download is "model.safetensors" in a folder named after the model: the folder names it.
  const fs::path file(path);
  std::string label = file.stem().string();
  if (label == "model" && file.has_parent_path() && !file.parent_path().filename().empty())
    label = file.parent_path().filename().string();
  // The settings it was computed with: the variant and every knob away from its default, so that a
  // folder job's result says what made it after the workbench's sliders have moved on.
  std::string changed;
  const AttentionSettings defaults;
  for (const AttentionKnob& knob : attention_knobs())
    if (!knob.equal(settings, defaults)) changed += " " + knob.name + "=" + knob.text(settings);
  if (settings.variant != Variant::Native || !changed.empty())
    label += " (" + to_string(settings.variant) + changed + ")";
  return label;
}

PreparedImage prepare_image_file(const LoadedModel& model, const InputSettings& input, const std::string& path,
                                 int64_t max_pixels) {
  PreparedImage image;
  // An image that cannot be read (ImageError, a runtime_error) becomes the statistic's error with the
  // file's name, which each view keeps in its own data instead of failing the whole request.
  try {
    image.rgb = prepare_model_input(load_image_rgb(path, max_pixels), input, model);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fs::path(path).filename().string() + ": " + e.what());
  } catch (const ImageError& e) {
    throw std::invalid_argument(fs::path(path).filename().string() + ": " + e.what());
  }
  image.input = image_to_tensor(image.rgb, model.normalization).to(model.device);
  return image;
}

FolderProgress folder_progress(const AnalyzeContext& context, const std::vector<std::string>& images) {
  FolderProgress progress;
  progress.report = [&context, &images](int done, int total) {
    context.show_progress(size_t(done), size_t(total),
                          size_t(done) < images.size() ? fs::path(images[size_t(done)]).filename().string() : "done");
  };
  return progress;
}

FolderProgress view_progress(const AnalysisViewInput& input) { return {input.cancelled, input.progress}; }

std::vector<std::string> open_view_folder(const InferenceRequest& request, const std::string& purpose,
                                          FolderViewData& view) {
  ViewFolder folder = view_folder(request, purpose);
  view.folder = folder.folder;
  view.error = folder.error;
  view.images = folder.error.empty() ? int(folder.images.size()) : 0;
  return folder.error.empty() ? folder.images : std::vector<std::string>{};
}

std::string panel_label(size_t index, const PanelForwardView& panel) {
  return "panel " + std::to_string(index + 1) + ": " +
         model_label(panel.model ? panel.model->path : "", panel.settings);
}

void for_each_panel_pass(const AnalysisViewInput& input,
                         const std::function<void(size_t, const PanelForwardView&, const FolderProgress&)>& each,
                         const std::function<void(size_t, const std::string&)>& failed) {
  const size_t panels = input.panels.size();
  for (size_t p = 0; p < panels; ++p) {
    const PanelForwardView& panel = input.panels[p];
    if (!panel.model) {
      failed(p, "its model did not load");
      continue;
    }
    FolderProgress progress = view_progress(input);
    if (input.progress)
      progress.report = [&input, p, panels](int done, int total) {
        input.progress(int(p) * total + done, int(panels) * total);
      };
    try {
      each(p, panel, progress);
    } catch (const std::invalid_argument& e) {
      failed(p, e.what());
    }
  }
}

std::string folder_key(const std::string& analysis, const InferenceRequest& request, const PanelForwardView& panel,
                       const std::vector<std::string>& images, const std::string& extra) {
  InputSelection input = request;
  input.image.clear();  // the folder's images instead
  input.model = panel.model ? panel.model->path : "";
  std::string key = analysis + "|" + input.key() + "|" + settings_key(panel.settings) + "|" + extra + "|";
  for (const auto& image : images) key += image + ";";
  return key;
}

std::string images_heading(int images, const std::string& folder) {
  return std::to_string(images) + (images == 1 ? " image of " : " images of ") + fs::path(folder).filename().string();
}

Figure analyze_figure(const AnalysisEntry& entry, std::shared_ptr<const AnalysisViewData> data, const RgbImage& image,
                      const AppState& state) {
  InferenceOutcome outcome;
  outcome.analysis_view = std::move(data);
  outcome.input_rgb = image;
  return entry.figure(outcome, state);
}

std::string add_analyze_figure(const AnalyzeContext& context, const Figure& figure, const RgbImage& image,
                               const std::string& stem) {
  FigureOutput output = figure_output(context.state);
  output.format = FigureFormat::Png;
  const ExportedFigure exported =
      add_figure_bundle(*context.files, figure, output, to_json(context.state), image, context.out.string(), stem);
  warn_if_undrawn(context, exported);
  return exported.figure_path.empty() ? stem + "_data/" : stem + ".png";
}

}  // namespace attnscope
