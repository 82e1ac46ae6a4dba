// The workbench's one context, shared by its panels (as Polyscope's Context or Tracy's View): the
// session state, the inference worker, the latest result and the GPU textures derived from it,
// the screen layout, and the actions panels ask for (open, save, report an error).
#pragma once

#include <imgui.h>

#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/app_state.h"
#include "viewer/gl/overlay_renderer.h"
#include "viewer/gl/texture.h"
#include "viewer/inference_worker.h"
#include "viewer/video_source.h"

namespace attnscope {

struct WorkbenchOptions {
  int width = 1600, height = 1000;
  std::string session_path;  // where Save writes by default
  // Headless use: after the latest request's result has been drawn for `frames` frames, write the
  // framebuffer to `screenshot` (PNG, plus a .json of where each view was drawn) and exit.
  int frames = 0;
  std::string screenshot;
  int bench_changes = 0;  // > 0: the slider-to-pixels benchmark with that many changes, then exit
  std::string video;      // live input from the start: a video file or camera:N
  // Left clicks at window coordinates, made once the views have settled (headless runs only).
  std::vector<std::pair<float, float>> clicks;
  // Right-button drags (x0, y0, x1, y1) at window coordinates, made after the clicks (headless runs only).
  std::vector<std::array<float, 4>> drags;
};

// Opens the window and runs until it is closed; returns the exit code.
int run_workbench(AppState state, const WorkbenchOptions& options);

// One scalar map a view shows: the patch grid of a panel's row (one head, or the mean over heads).
struct PatchMap {
  int panel = 0;
  int head = 0;               // -1: mean over heads
  std::vector<float> values;  // [grid_h * grid_w]
  gl::Texture texture;
};

// Where a view's image was drawn this frame, in framebuffer pixels (for screenshots and tests).
struct DrawnView {
  int panel = 0, head = 0;
  float x = 0, y = 0, width = 0, height = 0;
};

// The focus metrics view's numbers for one head of one panel: its query row over the patches.
struct HeadFocusMetrics {
  int panel = 0, head = 0;
  double entropy = 0, top_k_mass = 0, gini = 0;
  std::optional<double> box_mass;  // without a box: none
};
constexpr int kFocusTopK = 10;

struct ScreenLayout {
  ImVec2 sidebar_pos, sidebar_size;
  ImVec2 views_pos, views_size;
  ImVec2 analysis_pos, analysis_size;  // zero size when no analysis view is shown
  ImVec2 status_pos, status_size;
};

enum class FileKind { Model, Image, Video, Session };

class Workbench {
 public:
  Workbench(AppState initial, const WorkbenchOptions& options);
  ~Workbench();

  // Per frame, before the panels draw: takes finished results, derives maps, submits a request
  // when the state asks for different inference than the last one.
  void update(float width, float height);

  // Actions.
  void open_file(FileKind kind, const std::string& path);
  void open_dropped(const std::string& path);  // kind from the extension
  void open_camera(int index);
  void stop_video();
  void save_session(const std::string& path);
  void export_figure(const std::string& out_dir);  // the state's figure layout, on the worker
  void load_session(const std::string& path);
  void report_error(const std::string& message);

  AppState state;
  WorkbenchOptions options;
  ScreenLayout layout;
  std::shared_ptr<const InferenceOutcome> outcome;  // the latest successful result
  std::string error;                                // shown in red until the next success or dismissal
  std::string input_error;                          // why the video or camera failed: kept until the input changes
  std::string info;                                 // a transient note (saved session, fallbacks)
  uint64_t submitted_id = 0;
  uint64_t last_finished_id = 0;  // the newest request answered (with a result or an error)
  // Whether what is on screen answers the current state (nothing is pending).
  // Whether the worker has finished something not yet taken (checked without taking it).
  bool result_waiting() const;
  bool settled() const {
    return state.model.empty() || (last_finished_id == submitted_id && !worker_busy && (!video || video->finished()));
  }
  uint64_t video_frames() const { return frame_number_; }  // frames taken from live input so far
  int results = 0;                                         // results received
  bool worker_busy = false;

  // Derived on the main thread from `outcome` and the selections.
  int query_token = 0;
  gl::Texture image_texture;
  std::vector<std::vector<PatchMap>> maps;  // per panel
  gl::ColorScale scale;
  gl::Texture matrix_texture;             // the matrix view's T x T map
  gl::Texture gradcam_texture;            // the Grad-CAM map over the patch grid
  gl::Texture rollout_texture;            // the attention rollout map over the patch grid
  std::vector<HeadFocusMetrics> metrics;  // per panel, per head (when the metrics view is shown)
  std::string box_error;                  // why the session's box cannot be used on this grid
  int matrix_panel = 0;
  std::vector<DrawnView> drawn_views;

  std::unique_ptr<gl::OverlayRenderer> renderer;
  std::unique_ptr<VideoSource> video;
  std::vector<std::string> devices;  // what the device switch offers

 private:
  InferenceRequest make_request() const;
  void open_video_source(const std::string& source);  // a file or camera:N
  void refresh_maps();
  void refresh_metrics();
  std::unique_ptr<InferenceWorker> worker_;
  InferenceRequest last_request_;
  bool has_last_request_ = false;
  std::string maps_key_, metrics_key_;
  std::shared_ptr<const cv::Mat> frame_;
  uint64_t frame_number_ = 0;
  friend int run_workbench(AppState state, const WorkbenchOptions& options);
};

}  // namespace attnscope
