#include "viewer/inference_worker.h"

#include <algorithm>
#include <chrono>

#include <c10/util/Exception.h>

#include "analysis/focus_metrics.h"
#include "figures/export.h"
#include "models/model_cache.h"
#include "models/model_loader.h"
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

bool PanelRequest::operator==(const PanelRequest& other) const {
  return model_path == other.model_path && same_settings(settings, other.settings);
}

bool InferenceRequest::same_forward(const InferenceRequest& other) const {
  return model_path == other.model_path && arch == other.arch && device == other.device &&
         image_path == other.image_path && frame_number == other.frame_number && frame == other.frame &&
         input == other.input && panels == other.panels;
}

bool InferenceRequest::operator==(const InferenceRequest& other) const {
  return same_forward(other) && layer == other.layer && head == other.head && query == other.query &&
         direction == other.direction && windows == other.windows && box == other.box && analysis == other.analysis &&
         target_class == other.target_class && gradcam_layer == other.gradcam_layer && fusion == other.fusion &&
         discard == other.discard && fp_vectors == other.fp_vectors && fp_projection == other.fp_projection &&
         lcm == other.lcm;
}

// One panel's forward pass, shared (not copied) between runs that did not change it.
struct InferenceWorker::PanelForward {
  std::string input_key;  // the model and its prepared input
  AttentionSettings settings;
  std::shared_ptr<LoadedModel> model;
  std::shared_ptr<const InferenceResult> result;
  std::string preprocessing;
  std::string error;  // the panel's model could not load or run (panels 2..4 only)
};

struct InferenceWorker::Cache {
  ModelCache models{kMaxPanels + 2};
  std::string image_key;
  cv::Mat image_rgb;
  std::map<std::string, std::pair<std::string, cv::Mat>> prepared;  // model key -> (input key, image)
  std::vector<PanelForward> forwards;                               // the last request's
  std::string gradcam_key;
  std::optional<GradCamView> gradcam;
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

std::shared_ptr<LoadedModel> InferenceWorker::model_for(const InferenceRequest& request, const std::string& path) {
  // --arch describes the session's model; another panel's checkpoint says what it is itself.
  return cache_->models.get(path, path == request.model_path ? request.arch : "", request.device);
}

const cv::Mat& InferenceWorker::source_image(const InferenceRequest& request) {
  Cache& cache = *cache_;
  const std::string image_key =
      request.frame ? "frame " + std::to_string(request.frame_number) : "file " + request.image_path;
  if (cache.image_key != image_key) {
    cache.image_key.clear();
    cache.prepared.clear();
    if (request.frame)
      cache.image_rgb = *request.frame;
    else if (request.image_path.empty())
      throw std::runtime_error("no image is open");
    else
      cache.image_rgb = load_image_rgb(request.image_path);
    cache.image_key = image_key;
  }
  return cache.image_rgb;
}

const cv::Mat& InferenceWorker::prepared_input(const InferenceRequest& request, const std::string& model_key,
                                               LoadedModel& model) {
  const cv::Mat& image = source_image(request);
  const std::string input_key = cache_->image_key + "|" + to_string(request.input);
  auto& slot = cache_->prepared[model_key];
  if (slot.first != input_key) {
    slot.first.clear();
    slot.second = prepare_model_input(image, request.input, model);
    slot.first = input_key;
  }
  return slot.second;
}

std::vector<InferenceWorker::PanelForward> InferenceWorker::forward_panels(uint64_t id, const InferenceRequest& request,
                                                                           bool& reused_all) {
  // One forward per panel, reused when a panel's model, input and settings did not change (a layer
  // switch, or a second panel with the same model and variant, costs no forward pass).
  ForwardOptions options;
  options.capture = true;
  options.cancelled = [this, id] { return latest_id_.load() != id; };
  std::vector<PanelForward> forwards;
  reused_all = true;
  for (size_t index = 0; index < request.panels.size(); ++index) {
    const PanelRequest& panel = request.panels[index];
    PanelForward forward;
    forward.settings = panel.settings;
    try {
      forward.model = model_for(request, panel.model_path);
      const std::string model_key =
          ModelCache::key(panel.model_path, panel.model_path == request.model_path ? request.arch : "", request.device);
      configure_input(*forward.model, request.input);
      const cv::Mat& prepared = prepared_input(request, model_key, *forward.model);
      forward.input_key = model_key + "|" + cache_->prepared[model_key].first;
      forward.preprocessing = describe_preprocessing(*forward.model, request.input, prepared);
      for (const auto* list : {&cache_->forwards, &forwards})
        for (const auto& entry : *list)
          if (!forward.result && entry.result && entry.input_key == forward.input_key &&
              same_settings(entry.settings, panel.settings))
            forward.result = entry.result;
      if (!forward.result) {
        reused_all = false;
        forward.result =
            std::make_shared<InferenceResult>(run_inference(*forward.model, prepared, panel.settings, options));
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
  cache_->forwards = forwards;
  return forwards;
}

namespace {

// The panel's layer: the requested one, or its model's last when the model has fewer (with a note).
int panel_layer(int requested, int depth, std::string& note) {
  if (requested < 0) return resolve_layer_index(std::max(requested, -depth), depth);
  if (requested < depth) return requested;
  note += "layer " + std::to_string(requested) + ": this model has " + std::to_string(depth) +
          " attention layers, showing its last; ";
  return depth - 1;
}

}  // namespace

void InferenceWorker::build_views(uint64_t id, const InferenceRequest& request,
                                  const std::vector<PanelForward>& forwards, InferenceOutcome& outcome) {
  const auto cancelled = [this, id] { return latest_id_.load() != id; };
  LoadedModel& first_model = *forwards.front().model;
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

  if (request.windows)
    outcome.query_window =
        query_window_cells(selected, outcome.query_token, std::clamp(request.head, 0, outcome.heads - 1));

  if (request.lcm == "after")
    outcome.lcm_note = selected.has_lcm()
                           ? "after the LCM: C_conv A (its convolutions linearised, channel mean)"
                           : "this layer has no LCM (only L2ViT's global blocks do): the attention itself";

  int row = 0, col = 0;
  const bool patch_query = parse_patch_query(request.query, row, col);
  {
    c10::InferenceMode inference_mode;  // not around Grad-CAM below: it needs autograd
    for (size_t index = 0; index < forwards.size(); ++index) {
      const PanelForward& forward = forwards[index];
      PanelMaps maps;
      maps.settings = forward.settings;
      maps.model_path = request.panels[index].model_path;
      maps.error = forward.error;
      if (!forward.result) {
        outcome.panels.push_back(std::move(maps));
        continue;
      }
      const LoadedModel& model = *forward.model;
      maps.model_family = model.family();
      maps.output_kind = model.output_kind();
      maps.dwc_available = has_dwc_weights(model);
      maps.preprocessing = forward.preprocessing;
      maps.top = forward.result->top;
      maps.forward_ms = forward.result->milliseconds;
      maps.input_rgb = forward.result->input_rgb;
      const std::vector<AttentionCapture>& panel_layers = forward.result->forward.layers;
      maps.depth = int(panel_layers.size());
      maps.layer = index == 0 ? outcome.layer : panel_layer(request.layer, maps.depth, maps.note);
      const AttentionCapture& capture = panel_layers[size_t(maps.layer)];
      maps.heads = capture.heads;
      maps.placement = capture.placement;
      maps.layout = capture.layout;
      maps.key_layout = capture.key_layout;
      maps.swapped = !capture.attention.native;
      maps.kernel = to_string(capture.attention.kernel);
      if (index == 0) {
        maps.query_token = outcome.query_token;
      } else if (patch_query && outcome.layout.is_patch(outcome.query_token)) {
        // A patch of panel 1's grid: the patch over the same place in this panel's image.
        maps.query_token = follow_query(outcome.query_token, outcome.layout, capture.layout);
      } else {
        try {
          maps.query_token = resolve_query(request.query, capture.layout).token;
        } catch (const std::invalid_argument& e) {
          maps.query_token = resolve_query("cls", capture.layout).token;
          maps.note += std::string(e.what()) + "; ";
        }
      }
      PanelSelection selection;
      selection.query_token = maps.query_token;
      selection.incoming = request.direction == "in";
      selection.after_lcm = request.lcm == "after" && capture.has_lcm();
      selection.matrix_head = std::clamp(request.head, 0, capture.heads - 1);
      if (request.head >= capture.heads)
        maps.note +=
            "head " + std::to_string(request.head) + ": this model has " + std::to_string(capture.heads) + " heads; ";
      selection.spectrum = request.analysis == "spectrum";
      selection.metrics = request.analysis == "metrics";
      if (selection.metrics && !request.box.empty()) {
        try {
          selection.box = box_coverage(parse_patch_box(request.box), map_grid(capture, selection.incoming));
        } catch (const std::invalid_argument& e) {
          if (index == 0) outcome.box_error = e.what();
        }
      }
      PanelMaps built = build_panel_maps(capture, selection, cancelled);
      built.settings = maps.settings;
      built.model_path = maps.model_path;
      built.model_family = maps.model_family;
      built.output_kind = maps.output_kind;
      built.dwc_available = maps.dwc_available;
      built.preprocessing = maps.preprocessing;
      built.top = maps.top;
      built.forward_ms = maps.forward_ms;
      built.input_rgb = maps.input_rgb;
      built.depth = maps.depth;
      built.layer = maps.layer;
      built.heads = maps.heads;
      built.placement = maps.placement;
      built.layout = maps.layout;
      built.key_layout = maps.key_layout;
      built.query_token = maps.query_token;
      built.swapped = maps.swapped;
      built.kernel = maps.kernel;
      built.note = maps.note;
      outcome.panels.push_back(std::move(built));
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
    outcome.focus = build_focus_view(selected, request.head, request.panels.front().settings.p,
                                     request.fp_vectors == "queries", parse_focus_projection(request.fp_projection));
  }
  if (request.analysis == "gradcam") {
    // Its own forward and backward (with autograd), reused while only the selections change.
    const std::string key = forwards.front().input_key + "|" + settings_key(request.panels.front().settings) + "|" +
                            std::to_string(request.target_class) + "|" + request.gradcam_layer;
    if (cache_->gradcam_key != key) {
      cache_->gradcam_key.clear();
      cache_->gradcam =
          build_gradcam_view(first_model, forwards.front().result->input_rgb, request.panels.front().settings,
                             request.target_class, request.gradcam_layer);
      cache_->gradcam_key = key;
    }
    outcome.gradcam = cache_->gradcam;
  }
}

ExportOutcome InferenceWorker::run_export(const AppState& state, const std::string& out_dir) {
  ExportOutcome exported;
  try {
    if (state.model.empty()) throw std::runtime_error("no model is open");
    if (state.image.empty()) throw std::runtime_error("export needs an image file (not live input)");
    std::shared_ptr<LoadedModel> model = cache_->models.get(state.model, state.arch, state.device);
    configure_input(*model, state.input_settings());
    exported.figure_path = export_figure(state, *model, state.image, out_dir, &cache_->models).figure_path;
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
    if (request.model_path.empty() || request.panels.empty()) throw std::runtime_error("no model is open");
    const std::vector<PanelForward> forwards = forward_panels(id, request, outcome->forward_reused);
    const LoadedModel& model = *forwards.front().model;
    outcome->model_family = model.family();
    outcome->output_kind = model.output_kind();
    outcome->computes_attention = !model.is_scripted();
    outcome->window_meaning = model.backbone->window_meaning();
    outcome->device = model.device.str();
    outcome->input_rgb = forwards.front().result->input_rgb;
    build_views(id, request, forwards, *outcome);
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
