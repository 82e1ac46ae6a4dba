// The workbench's one context, shared by its panels (as Polyscope's Context or Tracy's View): the
// session state, the inference worker, the latest result and the GPU textures derived from it,
// the screen layout, and the actions panels ask for (open, save, report an error).
#pragma once

#include <imgui.h>

#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/recent_files.h"
#include "figures/render.h"
#include "session/app_state.h"
#include "session/session_history.h"
#include "viewer/folder_jobs.h"
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
  // Mouse wheel steps (x, y, notches; positive zooms in) at window coordinates, made before the
  // clicks (headless runs only).
  std::vector<std::array<float, 3>> wheels;
  // Right-button drags (x0, y0, x1, y1) at window coordinates, made after the clicks (headless runs only).
  std::vector<std::array<float, 4>> drags;
  // Headless runs: press "Export what is on screen" into this folder once settled, and wait for it.
  std::string export_on_screen;
  // Headless runs: press every kept folder job's "Export figure" into this folder once everything
  // settled, and wait for them.
  std::string export_kept;
  // Headless runs: press "Preview at print size" once settled, and wait for it.
  bool print_preview = false;
  // Headless runs: open this model (as the model field's Enter does) once settled, after the
  // clicks and drags, and settle again before the screenshot.
  std::string open_model;
  // Headless runs: how to answer the question a model change asks while a folder job runs ("keep"
  // or "cancel"); "ask": it stays open, and the screenshot shows it.
  std::string job_choice;
  // Headless runs: "NAME=DIR": press the folder option NAME's Browse... once settled, after the model
  // above, and choose DIR in the browser; settle again before the screenshot.
  std::string choose_folder;
  // Headless runs: key chords pressed one at a time once settled, after the model above
  // ("ctrl+z", "ctrl+shift+z", "f1"); each is GLFW's key code with its modifiers.
  struct KeyChord {
    int key = 0;
    bool ctrl = false, shift = false;
  };
  std::vector<KeyChord> keys;
};

// Wakes the main loop from another thread (a worker's result, a video frame, a finished scan).
void wake_main_thread();

// Opens the window and runs until it is closed; returns the exit code.
int run_workbench(AppState state, const WorkbenchOptions& options);

// PatchMap::head of a map the open analysis view draws instead of attention (its panel_maps():
// the attribution view's maps).
constexpr int kAnalysisMapHead = -3;

// One scalar map a view shows: a panel's map of one head, or the mean over heads, on its grid.
struct PatchMap {
  int panel = 0;
  int head = 0;                  // -1: mean over heads; kAnalysisMapHead: the analysis view's map
  const GridMap* map = nullptr;  // owned by the outcome the maps were made from
  double factor = 1.0;           // display units per weight (x uniform: the key count)
  gl::MapValues values;          // the map in display units
};

// Where a view's image was drawn this frame, in framebuffer pixels (for screenshots and tests).
struct DrawnView {
  int panel = 0, head = 0;
  float x = 0, y = 0, width = 0, height = 0;
  int grid_h = 0, grid_w = 0;  // the map's grid (panels of different models have different ones)
};

// A plot drawn by the figures' cairo code into a texture, re-rendered when its content or width
// changes (see views/plot_views.h).
struct PlotImage {
  std::string key;
  gl::Texture texture;
  int width = 0, height = 0;
};

// Renders `figure()` into `plot` when its content (`key`) or `width` changed.
void refresh_plot(PlotImage& plot, const std::string& key, int width, const std::function<Figure()>& figure);

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
  // The state's figure layout (or, with `what_is_on_screen`, the panels layout: the panels, view,
  // scale and colour map on screen), on the worker.
  void export_figure(const std::string& out_dir, bool what_is_on_screen = false);
  // What "Export what is on screen" would write, drawn at print size (96 dpi) in a window of its own
  // before anything is written.
  void preview_figure();
  void load_session(const std::string& path);
  void report_error(const std::string& message);
  // Stops the run in progress and the folder job; the views keep the last finished result until a
  // setting changes.
  void cancel_run();
  // Writes a kept folder job's result (its analysis view) into out_dir, on the panels' worker.
  void export_kept_job(size_t index, const std::string& out_dir);

  // Runs `task` on the panels' worker thread and returns when it has (InferenceWorker::run_and_wait).
  void run_on_panels_worker(std::function<void()> task);
  // Whether the worker has finished something not yet taken (checked without taking it).
  bool result_waiting() const;
  // Whether the panels on screen answer the current state (nothing is pending on their worker).
  bool settled() const {
    return state.model.empty() ||
           (worker.last_finished_id == worker.submitted_id && !worker.busy && (!video || video->finished()));
  }
  // Whether no folder job runs or waits for the user's keep-or-cancel choice.
  bool jobs_settled() const { return jobs->settled(); }
  uint64_t video_frames() const { return frame_number_; }  // frames taken from live input so far
  // Makes the patch (row, col) of a view on `grid` the query of the shown layer.
  void pick_query(int row, int col, const TokenLayout& grid);
  const gl::Texture& image_texture() const { return shown.images.front(); }  // panel 1's (the analyses')

  // The session (what is asked), how the window was opened, and where the panels go.
  AppState state;
  // Whether opening another model keeps the variant, knobs, ablations and SAE (the model row's
  // "keep settings"); off, they go back to their defaults with a note.
  bool keep_settings_on_model_change = false;
  // Every step of the session, for undo and redo (Ctrl+Z, Ctrl+Y; the Edit menu): recorded each frame
  // no mouse button is held, so a slider's drag is one step.
  SessionHistory history;
  void undo();
  void redo();
  // A file dialog asked for by the menu or a shortcut; the controls panel, which owns the browser,
  // opens it on its next frame.
  std::optional<FileKind> browse_request;
  // A folder option (an analysis's DIR, such as --images) whose Browse... button was pressed: the
  // controls panel opens the browser on folders at `start` and sets the option to the one chosen
  // (`choose_at_once`: the folder it opens at, as "Choose this folder" on its first frame).
  struct FolderRequest {
    OptionSpec option;
    std::string start;
    bool choose_at_once = false;
  };
  std::optional<FolderRequest> folder_request;
  bool quit_requested = false;  // File > Quit, Ctrl+Q: the main loop closes the window
  // The models and images opened last (File > Recent), recorded when a result of them arrives.
  RecentFiles recent;
  WorkbenchOptions options;
  ScreenLayout layout;

  // The latest successful result: the panels' run, with the analysis view of the folder job on the
  // same models where the analysis is one.
  std::shared_ptr<const InferenceOutcome> outcome;
  // Statistics over a folder, on a worker of their own beside the panels' (viewer/folder_jobs.h).
  std::unique_ptr<FolderJobs> jobs;
  // What the folder job's view on screen was computed with (folder_job_description), and whether a
  // job for the current settings is still running; empty when the analysis is no folder job.
  std::string job_computed_with;

  // The print preview on screen (Export > "Preview at print size"): each figure's texture at 96 dpi
  // with its size and text sizes; empty when closed.
  struct PrintPreviewShown {
    struct Shown {
      std::string name;
      PrintPreview figure;
      PlotImage picture;
    };
    std::vector<Shown> figures;
    std::string error;
    bool open = false;
  } print_preview;

  // What the user is told.
  struct Messages {
    std::string error;        // shown in red until the next success or dismissal
    std::string input_error;  // why the video or camera failed: kept until the input changes
    std::string info;         // a transient note (saved session, fallbacks)
  } messages;

  // Where the inference worker is, as seen from the main thread.
  struct WorkerState {
    uint64_t submitted_id = 0;
    std::chrono::steady_clock::time_point submitted_at;  // when submitted_id went to the worker
    uint64_t last_finished_id = 0;                       // the newest request answered (with a result or an error)
    int results = 0;                                     // results received
    int exports_finished = 0;                            // exports answered
    int previews_finished = 0;                           // print previews answered
    bool busy = false;
    std::pair<int, int> progress;      // done of total of a long analysis view; {0, 0}: none
    int runs_stopped = 0;              // runs stopped mid-way (cancel, a newer request)
    bool job_busy = false;             // a folder job runs (the current one or a kept one)
    std::pair<int, int> job_progress;  // the current folder job's images done of total
    int jobs_stopped = 0;              // folder job runs stopped mid-way
  } worker;

  // Derived on the main thread from `outcome` and the selections: what the views draw.
  struct ShownViews {
    std::vector<gl::Texture> images;          // per panel: the image as its model saw it
    std::vector<std::vector<PatchMap>> maps;  // per panel
    ValueScale scale;                         // one scale over every map on screen
    // The grid of the view the query was picked on: when another layer has another grid (another
    // stage), the query moves to the patch over the same place in the image.
    TokenLayout query_grid;
  } shown;

  // What was drawn this frame, for headless screenshots and tests.
  struct DrawnFrame {
    std::vector<DrawnView> views;
    std::vector<std::vector<std::string>> headings;  // per panel, its heading lines
  } drawn;

  std::unique_ptr<gl::OverlayRenderer> renderer;
  std::unique_ptr<VideoSource> video;
  std::vector<std::string> devices;  // what the device switch offers

 private:
  InferenceRequest make_request() const;
  void open_video_source(const std::string& source);  // a file or camera:N
  void refresh_maps();
  void show_analysis_maps(const std::vector<GridMap>& analysis_maps);
  void follow_query_across_grids();
  // `outcome` from the panels' latest result and the folder job's.
  void show_outcome();
  void restore_session(const nlohmann::json& session, const char* what);
  std::unique_ptr<InferenceWorker> worker_;
  std::shared_ptr<const InferenceOutcome> panels_outcome_, job_outcome_;
  InferenceRequest last_request_;
  bool has_last_request_ = false;
  std::string error_after_revert_;  // a refused model's error, kept over the shown model's next result
  std::string maps_key_;
  std::shared_ptr<const RgbImage> frame_;
  uint64_t frame_number_ = 0;
  friend int run_workbench(AppState state, const WorkbenchOptions& options);
};

}  // namespace attnscope
