// The panels' forward passes of a workbench request, and what they are keyed by: a pass is re-used
// while its model, input and attention settings stay the same (a layer switch, or a second panel
// with the same model and variant, costs no forward pass).
#include <sstream>

#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include <chrono>

#include "analysis/residual_stream.h"
#include "core/excerpt.h"
#include "models/finite_checks.h"
#include "models/head_ablation.h"
#include "models/inference.h"
#include "models/model_loader.h"
#include "views/request_runner.h"

namespace attnscope {

std::string InferenceRequest::forward_key() const {
  std::ostringstream key;
  key << InputSelection::key() << "frame " << frame.get() << " " << frame_number << "|";
  for (const PanelRequest& panel : panels) key << panel.model_path << "|" << settings_key(panel.settings) << "|";
  return key.str();
}

std::string InferenceRequest::key() const {
  // The analysis part counts only with the options the active analysis reads.
  std::string analysis_part = analysis;
  if (const AnalysisEntry* entry = find_analysis(analysis)) {
    AppState reading;
    static_cast<AnalysisSettings&>(reading) = *this;
    for (const std::string& name : entry->reads)
      if (const OptionSpec* option = find_session_option(name))
        analysis_part += "|" + name + "=" + option->get(reading);
    for (const OptionSpec& option : entry->options) analysis_part += "|" + option.name + "=" + option.get(reading);
  }
  return forward_key() + "#" + ViewSelection::key() + "#" + analysis_part;
}

namespace {

// --arch and --config describe the session's model; another panel's checkpoint says what it is itself.
std::pair<std::string, std::string> arch_and_config_for(const InferenceRequest& request, const std::string& path) {
  if (path != request.model) return {};
  return {request.arch, request.config};
}

const RgbImage& source_image(const InferenceRequest& request, RunCache& cache) {
  const std::string image_key = request.frame ? "frame " + std::to_string(request.frame_number)
                                              : "file " + request.image + "|" + std::to_string(request.max_pixels);
  if (cache.image_key != image_key) {
    cache.image_key.clear();
    cache.prepared.clear();
    if (request.frame)
      cache.image_rgb = *request.frame;
    else if (request.image.empty())
      throw std::runtime_error("no image is open");
    else
      cache.image_rgb = load_image_rgb(request.image, request.max_pixels);
    cache.image_key = image_key;
  }
  return cache.image_rgb;
}

const RgbImage& prepared_input(const InferenceRequest& request, RunCache& cache, const std::string& model_key,
                               LoadedModel& model) {
  const RgbImage& image = source_image(request, cache);
  const std::string input_key = cache.image_key + "|" + to_string(request.input_settings());
  auto& slot = cache.prepared[model_key];
  if (slot.first != input_key) {
    slot.first.clear();
    slot.second = prepare_model_input(image, request.input_settings(), model);
    slot.first = input_key;
  }
  return slot.second;
}

}  // namespace

std::vector<PanelForward> forward_panels(const InferenceRequest& request, RunCache& cache,
                                         const std::function<bool()>& cancelled, bool& reused_all) {
  ForwardOptions options;
  options.capture = true;
  options.cancelled = cancelled;
  std::vector<PanelForward> forwards;
  reused_all = true;
  for (size_t index = 0; index < request.panels.size(); ++index) {
    const PanelRequest& panel = request.panels[index];
    PanelForward forward;
    forward.settings = panel.settings;
    try {
      const auto [arch, config] = arch_and_config_for(request, panel.model_path);
      forward.model = cache.models.get(panel.model_path, arch, request.device, config);
      const std::string model_key = ModelCache::key(panel.model_path, arch, request.device, config);
      configure_input(*forward.model, request.input_settings());
      const RgbImage& prepared = prepared_input(request, cache, model_key, *forward.model);
      forward.input_key = model_key + "|" + cache.prepared[model_key].first;
      forward.preprocessing = describe_preprocessing(*forward.model, request.input_settings(), prepared);
      const std::string wanted = settings_key(panel.settings);
      for (const auto* list : {&cache.forwards, &forwards})
        for (const auto& entry : *list)
          if (!forward.result && entry.result && entry.input_key == forward.input_key &&
              settings_key(entry.settings) == wanted)
            forward.result = entry.result;
      if (!forward.result) {
        reused_all = false;
        forward.result =
            panel.settings.ablation.empty()
                ? std::make_shared<InferenceResult>(run_inference(*forward.model, prepared, panel.settings, options))
                : ablated_inference(*forward.model, prepared, panel.settings, options, forward.input_key,
                                    cache.analyses)
                      .result;
      }
    } catch (const Cancelled&) {
      throw;
    } catch (const std::exception& e) {
      if (index == 0) throw;  // panel 1 carries the analyses: its failure is the run's
      forward.error = one_line(panel.model_path + ": " + e.what());
      forward.result.reset();
    }
    forwards.push_back(std::move(forward));
  }
  cache.forwards = forwards;
  return forwards;
}

}  // namespace attnscope
