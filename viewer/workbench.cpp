#include "viewer/workbench.h"

#include "core/json_checked.h"

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include <torch/cuda.h>

#include "analysis/focus_metrics.h"
#include "core/assets.h"
#include "core/atomic_file.h"
#include "models/model_loader.h"
#include "viewer/gl/frame.h"
#include "viewer/panels/panel.h"

namespace attnscope {

namespace {

std::string lower_extension(const std::string& path) {
  std::string extension = std::filesystem::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return extension;
}

void wake_main_thread() { glfwPostEmptyEvent(); }  // thread-safe in GLFW

}  // namespace

Workbench::Workbench(AppState initial, const WorkbenchOptions& workbench_options)
    : state(std::move(initial)), options(workbench_options) {
  if (state.model.empty()) state.model = default_model_path();
  if (state.image.empty()) {
    try {
      state.image = default_image_path();
    } catch (const std::exception& e) {
      report_error(e.what());
    }
  }
  devices = {"auto", "cpu"};
  if (torch::cuda::is_available()) devices.push_back("cuda");
  renderer = std::make_unique<gl::OverlayRenderer>();
  worker_ = std::make_unique<InferenceWorker>(wake_main_thread);
  if (!options.video.empty()) {
    open_video_source(options.video);
  }
}

Workbench::~Workbench() {
  video.reset();
  worker_.reset();  // joins before the GL objects go
}

bool Workbench::result_waiting() const { return worker_->has_finished(); }

void Workbench::report_error(const std::string& message) { error = message; }

InferenceRequest Workbench::make_request() const {
  InferenceRequest request;
  request.model_path = state.model;
  request.arch = state.arch;
  request.device = state.device;
  request.image_path = state.image;
  request.max_pixels = state.max_pixels;
  if (video && frame_) {
    request.frame = frame_;
    request.frame_number = frame_number_;
  }
  request.resize = state.resize;
  request.input_size = state.input_size;
  request.panels = state.panel_settings();
  request.layer = state.layer;
  request.analysis = state.analysis;
  // Only what the analysis view reads is part of the request, so other changes re-use the result.
  if (state.analysis == "fp") request.head = state.head;
  if (state.analysis == "gradcam") {
    request.target_class = state.target_class;
    request.gradcam_layer = state.gradcam_layer;
  }
  if (state.analysis == "rollout") {
    request.query = state.query;
    request.fusion = state.fusion;
    request.discard = state.discard;
  }
  return request;
}

void Workbench::update(float width, float height) {
  // Live frames: only the newest counts; the worker's latest-wins slot drops the rest.
  if (video) {
    uint64_t seen = frame_number_;
    if (auto frame = video->take_newer(seen)) {
      frame_ = frame;
      frame_number_ = seen;
    }
    if (video->finished() && !frame_) {
      input_error = "no frames from " + video->source() + " (not a video OpenCV can decode?)";
      video.reset();
    }
  }

  const InferenceRequest request = make_request();
  if (!has_last_request_ || !(request == last_request_)) {
    last_request_ = request;
    has_last_request_ = true;
    if (!state.model.empty()) submitted_id = worker_->submit(request);
  }
  for (auto& finished : worker_->take_finished()) {
    if (!finished->error.empty()) {
      report_error(finished->error);
      if (finished->request_id == submitted_id) last_finished_id = finished->request_id;
      continue;
    }
    if (outcome && finished->request_id < outcome->request_id) continue;
    outcome = finished;
    last_finished_id = finished->request_id;
    ++results;
    if (finished->request_id == submitted_id) error.clear();
    image_texture.upload_rgb(outcome->input_rgb);
    if (outcome->gradcam)
      gradcam_texture.upload_scalar(outcome->gradcam->map.data(), outcome->layout.grid_w, outcome->layout.grid_h);
    if (outcome->rollout)
      rollout_texture.upload_scalar(outcome->rollout->map.data(), outcome->layout.grid_w, outcome->layout.grid_h);
    maps_key_.clear();
  }
  for (const ExportOutcome& exported : worker_->take_exports()) {
    if (exported.error.empty())
      info = "exported " + exported.figure_path;
    else
      report_error("export: " + exported.error);
  }
  worker_busy = worker_->busy();
  refresh_maps();
  if (state.analysis == "metrics") refresh_metrics();

  // Fixed layout: controls on the left, views in the middle, the analysis view on the right, status below.
  const float status_height = 30.0f, sidebar_width = 370.0f;
  const float matrix_width = state.analysis != "none" ? std::min(460.0f, width * 0.3f) : 0.0f;
  layout.sidebar_pos = {0, 0};
  layout.sidebar_size = {sidebar_width, height - status_height};
  layout.views_pos = {sidebar_width, 0};
  layout.views_size = {width - sidebar_width - matrix_width, height - status_height};
  layout.analysis_pos = {width - matrix_width, 0};
  layout.analysis_size = {matrix_width, height - status_height};
  layout.status_pos = {0, height - status_height};
  layout.status_size = {width, status_height};
}

void Workbench::refresh_maps() {
  if (!outcome) return;
  const TokenLayout& token_layout = outcome->layout;
  const int heads = outcome->heads;
  if (state.head >= heads) state.head = heads - 1;
  try {
    query_token = resolve_query(state.query, token_layout).token;
  } catch (const std::invalid_argument& e) {
    report_error(std::string(e.what()) + "; back to the class token");
    state.query = "cls";
    query_token = resolve_query(state.query, token_layout).token;
  }
  const std::string key = std::to_string(outcome->request_id) + "|" + std::to_string(query_token) + "|" + state.view +
                          "|" + state.direction + "|" + std::to_string(state.head) + "|" + to_string(state.colormap) +
                          "|" + std::to_string(matrix_panel);
  if (key == maps_key_) return;
  maps_key_ = key;

  const int grid = token_layout.patch_tokens(), prefix = token_layout.prefix_tokens();
  maps.clear();
  float vmin = std::numeric_limits<float>::max(), vmax = std::numeric_limits<float>::lowest();
  for (size_t p = 0; p < outcome->panels.size(); ++p) {
    const PanelMaps& panel = outcome->panels[p];
    std::vector<int> shown;
    if (state.view == "heads")
      for (int h = 0; h < heads; ++h) shown.push_back(h);
    else
      shown.push_back(state.view == "mean" ? -1 : state.head);
    std::vector<PatchMap> panel_maps;
    for (int head : shown) {
      PatchMap map;
      map.panel = int(p);
      map.head = head;
      map.values.assign(size_t(grid), 0.0f);
      const bool incoming = state.direction == "in";
      for (int h = head < 0 ? 0 : head; h < (head < 0 ? heads : head + 1); ++h) {
        const float weight = 1.0f / float(head < 0 ? heads : 1);
        if (incoming) {
          // The query's column: what each patch gives it.
          const float* matrix = panel.matrix(h);
          for (int i = 0; i < grid; ++i)
            map.values[size_t(i)] += matrix[size_t(prefix + i) * size_t(panel.tokens) + size_t(query_token)] * weight;
        } else {
          const float* row = panel.row(h, query_token) + prefix;
          for (int i = 0; i < grid; ++i) map.values[size_t(i)] += row[i] * weight;
        }
      }
      for (float v : map.values) {
        vmin = std::min(vmin, v);
        vmax = std::max(vmax, v);
      }
      map.texture.upload_scalar(map.values.data(), token_layout.grid_w, token_layout.grid_h);
      panel_maps.push_back(std::move(map));
    }
    maps.push_back(std::move(panel_maps));
  }
  // One colour scale over every visible map, so panels and heads compare by colour.
  scale.colormap = state.colormap;
  scale.vmin = vmin;
  scale.vmax = vmax > vmin ? vmax : vmin + 1e-6f;

  matrix_panel = std::clamp(matrix_panel, 0, int(outcome->panels.size()) - 1);
  const int tokens = outcome->panels[size_t(matrix_panel)].tokens;
  matrix_texture.upload_scalar(outcome->panels[size_t(matrix_panel)].matrix(state.head), tokens, tokens);
}

void Workbench::refresh_metrics() {
  if (!outcome) return;
  const std::string key = std::to_string(outcome->request_id) + "|" + std::to_string(query_token) + "|" + state.box;
  if (key == metrics_key_) return;
  metrics_key_ = key;
  metrics.clear();
  box_error.clear();
  const TokenLayout& token_layout = outcome->layout;
  torch::Tensor box;
  if (!state.box.empty()) {
    try {
      box = box_coverage(parse_patch_box(state.box), token_layout);
    } catch (const std::invalid_argument& e) {
      box_error = e.what();
    }
  }
  const int grid = token_layout.patch_tokens(), prefix = token_layout.prefix_tokens();
  for (size_t p = 0; p < outcome->panels.size(); ++p)
    for (int head = 0; head < outcome->heads; ++head) {
      const float* row = outcome->panels[p].row(head, query_token) + prefix;
      const torch::Tensor patch_map = torch::from_blob(const_cast<float*>(row), {grid}, torch::kFloat).clone();
      const FocusSummary summary = summarise_focus(patch_map, kFocusTopK, box);
      metrics.push_back({int(p), head, summary.entropy, summary.top_k_mass, summary.gini, summary.box_mass});
    }
}

void Workbench::open_file(FileKind kind, const std::string& path) {
  if (path.empty()) return;
  if (kind == FileKind::Video) {
    open_video_source(path);
    return;
  }
  if (!std::filesystem::exists(path)) {
    report_error("no such file: " + path);
    return;
  }
  switch (kind) {
    case FileKind::Model:
      state.model = path;
      break;
    case FileKind::Image:
      stop_video();  // a new input: an old input error goes with it
      state.image = path;
      break;
    case FileKind::Video:
      break;
    case FileKind::Session:
      load_session(path);
      break;
  }
}

void Workbench::open_dropped(const std::string& path) {
  const std::string extension = lower_extension(path);
  if (extension == ".safetensors" || extension == ".pth" || extension == ".pt" || extension == ".bin")
    open_file(FileKind::Model, path);
  else if (extension == ".json")
    open_file(FileKind::Session, path);
  else if (extension == ".mp4" || extension == ".avi" || extension == ".mov" || extension == ".mkv" ||
           extension == ".webm")
    open_file(FileKind::Video, path);
  else
    open_file(FileKind::Image, path);
}

void Workbench::open_camera(int index) { open_video_source("camera:" + std::to_string(index)); }

// A video or camera that fails says so until the input changes: the next inference, which runs on
// the image meanwhile, does not clear it.
void Workbench::open_video_source(const std::string& source) {
  stop_video();
  try {
    if (source.rfind("camera:", 0) != 0 && !std::filesystem::is_regular_file(source))
      throw std::runtime_error("no such video file: " + source);
    video = std::make_unique<VideoSource>(source, wake_main_thread);
  } catch (const std::exception& e) {
    input_error = e.what();
  }
}

void Workbench::stop_video() {
  video.reset();
  frame_.reset();
  input_error.clear();
}

void Workbench::save_session(const std::string& path) {
  try {
    const nlohmann::json json = to_json(state);
    write_file_atomically(path, [&](std::ostream& out) { out << json.dump(2) << "\n"; });
    options.session_path = path;
    info = "saved session " + path;
  } catch (const std::exception& e) {
    report_error(e.what());
  }
}

void Workbench::export_figure(const std::string& out_dir) {
  if (video) {
    report_error("export: stop the live input first (figures are made from image files)");
    return;
  }
  AppState request = state;
  // Side-by-side panels become the figure's rows unless the session names its own variants.
  if (request.figure.variants.empty() && !request.compare.empty()) {
    request.figure.variants = to_string(request.attention.variant);
    for (Variant variant : request.compare) request.figure.variants += "," + to_string(variant);
  }
  info = "exporting a " + state.figure.layout + " figure to " + out_dir + " ...";
  worker_->submit_export(request, out_dir);
}

void Workbench::load_session(const std::string& path) {
  try {
    const auto json = read_json_file(path, "session file " + path);
    AppState loaded;  // applied to a fresh state, so a bad key leaves the current one untouched
    apply_json(loaded, json);
    if (loaded.model.empty()) loaded.model = default_model_path();
    if (loaded.image.empty()) loaded.image = state.image;
    stop_video();
    state = loaded;
    options.session_path = path;
    info = "loaded session " + path;
  } catch (const std::exception& e) {
    report_error(e.what());
  }
}

}  // namespace attnscope
