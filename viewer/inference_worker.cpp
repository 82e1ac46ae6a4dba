#include "viewer/inference_worker.h"

#include <algorithm>
#include <chrono>
#include <map>

#include <c10/util/Exception.h>

#include "analysis/focus_metrics.h"
#include "figures/export.h"
#include "models/model_loader.h"
#include "viewer/attribution_view.h"
#include "viewer/result_views.h"

namespace attnscope {

namespace {

bool same_settings(const AttentionSettings& a, const AttentionSettings& b) {
  return a.variant == b.variant && a.p == b.p && a.window == b.window && a.anchors == b.anchors && a.dwc == b.dwc &&
         a.norm == b.norm;
}

std::string settings_key(const AttentionSettings& settings) {
  return to_string(settings.variant) + "|" + std::to_string(settings.p) + "|" + std::to_string(settings.window) + "|" +
         std::to_string(settings.anchors) + "|" + std::to_string(settings.dwc) + "|" + to_string(settings.norm);
}

std::string one_line(std::string message) {
  for (char& c : message)
    if (c == '\n' || c == '\r') c = ' ';
  return message;
}

}  // namespace

bool InferenceRequest::same_forward(const InferenceRequest& other) const {
  if (model_path != other.model_path || arch != other.arch || device != other.device ||
      image_path != other.image_path || frame_number != other.frame_number || frame != other.frame ||
      input.resize != other.input.resize || input.input_size != other.input.input_size ||
      panels.size() != other.panels.size())
    return false;
  for (size_t i = 0; i < panels.size(); ++i)
    if (!same_settings(panels[i], other.panels[i])) return false;
  return true;
}

bool InferenceRequest::operator==(const InferenceRequest& other) const {
  return same_forward(other) && layer == other.layer && head == other.head && query == other.query &&
         direction == other.direction && box == other.box && analysis == other.analysis &&
         target_class == other.target_class && gradcam_layer == other.gradcam_layer && fusion == other.fusion &&
         discard == other.discard && method == other.method && steps == other.steps &&
         replacement == other.replacement && ig_steps == other.ig_steps && ig_baseline == other.ig_baseline;
}

// One panel's forward pass, shared (not copied) between runs that did not change it.
struct InferenceWorker::PanelForward {
  AttentionSettings settings;
  std::shared_ptr<const InferenceResult> result;
};

struct InferenceWorker::Cache {
  std::string model_key;
  std::optional<LoadedModel> model;
  std::string image_key;
  cv::Mat image_rgb;
  std::string prepared_key;
  cv::Mat prepared_rgb;
  std::vector<PanelForward> forwards;  // the last request's
  std::string gradcam_key;
  std::optional<GradCamView> gradcam;
  std::map<std::string, AttributionView> attributions;  // by everything a panel's map depends on
};

InferenceWorker::InferenceWorker(std::function<void()> wake) : wake_(std::move(wake)), cache_(new Cache) {
  thread_ = std::thread([this] { loop(); });
}

InferenceWorker::~InferenceWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    latest_id_ = ~uint64_t(0);  // cancels a run in progress
  }
  wanted_.notify_all();
  thread_.join();
}

uint64_t InferenceWorker::submit(InferenceRequest request) {
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = ++next_id_;
    pending_ = std::move(request);
    latest_id_ = id;
  }
  wanted_.notify_one();
  return id;
}

void InferenceWorker::submit_export(AppState state, std::string out_dir) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_export_.emplace(std::move(state), std::move(out_dir));
  }
  wanted_.notify_one();
}

std::vector<ExportOutcome> InferenceWorker::take_exports() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(exports_, {});
}

std::vector<std::shared_ptr<const InferenceOutcome>> InferenceWorker::take_finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(finished_, {});
}

bool InferenceWorker::has_finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !finished_.empty();
}

bool InferenceWorker::busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_ || pending_.has_value() || pending_export_.has_value();
}

void InferenceWorker::loop() {
  for (;;) {
    InferenceRequest request;
    uint64_t id = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wanted_.wait(lock, [&] { return stopping_ || pending_.has_value() || pending_export_.has_value(); });
      if (stopping_) return;
      if (pending_export_) {
        auto [state, out_dir] = std::move(*pending_export_);
        pending_export_.reset();
        running_ = true;
        lock.unlock();
        ExportOutcome exported = run_export(state, out_dir);
        lock.lock();
        running_ = false;
        exports_.push_back(std::move(exported));
        lock.unlock();
        if (wake_) wake_();
        continue;
      }
      request = std::move(*pending_);
      pending_.reset();
      id = next_id_;
      running_ = true;
    }
    std::shared_ptr<const InferenceOutcome> outcome = run(id, request);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
      // A cancelled run reports nothing: a newer request is already waiting.
      if (outcome) finished_.push_back(std::move(outcome));
    }
    if (wake_) wake_();
  }
}

LoadedModel& InferenceWorker::model_for(const std::string& path, const std::string& arch, const std::string& device) {
  Cache& cache = *cache_;
  const std::string model_key = path + "|" + arch + "|" + device;
  if (cache.model_key != model_key) {
    cache.model.reset();
    cache.forwards.clear();
    cache.model_key.clear();
    cache.prepared_key.clear();
    cache.gradcam_key.clear();
    cache.attributions.clear();
    cache.model.emplace(load_model(path, ArchOverrides::parse(arch), resolve_device(device)));
    cache.model_key = model_key;
  }
  return *cache.model;
}

const cv::Mat& InferenceWorker::prepared_input(const InferenceRequest& request, const LoadedModel& model) {
  Cache& cache = *cache_;
  const std::string image_key =
      request.frame ? "frame " + std::to_string(request.frame_number) : "file " + request.image_path;
  if (cache.image_key != image_key) {
    cache.image_key.clear();
    if (request.frame)
      cache.image_rgb = *request.frame;
    else if (request.image_path.empty())
      throw std::runtime_error("no image is open");
    else
      cache.image_rgb = load_image_rgb(request.image_path);
    cache.image_key = image_key;
  }
  const std::string prepared_key =
      image_key + "|" + cache.model_key + "|" + to_string(request.input.resize) + "|" + request.input.input_size;
  if (cache.prepared_key != prepared_key) {
    cache.prepared_key.clear();
    cache.forwards.clear();
    cache.gradcam_key.clear();
    cache.attributions.clear();
    cache.prepared_rgb = prepare_model_input(cache.image_rgb, request.input, model);
    cache.prepared_key = prepared_key;
  }
  return cache.prepared_rgb;
}

std::vector<InferenceWorker::PanelForward> InferenceWorker::forward_panels(uint64_t id, const InferenceRequest& request,
                                                                           LoadedModel& model, bool& reused_all) {
  // One forward per panel, reused when a panel's settings did not change (a layer switch or a
  // second panel with the same variant costs no forward pass).
  ForwardOptions options;
  options.capture = true;
  options.cancelled = [this, id] { return latest_id_.load() != id; };
  std::vector<PanelForward> forwards;
  reused_all = true;
  for (const AttentionSettings& settings : request.panels) {
    std::shared_ptr<const InferenceResult> found;
    for (const auto* list : {&cache_->forwards, &forwards})
      for (const auto& entry : *list)
        if (!found && same_settings(entry.settings, settings)) found = entry.result;
    if (!found) {
      reused_all = false;
      found = std::make_shared<InferenceResult>(run_inference(model, cache_->prepared_rgb, settings, options));
    }
    forwards.push_back({settings, found});
  }
  cache_->forwards = forwards;
  return forwards;
}

void InferenceWorker::build_views(uint64_t id, const InferenceRequest& request, LoadedModel& model,
                                  const std::vector<PanelForward>& forwards, InferenceOutcome& outcome) {
  const auto cancelled = [this, id] { return latest_id_.load() != id; };
  const std::vector<AttentionCapture>& layers = forwards.front().result->forward.layers;
  outcome.depth = int(layers.size());
  outcome.layer = resolve_layer_index(request.layer, outcome.depth);
  const AttentionCapture& selected = layers[size_t(outcome.layer)];
  outcome.heads = selected.heads;
  outcome.placement = selected.placement;
  outcome.layout = selected.layout;
  outcome.key_layout = selected.key_layout;
  try {
    const ResolvedQuery query = resolve_query(request.query, selected.layout);
    outcome.query_token = query.token;
    outcome.query_note = query.note;
  } catch (const std::invalid_argument& e) {
    // A query of another layer's grid (e.g. after switching stages): the layer's default instead.
    const ResolvedQuery fallback = resolve_query("cls", selected.layout);
    outcome.query_token = fallback.token;
    outcome.query_note = std::string(e.what()) + "; showing " + selected.layout.token_name(fallback.token);
  }

  PanelSelection selection;
  selection.query_token = outcome.query_token;
  selection.incoming = request.direction == "in";
  selection.matrix_head = std::clamp(request.head, 0, outcome.heads - 1);
  selection.spectrum = request.analysis == "spectrum";
  selection.metrics = request.analysis == "metrics";
  if (selection.metrics && !request.box.empty()) {
    try {
      selection.box = box_coverage(parse_patch_box(request.box), map_grid(selected, selection.incoming));
    } catch (const std::invalid_argument& e) {
      outcome.box_error = e.what();
    }
  }
  {
    c10::InferenceMode inference_mode;  // not around Grad-CAM below: it needs autograd
    for (const PanelForward& forward : forwards) {
      PanelMaps maps = build_panel_maps(forward.result->forward.layers[size_t(outcome.layer)], selection, cancelled);
      maps.settings = forward.settings;
      maps.top = forward.result->top;
      maps.forward_ms = forward.result->milliseconds;
      outcome.panels.push_back(std::move(maps));
    }
  }
  if (request.analysis == "rollout") {
    try {
      outcome.rollout = build_rollout_view(layers, outcome.layer, outcome.query_token, request.fusion, request.discard);
    } catch (const std::invalid_argument& e) {
      outcome.rollout.emplace();
      outcome.rollout->error = e.what();  // e.g. spatial reduction: shown in the view, the rest stands
    }
  }
  if (request.analysis == "fp") {
    check_head_index(request.head, outcome.heads);
    outcome.focus = build_focus_view(selected, request.head, request.panels.front().p);
  }
  if (request.analysis == "gradcam") {
    // Its own forward and backward (with autograd), reused while only the selections change.
    const std::string key = cache_->prepared_key + "|" + settings_key(request.panels.front()) + "|" +
                            std::to_string(request.target_class) + "|" + request.gradcam_layer;
    if (cache_->gradcam_key != key) {
      cache_->gradcam_key.clear();
      cache_->gradcam = build_gradcam_view(model, cache_->prepared_rgb, request.panels.front(), request.target_class,
                                           request.gradcam_layer);
      cache_->gradcam_key = key;
    }
    outcome.gradcam = cache_->gradcam;
  }
  if (request.analysis == "attribution") {
    // Each panel's own forward and backward passes and curves, reused while only the selections change.
    for (const PanelForward& forward : forwards) {
      const std::string key =
          cache_->prepared_key + "|" + settings_key(forward.settings) + "|" + attribution_key(request, outcome.layer);
      auto cached = cache_->attributions.find(key);
      if (cached == cache_->attributions.end() && cache_->attributions.size() >= 64) cache_->attributions.clear();
      if (cached == cache_->attributions.end())
        cached =
            cache_->attributions
                .emplace(key, build_attribution_view(model, cache_->prepared_rgb, forward.settings,
                                                     forward.result->forward.layers, request, outcome.layer, cancelled))
                .first;
      outcome.attributions.push_back(cached->second);
      PanelMaps& panel = outcome.panels[outcome.attributions.size() - 1];
      panel.description = attribution_caption(cached->second) + "  \u00b7  " + panel.description;
    }
  }
}

ExportOutcome InferenceWorker::run_export(const AppState& state, const std::string& out_dir) {
  ExportOutcome exported;
  try {
    if (state.model.empty()) throw std::runtime_error("no model is open");
    if (state.image.empty()) throw std::runtime_error("export needs an image file (not live input)");
    LoadedModel& model = model_for(state.model, state.arch, state.device);
    exported.figure_path = export_figure(state, model, state.image, out_dir).figure_path;
  } catch (const c10::Error& e) {
    exported.error = one_line(e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    exported.error = "out of memory";
  } catch (const std::exception& e) {
    exported.error = one_line(e.what());
  }
  return exported;
}

std::shared_ptr<const InferenceOutcome> InferenceWorker::run(uint64_t id, const InferenceRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  auto outcome = std::make_shared<InferenceOutcome>();
  outcome->request_id = id;
  outcome->request = request;
  try {
    if (request.model_path.empty()) throw std::runtime_error("no model is open");
    LoadedModel& model = model_for(request.model_path, request.arch, request.device);
    outcome->model_family = model.family();
    outcome->output_kind = model.output_kind();
    outcome->computes_attention = !model.is_scripted();
    outcome->device = model.device.str();
    outcome->input_rgb = prepared_input(request, model);
    const std::vector<PanelForward> forwards = forward_panels(id, request, model, outcome->forward_reused);
    build_views(id, request, model, forwards, *outcome);
  } catch (const Cancelled&) {
    return nullptr;
  } catch (const c10::Error& e) {
    outcome->error = one_line(e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    outcome->error = "out of memory";
  } catch (const std::exception& e) {
    outcome->error = one_line(e.what());
  }
  if (!outcome->error.empty()) outcome->panels.clear();
  outcome->total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

}  // namespace attnscope
