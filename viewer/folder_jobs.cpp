// The folder jobs' scheduling (viewer/folder_jobs.h).
#include "viewer/folder_jobs.h"

#include "views/folder_statistics.h"

namespace attnscope {

namespace {

// Whether two requests run the same models: the choice to keep a job is asked only when they do not.
bool same_models(const InferenceRequest& a, const InferenceRequest& b) {
  if (a.arch != b.arch || a.config != b.config || a.device != b.device || a.panels.size() != b.panels.size())
    return false;
  for (size_t p = 0; p < a.panels.size(); ++p)
    if (a.panels[p].model_path != b.panels[p].model_path) return false;
  return true;
}

// A kept job's finished run: its result, or why it has none.
void record(FolderJobs::Kept& kept, const std::shared_ptr<const InferenceOutcome>& outcome) {
  if (outcome->error.empty())
    kept.result = outcome;
  else
    kept.error = outcome->error;
}

}  // namespace

AppState job_figure_state(const AppState& on_screen, const InferenceRequest& job) {
  AppState state = on_screen;
  static_cast<InputSelection&>(state) = job;
  static_cast<ViewSelection&>(state) = job;
  static_cast<AnalysisSettings&>(state) = job;
  return state;
}

FolderJobs::FolderJobs(std::function<void()> wake)
    : wake_(std::move(wake)),
      worker_(std::make_unique<InferenceWorker>(wake_, InferenceWorker::Priority::Background)) {}

void FolderJobs::update(const InferenceRequest& request) {
  const bool job = request.analysis_elsewhere;
  if (choice_) {
    // Back on the running job's models (an undo): there is nothing to choose any more.
    if (job && same_models(request, *submitted_)) choice_.reset();
    if (choice_) return;  // the job runs on until the user chooses
  }
  if (!job) {
    if (submitted_) worker_->cancel();  // another analysis: a newer request wins, as on the panels
    submitted_.reset();
    return;
  }
  if (submitted_ && request.key() == submitted_->key()) return;
  if (submitted_ && worker_->busy() && !stopped_ && !same_models(request, *submitted_)) {
    choice_ = folder_job_description(*submitted_);
    return;
  }
  submitted_ = request;
  stopped_ = false;
  submitted_->analysis_elsewhere = false;  // the job is where the analysis view is computed
  worker_->submit(*submitted_);
}

std::vector<std::shared_ptr<const InferenceOutcome>> FolderJobs::take_finished() {
  std::vector<std::shared_ptr<const InferenceOutcome>> finished;
  // A job publishes its panels first (InferenceWorker::run): the panels' worker has those already.
  for (auto& outcome : worker_->take_finished()) {
    if (outcome->analysis_running) continue;
    if (choice_) {
      // The job ended while its choice waited: its result is kept, as keep() would have it.
      Kept kept;
      kept.request = std::move(*submitted_);
      kept.description = std::move(*choice_);
      record(kept, outcome);
      kept_.push_back(std::move(kept));
      submitted_.reset();
      choice_.reset();
      continue;
    }
    finished.push_back(std::move(outcome));
  }
  for (Kept& kept : kept_) {
    if (!kept.worker) continue;
    for (auto& outcome : kept.worker->take_finished())
      if (!outcome->analysis_running) record(kept, outcome);
    const bool answered = kept.result || !kept.error.empty() || kept.cancelled;
    if (answered && !kept.worker->busy()) {
      stopped_before_ += kept.worker->runs_stopped();
      kept.worker.reset();  // its thread is idle: joins at once, and its models are freed
    }
  }
  for (size_t k = kept_.size(); k-- > 0;)
    if (kept_[k].cancelled && !kept_[k].worker) kept_.erase(kept_.begin() + long(k));
  return finished;
}

void FolderJobs::keep() {
  if (!choice_ || !submitted_) return;
  Kept kept;
  kept.request = *submitted_;
  kept.description = *choice_;
  kept.worker = std::exchange(worker_, std::make_unique<InferenceWorker>(wake_, InferenceWorker::Priority::Background));
  kept_.push_back(std::move(kept));
  submitted_.reset();
  choice_.reset();
}

void FolderJobs::cancel() {
  worker_->cancel();
  stopped_ = true;  // not submitted again until the request changes, and not asked about
  choice_.reset();
}

void FolderJobs::cancel_kept(size_t index) {
  if (index >= kept_.size() || !kept_[index].worker) return;
  kept_[index].worker->cancel();
  kept_[index].cancelled = true;
}

void FolderJobs::close_kept(size_t index) {
  if (index < kept_.size() && !kept_[index].worker) kept_.erase(kept_.begin() + long(index));
}

bool FolderJobs::settled() const {
  if (choice_ || worker_->busy()) return false;
  for (const Kept& kept : kept_)
    if (kept.worker) return false;
  return true;
}

int FolderJobs::runs_stopped() const {
  int stopped = stopped_before_ + worker_->runs_stopped();
  for (const Kept& kept : kept_)
    if (kept.worker) stopped += kept.worker->runs_stopped();
  return stopped;
}

}  // namespace attnscope
