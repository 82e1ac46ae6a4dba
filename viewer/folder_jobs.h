// The workbench's folder jobs (statistics over a folder of images, views/folder_statistics.h): they
// run on a worker of their own beside the panels' one, with its own models and caches, so that a
// model load or a slider never waits for a job. A model change while a job runs asks the user to
// keep it or cancel it: a kept job goes on with its worker (and models) until it is done, and its
// result names the model and settings it was computed with.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "viewer/inference_worker.h"

namespace attnscope {

// The state a kept job's figure is drawn and exported with: the display and figure settings on
// screen, and the input, view and analysis settings the job ran with.
AppState job_figure_state(const AppState& on_screen, const InferenceRequest& job);

class FolderJobs {
 public:
  explicit FolderJobs(std::function<void()> wake);

  // A job kept through a model change.
  struct Kept {
    InferenceRequest request;
    std::string description;                  // folder_job_description(request)
    std::unique_ptr<InferenceWorker> worker;  // released once its result is in
    std::shared_ptr<const InferenceOutcome> result;
    std::string error;
    bool cancelled = false;  // stopped by the user: dropped once its worker is idle
  };

  // Per frame, with what the workbench asks now, marked `analysis_elsewhere` where its analysis is
  // a folder job (is_folder_job): submits that job (or cancels the running one when the analysis is
  // no folder job any more). A request on other
  // models while a job runs does not replace it: the choice waits for keep() or cancel().
  void update(const InferenceRequest& request);
  // The current job's results finished since the last call, oldest first; the kept jobs' results
  // go to their entries.
  std::vector<std::shared_ptr<const InferenceOutcome>> take_finished();

  // The running job's description while a model change waits for the user's choice.
  const std::optional<std::string>& choice() const { return choice_; }
  void keep();  // the running job goes on as a kept one; the next update starts the new models' job
  // The running job stops (what it did stays cached, to go on from there); the next request that
  // differs starts its own without asking.
  void cancel();
  void cancel_kept(size_t index);
  void close_kept(size_t index);  // forgets a finished kept job
  const std::vector<Kept>& kept() const { return kept_; }

  // The request the current job was submitted with, if any.
  const InferenceRequest* submitted() const { return submitted_ ? &*submitted_ : nullptr; }
  bool busy() const { return worker_->busy(); }
  // Nothing running anywhere, no choice waiting.
  bool settled() const;
  std::pair<int, int> progress() const { return worker_->progress(); }
  int runs_stopped() const;

 private:
  std::function<void()> wake_;
  std::unique_ptr<InferenceWorker> worker_;
  std::optional<InferenceRequest> submitted_;
  std::optional<std::string> choice_;
  bool stopped_ = false;  // the submitted job was cancelled
  std::vector<Kept> kept_;
  int stopped_before_ = 0;  // runs stopped by workers no longer held
};

}  // namespace attnscope
