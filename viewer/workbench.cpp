#include "viewer/workbench.h"

#include "models/model_source.h"

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
#include <utility>

#include <torch/cuda.h>

#include "core/assets.h"
#include "core/atomic_file.h"
#include "core/cv_image.h"
#include "figures/render_image.h"
#include "models/model_loader.h"
#include "viewer/gl/frame.h"
#include "viewer/panels/panel.h"
#include "views/analysis_registry.h"
#include "views/folder_statistics.h"
#include "views/option_catalog.h"
#include "views/plot_views.h"
#include "views/screen_export.h"

namespace attnscope {

namespace {

std::string lower_extension(const std::string& path) {
  std::string extension = std::filesystem::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return extension;
}

}  // namespace

void wake_main_thread() { glfwPostEmptyEvent(); }  // thread-safe in GLFW

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
  shown.images.resize(1);
  devices = {"auto", "cpu"};
  if (torch::cuda::is_available()) devices.push_back("cuda");
  renderer = std::make_unique<gl::OverlayRenderer>();
  worker_ = std::make_unique<InferenceWorker>(wake_main_thread);
  jobs = std::make_unique<FolderJobs>(wake_main_thread);
  if (!options.video.empty()) {
    open_video_source(options.video);
  }
}

Workbench::~Workbench() {
  video.reset();
  jobs.reset();
  worker_.reset();  // joins before the GL objects go
}

bool Workbench::result_waiting() const { return worker_->has_finished(); }

void Workbench::run_on_panels_worker(std::function<void()> task) { worker_->run_and_wait(std::move(task)); }

void Workbench::export_kept_job(size_t index, const std::string& out_dir) {
  const auto& kept = jobs->kept();
  if (index >= kept.size() || !kept[index].result) return;
  messages.info = "exporting the kept " + kept[index].description + " to " + out_dir + " ...";
  worker_->submit_view_export(job_figure_state(state, kept[index].request), out_dir, kept[index].result);
}

void Workbench::report_error(const std::string& message) { messages.error = message; }

void Workbench::cancel_run() {
  worker_->cancel();
  jobs->cancel();
  worker.last_finished_id = worker.submitted_id;  // nothing comes back for it
  messages.info = "cancelled: the views show the last finished run until a setting changes";
}

InferenceRequest Workbench::make_request() const {
  InferenceRequest request;
  static_cast<InputSelection&>(request) = state;
  static_cast<ViewSelection&>(request) = state;
  static_cast<AnalysisSettings&>(request) = state;
  if (video && frame_) {
    request.frame = frame_;
    request.frame_number = frame_number_;
  }
  for (const PanelSpec& spec : state.panel_specs())
    request.panels.push_back({spec.model, spec.settings(state.attention)});
  return request;
}

void Workbench::pick_query(int row, int col, const TokenLayout& grid) {
  if (!outcome) return;
  // A view on the key grid (PVT's reduced keys, "out") is clicked in key cells: the query is the
  // query-grid patch over the same place.
  const int token = follow_query(grid.patch_token(row, col), grid, outcome->layout);
  state.query = QuerySpec::patch(outcome->layout.row_of(token), outcome->layout.col_of(token));
  shown.query_grid = outcome->layout;
}

void Workbench::follow_query_across_grids() {
  if (!outcome || !state.query.is_patch() || shown.query_grid.grid_h == 0) {
    if (outcome) shown.query_grid = outcome->layout;
    return;
  }
  const TokenLayout& now = outcome->layout;
  if (shown.query_grid.grid_h == now.grid_h && shown.query_grid.grid_w == now.grid_w) return;
  const int row = state.query.row, col = state.query.col;
  if (row >= shown.query_grid.grid_h || col >= shown.query_grid.grid_w) return;
  const int token = follow_query(shown.query_grid.patch_token(row, col), shown.query_grid, now);
  state.query = QuerySpec::patch(now.row_of(token), now.col_of(token));
  shown.query_grid = now;
}

void Workbench::update(float width, float height) {
  // Live frames: only the newest counts; the worker's latest-wins slot drops the rest.
  if (video) {
    uint64_t seen = frame_number_;
    if (auto frame = video->take_newer(seen)) {
      frame_ = frame;
      frame_number_ = seen;
    }
    if (video->finished() && !video->error().empty()) {
      messages.input_error = video->error();
      video.reset();
    } else if (video->finished() && !frame_) {
      messages.input_error = "no frames from " + video->source() + " (not a video OpenCV can decode?)";
      video.reset();
    }
  }

  for (auto& finished : worker_->take_finished()) {
    if (!finished->error.empty()) {
      report_error(finished->error);
      if (finished->request_id == worker.submitted_id) {
        worker.last_finished_id = finished->request_id;
        // A model that cannot be opened does not stay in the model field while the panels show the
        // one before it: the field goes back to what is loaded, and the error says so.
        if (outcome && finished->request.model != outcome->request.model && state.model == finished->request.model) {
          state.model = outcome->request.model;
          messages.error += " (still showing " + state.model + ")";
          error_after_revert_ = messages.error;  // the shown model's next result does not clear it
        }
      }
      continue;
    }
    if (panels_outcome_ && finished->request_id < panels_outcome_->request_id) continue;
    panels_outcome_ = finished;
    show_outcome();
    worker.last_finished_id = finished->request_id;
    ++worker.results;
    if (finished->request_id == worker.submitted_id) {
      messages.error = std::exchange(error_after_revert_, "");
      if (!outcome->panels.empty() && outcome->panels.front().error.empty()) {
        recent.add_model(outcome->request.model);
        if (!video) recent.add_image(outcome->request.image);
      }
    }
    shown.images.resize(std::max<size_t>(1, outcome->panels.size()));
    for (size_t p = 0; p < outcome->panels.size(); ++p)
      if (!outcome->panels[p].input_rgb.empty()) shown.images[p].upload_rgb(to_mat(outcome->panels[p].input_rgb));
    maps_key_.clear();
    follow_query_across_grids();
  }
  for (auto& finished : jobs->take_finished()) {
    if (!finished->error.empty()) {
      // Said once: a model that does not open fails the panels' run too, which says so.
      const bool panels_ran =
          panels_outcome_ && panels_outcome_->request.forward_key() == finished->request.forward_key();
      if (panels_ran) report_error("folder job: " + finished->error);
      continue;
    }
    if (job_outcome_ && finished->request_id < job_outcome_->request_id) continue;
    job_outcome_ = finished;
    ++worker.results;
    show_outcome();
  }
  // One undo step per settled interaction: a drag in progress is recorded when it ends.
  if (!ImGui::IsAnyMouseDown()) history.record(to_json(state));
  InferenceRequest request = make_request();
  // A folder job runs beside the panels: their run leaves its analysis view to the job's worker.
  request.analysis_elsewhere = is_folder_job(request);
  if (!has_last_request_ || request.key() != last_request_.key() ||
      request.analysis_elsewhere != last_request_.analysis_elsewhere) {
    last_request_ = request;
    has_last_request_ = true;
    if (!state.model.empty()) {
      worker.submitted_id = worker_->submit(request);
      worker.submitted_at = std::chrono::steady_clock::now();
    }
  }
  if (!state.model.empty()) jobs->update(request);
  for (PreviewOutcome& previewed : worker_->take_previews()) {
    ++worker.previews_finished;
    print_preview.figures.clear();
    print_preview.error = previewed.error;
    for (auto& [name, figure] : previewed.figures) {
      PrintPreviewShown::Shown shown;
      shown.name = name;
      shown.picture.texture.upload_rgb(figure.image);
      shown.picture.width = figure.image.cols;
      shown.picture.height = figure.image.rows;
      shown.figure = std::move(figure);
      shown.figure.image.release();  // the texture holds the pixels
      print_preview.figures.push_back(std::move(shown));
    }
    print_preview.open = true;
    if (previewed.error.empty())
      messages.info = "print preview: " + std::to_string(previewed.figures.size()) +
                      " figure(s) at 96 dpi in the Print preview window";
    else
      report_error("print preview: " + previewed.error);
  }
  for (const ExportOutcome& exported : worker_->take_exports()) {
    ++worker.exports_finished;
    if (exported.error.empty())
      messages.info = "exported " + exported.figure_path;
    else
      report_error("export: " + exported.error);
  }
  worker.busy = worker_->busy();
  worker.progress = worker_->progress();
  worker.runs_stopped = worker_->runs_stopped();
  worker.job_busy = !jobs->settled();
  worker.job_progress = jobs->progress();
  worker.jobs_stopped = jobs->runs_stopped();
  refresh_maps();

  // Fixed layout below the menu bar: controls on the left, views in the middle, the analysis view on
  // the right, status below.
  const float menu_height = ImGui::GetFrameHeight();
  const float status_height = 30.0f, sidebar_width = 370.0f;
  height -= menu_height;
  // Views of several plots side by side (f_p's four) need more room than the others.
  const AnalysisEntry* analysis = find_analysis(state.analysis);
  const float matrix_width = !analysis             ? 0.0f
                             : analysis->wide_view ? std::min(640.0f, width * 0.4f)
                                                   : std::min(460.0f, width * 0.3f);
  layout.sidebar_pos = {0, menu_height};
  layout.sidebar_size = {sidebar_width, height - status_height};
  layout.views_pos = {sidebar_width, menu_height};
  layout.views_size = {width - sidebar_width - matrix_width, height - status_height};
  layout.analysis_pos = {width - matrix_width, menu_height};
  layout.analysis_size = {matrix_width, height - status_height};
  layout.status_pos = {0, menu_height + height - status_height};
  layout.status_size = {width, status_height};
}

void Workbench::show_outcome() {
  job_computed_with.clear();
  if (!panels_outcome_ || !panels_outcome_->request.analysis_elsewhere) {
    outcome = panels_outcome_;
    return;
  }
  // The job's view where it ran on the panels' models and input (a newer query or layer may still
  // be on its way: the last view stays, saying what it was computed with).
  auto shown = std::make_shared<InferenceOutcome>(*panels_outcome_);
  const InferenceRequest& panels = panels_outcome_->request;
  const bool same_models = job_outcome_ && job_outcome_->request.forward_key() == panels.forward_key() &&
                           job_outcome_->request.analysis == panels.analysis;
  if (same_models) {
    shown->analysis_view = job_outcome_->analysis_view;
    shown->view_id = job_outcome_->request_id;
    job_computed_with = folder_job_description(job_outcome_->request);
  }
  shown->analysis_running = !same_models || job_outcome_->request.key() != panels.key();
  outcome = shown;
}

void Workbench::refresh_maps() {
  if (!outcome) return;
  if (state.head >= outcome->heads) state.head = std::max(outcome->heads - 1, 0);
  const std::string key = std::to_string(outcome->request_id) + "/" + std::to_string(outcome->view_id) + "|" +
                          enum_name(state.view) + "|" + std::to_string(state.head) + "|" + to_string(state.colormap) +
                          "|" + to_string(state.scale) + "|" + state.analysis;
  if (key == maps_key_) return;
  maps_key_ = key;

  shown.maps.clear();
  const std::vector<GridMap>* analysis_maps = outcome->analysis_view ? outcome->analysis_view->panel_maps() : nullptr;
  if (analysis_maps && analysis_maps->size() == outcome->panels.size()) {
    show_analysis_maps(*analysis_maps);
    return;
  }
  ValueRange range;
  std::vector<float> shown_values;
  for (size_t p = 0; p < outcome->panels.size(); ++p) {
    const PanelMaps& panel = outcome->panels[p];
    std::vector<PatchMap> panel_maps;
    if (!panel.error.empty() || panel.head_maps.empty()) {
      shown.maps.push_back(std::move(panel_maps));
      continue;
    }
    std::vector<int> heads_shown;
    if (state.view == HeadView::Heads)
      for (int h = 0; h < int(panel.head_maps.size()); ++h) heads_shown.push_back(h);
    else
      heads_shown.push_back(state.view == HeadView::Mean ? -1 : std::min(state.head, int(panel.head_maps.size()) - 1));
    // x uniform: a row spreads over the keys, a column ("in") over the queries.
    const int spread =
        state.direction == MapDirection::In ? panel.layout.total_tokens() : panel.key_layout.total_tokens();
    for (int head : heads_shown) {
      PatchMap map;
      map.panel = int(p);
      map.head = head;
      map.map = head < 0 ? &panel.mean_map : &panel.head_maps[size_t(head)];
      map.factor = display_factor(state.scale, spread);
      shown_values.assign(map.map->values.begin(), map.map->values.end());
      for (float& v : shown_values) v = float(v * map.factor);
      range.include(shown_values.data(), shown_values.size());
      map.values.assign(shown_values.data(), map.map->grid_w, map.map->grid_h);
      panel_maps.push_back(std::move(map));
    }
    shown.maps.push_back(std::move(panel_maps));
  }
  // One colour scale over every visible map, so panels and heads compare by colour.
  shown.scale = resolve_value_scale(state.scale, state.colormap, range);
}

void Workbench::show_analysis_maps(const std::vector<GridMap>& analysis_maps) {
  // Every panel shows its own map (the attribution view: its variant's map), each in [0, 1] by its
  // method's normalisation.
  for (size_t p = 0; p < outcome->panels.size(); ++p) {
    PatchMap map;
    map.panel = int(p);
    map.head = kAnalysisMapHead;
    map.map = &analysis_maps[p];
    if (!map.map->values.empty()) map.values.assign(map.map->values.data(), map.map->grid_w, map.map->grid_h);
    shown.maps.push_back({});
    if (!map.map->values.empty()) shown.maps.back().push_back(std::move(map));
  }
  // Not the attention scale modes: every method's map is already normalised to [0, 1].
  shown.scale = ValueScale();
  shown.scale.colormap = state.colormap;
  shown.scale.vmin = 0.0;
  shown.scale.vmax = 1.0;
  shown.scale.label = "each method's normalisation, 0..1";
}

void refresh_plot(PlotImage& plot, const std::string& key, int width, const std::function<Figure()>& figure) {
  const std::string full_key = key + "|" + std::to_string(width);
  if (plot.key == full_key) return;
  const Figure drawn = figure();
  const cv::Mat image = render_figure_image(drawn, screen_figure_style(drawn, width));
  plot.texture.upload_rgb(image);
  plot.width = image.cols;
  plot.height = image.rows;
  plot.key = full_key;  // only once drawn: a figure that failed is tried again, not shown half-made
}

void Workbench::open_file(FileKind kind, const std::string& path) {
  if (path.empty()) return;
  if (kind == FileKind::Video) {
    open_video_source(path);
    return;
  }
  if (kind == FileKind::Model) {
    // A model may be a cache's name (hf-hub:ORG/NAME, local-dir:, a bare ORG/NAME or NAME.pth):
    // resolved offline here, so that a name the caches lack is refused at once, naming where it looked.
    try {
      const ModelSource source = resolve_model_source(path);
      if (source.kind == "path" && !std::filesystem::exists(path)) throw std::runtime_error("no such file: " + path);
    } catch (const std::exception& e) {
      report_error(e.what());
      return;
    }
    if (path != state.model && !keep_settings_on_model_change) {
      // The last model's variant, knobs, ablations and SAE do not carry over unless asked, and
      // what went back to its default is said.
      std::string reset;
      for (const std::string& change : reset_attention_options(state)) reset += (reset.empty() ? "" : ", ") + change;
      if (!reset.empty())
        messages.info = "opened " + path + "; the last model's settings went back to the defaults: " + reset +
                        " (\"keep settings\" carries them to the next model)";
    }
    state.model = path;
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
    video = std::make_unique<VideoSource>(source, state.max_pixels, wake_main_thread);
  } catch (const std::exception& e) {
    messages.input_error = e.what();
  }
}

void Workbench::stop_video() {
  video.reset();
  frame_.reset();
  messages.input_error.clear();
}

void Workbench::save_session(const std::string& path) {
  try {
    const nlohmann::json json = to_session_file_json(state);
    write_file_atomically(path, [&](std::ostream& out) { out << json_text(json) << "\n"; });
    options.session_path = path;
    messages.info = "saved session " + path;
  } catch (const std::exception& e) {
    report_error(e.what());
  }
}

void Workbench::export_figure(const std::string& out_dir, bool what_is_on_screen) {
  if (video) {
    report_error("export: stop the live input first (figures are made from image files)");
    return;
  }
  AppState request = state;
  // The panels on screen become the figure's rows; without this, a session that names its own rows
  // keeps them (FigureRequest::from_state takes the panels otherwise, as `export --session` does).
  if (what_is_on_screen) {
    request.figure.variants = request.panels_as_figure_rows();
    request.figure.layout = "panels";
  }
  messages.info = "exporting a " + request.figure.layout + " figure to " + out_dir + " ...";
  // What is on screen includes the open analysis view, drawn from the outcome on screen.
  worker_->submit_export(request, out_dir, what_is_on_screen ? outcome : nullptr);
}

void Workbench::preview_figure() {
  if (video) {
    report_error("preview: stop the live input first (figures are made from image files)");
    return;
  }
  AppState request = state;
  request.figure.variants = request.panels_as_figure_rows();
  request.figure.layout = "panels";
  messages.info = "drawing the figures at print size ...";
  worker_->submit_preview(request, outcome);
}

void Workbench::undo() {
  if (auto session = history.undo()) restore_session(*session, "undo");
}

void Workbench::redo() {
  if (auto session = history.redo()) restore_session(*session, "redo");
}

// A step of the history made current; the note names the options it changed.
void Workbench::restore_session(const nlohmann::json& session, const char* what) {
  const nlohmann::json before = to_json(state);
  AppState restored;
  try {
    apply_json(restored, session);
  } catch (const std::exception& e) {
    report_error(std::string(what) + ": " + e.what());
    return;
  }
  std::string changed;
  for (const auto& [key, value] : session.items())
    if (!before.contains(key) || before[key] != value) changed += (changed.empty() ? "" : ", ") + key;
  state = restored;
  messages.info = std::string(what) + ": " + (changed.empty() ? "nothing changed" : changed);
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
    messages.info = "loaded session " + path;
  } catch (const std::exception& e) {
    report_error(e.what());
  }
}

}  // namespace attnscope
