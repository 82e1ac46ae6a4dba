#include "viewer/inference_worker.h"

#include <algorithm>
#include <chrono>

#include <c10/util/Exception.h>

#include "analysis/focusing.h"
#include "analysis/gradcam.h"
#include "analysis/rollout.h"
#include "analysis/spectrum.h"
#include "figures/export.h"
#include "models/finite_checks.h"
#include "models/model_loader.h"

namespace attnscope {

namespace {

bool same_settings(const AttentionSettings& a, const AttentionSettings& b) {
  return a.variant == b.variant && a.p == b.p && a.window == b.window && a.anchors == b.anchors && a.dwc == b.dwc &&
         a.norm == b.norm;
}

std::string one_line(std::string message) {
  for (char& c : message)
    if (c == '\n' || c == '\r') c = ' ';
  return message;
}

}  // namespace

bool InferenceRequest::same_forward(const InferenceRequest& other) const {
  if (model_path != other.model_path || arch != other.arch || device != other.device ||
      image_path != other.image_path || max_pixels != other.max_pixels || frame_number != other.frame_number ||
      frame != other.frame || resize != other.resize || input_size != other.input_size ||
      panels.size() != other.panels.size())
    return false;
  for (size_t i = 0; i < panels.size(); ++i)
    if (!same_settings(panels[i], other.panels[i])) return false;
  return true;
}

bool InferenceRequest::operator==(const InferenceRequest& other) const {
  return same_forward(other) && layer == other.layer && analysis == other.analysis && head == other.head &&
         target_class == other.target_class && gradcam_layer == other.gradcam_layer && query == other.query &&
         fusion == other.fusion && discard == other.discard;
}

struct InferenceWorker::Cache {
  std::string model_key;
  std::optional<LoadedModel> model;
  std::string image_key;
  cv::Mat image_rgb;
  std::string prepared_key;
  cv::Mat prepared_rgb;
  std::vector<std::pair<AttentionSettings, std::shared_ptr<InferenceResult>>> forwards;  // the last request's
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

LoadedModel& InferenceWorker::model_for(const std::string& path, const std::string& arch, const std::string& device) {
  Cache& cache = *cache_;
  const std::string model_key = path + "|" + arch + "|" + device;
  if (cache.model_key != model_key) {
    cache.model.reset();
    cache.forwards.clear();
    cache.model_key.clear();
    cache.prepared_key.clear();
    cache.gradcam_key.clear();
    cache.model.emplace(load_model(path, ArchOverrides::parse(arch), resolve_device(device)));
    cache.model_key = model_key;
  }
  return *cache.model;
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
  Cache& cache = *cache_;
  try {
    if (request.model_path.empty()) throw std::runtime_error("no model is open");
    const std::string model_key = request.model_path + "|" + request.arch + "|" + request.device;
    LoadedModel& model = model_for(request.model_path, request.arch, request.device);

    const std::string image_key = request.frame
                                      ? "frame " + std::to_string(request.frame_number)
                                      : "file " + request.image_path + "|" + std::to_string(request.max_pixels);
    if (cache.image_key != image_key) {
      cache.image_key.clear();
      if (request.frame)
        cache.image_rgb = *request.frame;
      else if (request.image_path.empty())
        throw std::runtime_error("no image is open");
      else
        cache.image_rgb = load_image_rgb(request.image_path, request.max_pixels);
      cache.image_key = image_key;
    }
    AppState input_state;
    input_state.resize = request.resize;
    input_state.input_size = request.input_size;
    const std::string prepared_key =
        image_key + "|" + model_key + "|" + to_string(request.resize) + "|" + request.input_size;
    if (cache.prepared_key != prepared_key) {
      cache.prepared_key.clear();
      cache.forwards.clear();
      cache.prepared_rgb = prepare_model_input(cache.image_rgb, input_state, model.arch);
      cache.prepared_key = prepared_key;
    }

    // One forward per panel, reused when a panel's settings did not change (a layer switch or a
    // second panel with the same variant costs no forward pass).
    ForwardOptions options;
    options.capture = true;
    options.cancelled = [this, id] { return latest_id_.load() != id; };
    std::vector<std::pair<AttentionSettings, std::shared_ptr<InferenceResult>>> forwards;
    bool reused_all = true;
    for (const AttentionSettings& settings : request.panels) {
      std::shared_ptr<InferenceResult> found;
      for (const auto& entry : cache.forwards)
        if (same_settings(entry.first, settings)) found = entry.second;
      for (const auto& entry : forwards)
        if (!found && same_settings(entry.first, settings)) found = entry.second;
      if (!found) {
        reused_all = false;
        found = std::make_shared<InferenceResult>(run_inference(model, cache.prepared_rgb, settings, options));
      }
      forwards.emplace_back(settings, found);
    }
    cache.forwards = forwards;
    outcome->forward_reused = reused_all;

    if (request.analysis == "gradcam") {
      // Its own forward and backward (with autograd), reused while only the selections change.
      const AttentionSettings& settings = request.panels.front();
      const std::string key = prepared_key + "|" + to_string(settings.variant) + "|" + std::to_string(settings.p) +
                              "|" + std::to_string(settings.window) + "|" + std::to_string(settings.anchors) + "|" +
                              std::to_string(settings.dwc) + "|" + to_string(settings.norm) + "|" +
                              std::to_string(request.target_class) + "|" + request.gradcam_layer;
      if (cache.gradcam_key != key) {
        cache.gradcam_key.clear();
        GradCamOptions options;
        options.layer = request.gradcam_layer.empty() ? kDefaultGradCamLayer : request.gradcam_layer;
        options.target_class = request.target_class;
        const GradCamResult result =
            grad_cam(model.native("Grad-CAM"),
                     image_to_tensor(cache.prepared_rgb, model.normalization).to(model.device), settings, options);
        GradCamView view;
        const torch::Tensor scaled = result.scaled.to(torch::kCPU, torch::kFloat).contiguous();
        view.map.assign(scaled.data_ptr<float>(), scaled.data_ptr<float>() + scaled.numel());
        view.target_class = result.target_class;
        view.class_name = output_name(model, result.target_class);
        view.score = result.score;
        view.layer = result.layer;
        view.warning = result.warning;
        view.milliseconds = result.milliseconds;
        cache.gradcam = view;
        cache.gradcam_key = key;
      }
      outcome->gradcam = cache.gradcam;
    }

    c10::InferenceMode inference_mode;
    const ForwardOutput& first = forwards.front().second->forward;
    outcome->model_family = model.arch.family();
    outcome->output_kind = model.arch.output_kind;
    outcome->device = model.device.str();
    outcome->depth = int(first.layers.size());
    outcome->heads = model.arch.heads;
    outcome->layout = first.layout;
    outcome->input_rgb = cache.prepared_rgb;
    outcome->layer = request.layer < 0 ? outcome->depth + request.layer : request.layer;
    if (outcome->layer < 0 || outcome->layer >= outcome->depth)
      throw std::invalid_argument("layer " + std::to_string(request.layer) + ": the model has " +
                                  std::to_string(outcome->depth) + " blocks");
    const int tokens = first.layout.total_tokens();
    for (const auto& [settings, result] : forwards) {
      if (latest_id_.load() != id) return nullptr;
      const AttentionCapture& capture = result->forward.layers[size_t(outcome->layer)];
      PanelMaps maps;
      maps.settings = settings;
      maps.description = capture.attention.describe();
      maps.top = result->top;
      maps.forward_ms = result->milliseconds;
      maps.tokens = tokens;
      maps.matrices.resize(size_t(outcome->heads) * tokens * tokens);
      for (int head = 0; head < outcome->heads; ++head) {
        const torch::Tensor matrix = capture.matrix(0, head).to(torch::kCPU, torch::kFloat).contiguous();
        require_finite(matrix,
                       "the attention of layer " + std::to_string(outcome->layer) + " head " + std::to_string(head));
        std::copy(matrix.data_ptr<float>(), matrix.data_ptr<float>() + matrix.numel(),
                  maps.matrices.begin() + ptrdiff_t(head) * tokens * tokens);
        if (request.analysis == "spectrum") {
          const Spectrum spectrum = matrix_spectrum(matrix);
          const torch::Tensor values = spectrum.singular_values.contiguous();
          HeadSpectrum head_spectrum;
          head_spectrum.singular_values.assign(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
          head_spectrum.numerical_rank = spectrum.numerical_rank;
          head_spectrum.effective_rank = spectrum.effective_rank;
          maps.spectra.push_back(std::move(head_spectrum));
        }
      }
      outcome->panels.push_back(std::move(maps));
    }
    if (request.analysis == "rollout") {
      // Panel 1's captured layers, already computed: rollout is matrix products, no forward pass.
      const auto rollout_start = std::chrono::steady_clock::now();
      RolloutOptions options;
      options.fusion = request.fusion;
      options.discard_ratio = request.discard;
      options.query = resolve_query(request.query, first.layout).token;
      const RolloutResult result = attention_rollout(first.layers, options);
      const torch::Tensor map = result.patch_map.reshape({-1}).to(torch::kCPU, torch::kFloat).contiguous();
      RolloutView view;
      view.map.assign(map.data_ptr<float>(), map.data_ptr<float>() + map.numel());
      const auto [low, high] = std::minmax_element(view.map.begin(), view.map.end());
      view.vmin = *low;
      view.vmax = *high > *low ? *high : *low + 1e-6f;
      view.query_token = options.query;
      view.fusion = request.fusion;
      view.discard = request.discard;
      view.milliseconds =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - rollout_start).count();
      outcome->rollout = std::move(view);
    }
    if (request.analysis == "fp") {
      if (request.head < 0 || request.head >= outcome->heads)
        throw std::invalid_argument("head " + std::to_string(request.head) + ": the model has " +
                                    std::to_string(outcome->heads) + " heads");
      auto as_floats = [](const torch::Tensor& t) {
        const torch::Tensor values = t.to(torch::kCPU, torch::kFloat).contiguous();
        return std::vector<float>(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
      };
      FocusStudyOptions options;
      options.p = request.panels.front().p;
      const FocusStudy study =
          study_focusing(forwards.front().second->forward.layers[size_t(outcome->layer)], request.head, options);
      FocusView view;
      view.head = request.head;
      view.p = options.p;
      view.source = study.source;
      view.histogram_before = as_floats(study.histogram_before);
      view.histogram_after = as_floats(study.histogram_after);
      view.curve_ps.assign(study.curve_ps.begin(), study.curve_ps.end());
      view.entropy.assign(study.entropy.begin(), study.entropy.end());
      view.top_k_mass.assign(study.top_k_mass.begin(), study.top_k_mass.end());
      const ScoreExample example = example_focus_scores(options.p);
      view.example_before = as_floats(example.before);
      view.example_after = as_floats(example.after);
      outcome->focus = std::move(view);
    }
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
