// A background inference thread of the workbench: the panels' own, and one per folder job (which
// runs beside the panels, with its own models and caches). The GUI overwrites a single pending
// request (the latest wins, so a dragged slider or a live video never queues up work), a run that
// is no longer wanted stops between transformer blocks, and finished results, immutable, reach the
// GUI through a queue it drains once per frame. A run (views/request_runner.h) goes request -> model ->
// forward -> views; the views read only the captures every model family fills. No GL or ImGui
// here: uploads happen on the main thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>

#include "figures/render_image.h"
#include "session/app_state.h"
#include "views/request_runner.h"
#include "views/view_model.h"

namespace attnscope {

// "Preview at print size": the figures "Export what is on screen" would write, drawn at the
// screen's 96 dpi, or why not.
struct PreviewOutcome {
  std::vector<std::pair<std::string, PrintPreview>> figures;  // (what it is, the figure as it prints)
  std::string error;
};

class InferenceWorker {
 public:
  // Background workers (folder jobs) run at a lower CPU priority, with the threads their runs
  // start, so that the panels' worker beside them is not slowed down by them.
  enum class Priority { Interactive, Background };
  // `wake` is called from the worker thread whenever a result is ready (e.g. glfwPostEmptyEvent).
  explicit InferenceWorker(std::function<void()> wake, Priority priority = Priority::Interactive);
  ~InferenceWorker();
  InferenceWorker(const InferenceWorker&) = delete;
  InferenceWorker& operator=(const InferenceWorker&) = delete;

  // Replaces the pending request; a run in progress for an older request is cancelled. Returns its
  // id, unique across the workbench's workers.
  uint64_t submit(InferenceRequest request);
  // Queues a figure export of `state` (its model, image and figure settings) into `out_dir`; it runs
  // before the next inference request. With `on_screen`, the open analysis view's figure is
  // written too, from that outcome. Its outcome comes back through take_exports().
  void submit_export(AppState state, std::string out_dir, std::shared_ptr<const InferenceOutcome> on_screen = {});
  // Queues the export of `view`'s analysis view alone (a kept folder job's result), as
  // submit_export writes it beside the layout figure.
  void submit_view_export(AppState state, std::string out_dir, std::shared_ptr<const InferenceOutcome> view);
  std::vector<ExportOutcome> take_exports();
  // Queues a preview of what submit_export(state, "", on_screen) would write, drawn and not
  // written; it comes back through take_previews().
  void submit_preview(AppState state, std::shared_ptr<const InferenceOutcome> on_screen = {});
  std::vector<PreviewOutcome> take_previews();
  // Runs `task` on the worker's thread before the next request and returns when it has run,
  // rethrowing what it threw: the GUI benchmark's plain forward, on the thread (and OpenMP team)
  // the panels' forwards use.
  void run_and_wait(std::function<void()> task);
  // Results finished since the last call, oldest first.
  std::vector<std::shared_ptr<const InferenceOutcome>> take_finished();
  // Whether a finished result waits to be taken (without taking it).
  bool has_finished() const;
  // True while a request is pending or running.
  bool busy() const;
  // How far the running request's long analysis view is (images done of total); {0, 0} when it
  // reports nothing. Read by the status line each frame.
  std::pair<int, int> progress() const { return {progress_done_.load(), progress_total_.load()}; }
  // Stops the running request (between its blocks or images) and drops a pending one: nothing
  // comes back for them.
  void cancel();
  // How many runs stopped mid-way (cancelled, or overtaken by a newer request) so far.
  int runs_stopped() const { return runs_stopped_.load(); }

 private:
  struct PendingExport {
    AppState state;
    std::string out_dir;
    std::shared_ptr<const InferenceOutcome> on_screen;
    bool preview = false;    // drawn for the screen, not written
    bool view_only = false;  // the analysis view of `on_screen` alone, without the layout figure
  };
  void loop();
  std::shared_ptr<const InferenceOutcome> run(uint64_t id, const InferenceRequest& request);
  // The model of a figure's state, its input configured; throws without a model or an image file.
  std::shared_ptr<LoadedModel> figure_model(const AppState& state);
  ExportOutcome run_export(const PendingExport& pending);
  PreviewOutcome run_preview(const PendingExport& pending);

  std::function<void()> wake_;
  Priority priority_;
  mutable std::mutex mutex_;
  std::condition_variable wanted_;
  std::optional<InferenceRequest> pending_;
  std::deque<PendingExport> pending_exports_;             // in the order asked, before the next request
  std::deque<std::packaged_task<void()>> pending_tasks_;  // run_and_wait's, before the exports
  std::vector<ExportOutcome> exports_;
  std::vector<PreviewOutcome> previews_;
  std::atomic<uint64_t> latest_id_{0};
  std::atomic<int> progress_done_{0}, progress_total_{0};
  std::atomic<int> runs_stopped_{0};
  bool running_ = false;
  bool stopping_ = false;
  std::vector<std::shared_ptr<const InferenceOutcome>> finished_;

  // Worker-thread caches: the loaded models, the decoded image, each model's input, the last
  // forward passes and the analyses' results.
  std::unique_ptr<RunCache> cache_;
  std::thread thread_;
};

}  // namespace attnscope
