// The scheduling of the workbench's one inference thread: the latest request wins, a run that is
// no longer wanted stops between blocks, exports run before the next request.
#include "viewer/inference_worker.h"

#include <c10/util/Exception.h>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "core/excerpt.h"
#include "core/torch_error.h"
#include "exports/export.h"
#include "models/cpu_threads.h"
#include "models/model_loader.h"
#include "views/analysis_registry.h"
#include "views/option_catalog.h"
#include "views/screen_export.h"

namespace attnscope {

namespace {

// Request ids from one counter for every worker: a result names its run, whichever thread ran it.
uint64_t next_request_id() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

}  // namespace

InferenceWorker::InferenceWorker(std::function<void()> wake, Priority priority)
    : wake_(std::move(wake)), priority_(priority), cache_(new RunCache) {
  thread_ = std::thread([this] {
    // Linux's nice value is a thread's own, and the threads it creates (OpenMP's team for its
    // LibTorch and OpenBLAS calls) inherit it. Failing, the job just runs at the panels' priority.
    if (priority_ == Priority::Background) (void)setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), 15);
    loop();
  });
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
    id = next_request_id();
    pending_ = std::move(request);
    latest_id_ = id;
  }
  wanted_.notify_one();
  return id;
}

void InferenceWorker::run_and_wait(std::function<void()> task) {
  std::packaged_task<void()> packaged(std::move(task));
  std::future<void> ran = packaged.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_tasks_.push_back(std::move(packaged));
  }
  wanted_.notify_one();
  ran.get();
}

void InferenceWorker::submit_export(AppState state, std::string out_dir,
                                    std::shared_ptr<const InferenceOutcome> on_screen) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_exports_.push_back(PendingExport{std::move(state), std::move(out_dir), std::move(on_screen)});
  }
  wanted_.notify_one();
}

void InferenceWorker::submit_view_export(AppState state, std::string out_dir,
                                         std::shared_ptr<const InferenceOutcome> view) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_exports_.push_back(PendingExport{std::move(state), std::move(out_dir), std::move(view), false, true});
  }
  wanted_.notify_one();
}

void InferenceWorker::submit_preview(AppState state, std::shared_ptr<const InferenceOutcome> on_screen) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_exports_.push_back(PendingExport{std::move(state), "", std::move(on_screen), true});
  }
  wanted_.notify_one();
}

std::vector<PreviewOutcome> InferenceWorker::take_previews() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(previews_, {});
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

void InferenceWorker::cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.reset();
  latest_id_ = next_request_id();  // no run has this id: the running one stops
}

bool InferenceWorker::busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_ || pending_.has_value() || !pending_exports_.empty();
}

void InferenceWorker::loop() {
  for (;;) {
    InferenceRequest request;
    uint64_t id = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const auto work_waits = [&] {
        return pending_.has_value() || !pending_exports_.empty() || !pending_tasks_.empty();
      };
      // A folder job's team goes while it waits for the next job (models/cpu_threads.h); the
      // panels' worker keeps its own, warm, for the next slider change.
      if (priority_ == Priority::Background && !work_waits() && !stopping_) {
        lock.unlock();
        release_openmp_team();
        lock.lock();
      }
      wanted_.wait(lock, [&] { return stopping_ || work_waits(); });
      if (stopping_) return;
      if (!pending_tasks_.empty()) {
        std::packaged_task<void()> task = std::move(pending_tasks_.front());
        pending_tasks_.pop_front();
        lock.unlock();
        task();  // its exception goes to run_and_wait's caller
        continue;
      }
      if (!pending_exports_.empty()) {
        const PendingExport pending = std::move(pending_exports_.front());
        pending_exports_.pop_front();
        running_ = true;
        lock.unlock();
        if (pending.preview) {
          PreviewOutcome previewed = run_preview(pending);
          lock.lock();
          previews_.push_back(std::move(previewed));
        } else {
          ExportOutcome exported = run_export(pending);
          lock.lock();
          exports_.push_back(std::move(exported));
        }
        running_ = false;
        lock.unlock();
        if (wake_) wake_();
        continue;
      }
      request = std::move(*pending_);
      pending_.reset();
      id = latest_id_;
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

namespace {

// With overwrite off, a repeat export gets the first free number ("_2", "_3", ...) instead of being
// refused: the workbench's user made the figure again on purpose.
std::string free_stem_suffix(const AppState& state, const std::string& out_dir, bool with_layout, bool with_view) {
  if (state.figure.overwrite) return "";
  const std::string extension = "." + to_string(state.figure.format);
  const std::string image = state.image.empty() ? "live" : state.image;
  const std::string& layout = state.figure.layout;  // "panels" for what is on screen
  const auto taken = [&](const std::string& stem) {
    std::error_code error;
    return std::filesystem::exists(std::filesystem::path(out_dir) / (stem + extension), error);
  };
  for (int number = 1; number < 10000; ++number) {
    const std::string suffix = number == 1 ? "" : "_" + std::to_string(number);
    if (!(with_layout && taken(figure_stem(image, layout) + suffix)) &&
        !(with_view && taken(figure_stem(image, state.analysis + "-view") + suffix)))
      return suffix;
  }
  return "";  // 9,999 figures of one name: the bundle's own refusal says so
}

// What a failed export or preview says: LibTorch's text without its C++ trace, out of memory, or
// the exception's message on one line.
std::string figure_error(const std::function<void()>& work) {
  try {
    work();
  } catch (const c10::Error& e) {
    return torch_error_text(e);
  } catch (const std::bad_alloc&) {
    return "out of memory";
  } catch (const std::exception& e) {
    return one_line(e.what());
  }
  return "";
}

}  // namespace

std::shared_ptr<LoadedModel> InferenceWorker::figure_model(const AppState& state) {
  if (state.model.empty()) throw std::runtime_error("no model is open");
  if (state.image.empty()) throw std::runtime_error("a figure needs an image file (not live input)");
  std::shared_ptr<LoadedModel> model = cache_->models.get(state.model, state.arch, state.device, state.config);
  configure_input(*model, state.input_settings());
  return model;
}

ExportOutcome InferenceWorker::run_export(const PendingExport& pending) {
  AppState state = pending.state;
  ExportOutcome exported;
  exported.error = figure_error([&] {
    state.figure.stem_suffix = free_stem_suffix(state, pending.out_dir, !pending.view_only,
                                                pending.on_screen && find_analysis(state.analysis));
    if (!pending.view_only) {
      std::shared_ptr<LoadedModel> model = figure_model(state);
      exported.figure_path = export_figure(state, *model, state.image, pending.out_dir, &cache_->models).figure_path;
    }
    // The analysis view as it is on screen: its figure from the outcome the workbench draws.
    if (pending.on_screen && find_analysis(state.analysis))
      exported.figure_path += (pending.view_only ? "" : ", ") +
                              export_analysis_view(*pending.on_screen, state, pending.out_dir).figure_path;
  });
  return exported;
}

PreviewOutcome InferenceWorker::run_preview(const PendingExport& pending) {
  const AppState& state = pending.state;
  PreviewOutcome previewed;
  previewed.error = figure_error([&] {
    std::shared_ptr<LoadedModel> model = figure_model(state);
    const LayoutFigure built = build_layout_figure(state, *model, state.image, &cache_->models);
    // Fitted as the bundle writer fits it, and told what an export would print.
    const auto preview_of = [](const FittedFigure& fitted) {
      PrintPreview preview = print_preview(fitted.figure, fitted.output.style);
      preview.note = fitted_notes(fitted);
      return preview;
    };
    previewed.figures.emplace_back(state.figure.layout, preview_of(fit_to_width(built.figure, built.request)));
    if (pending.on_screen && find_analysis(state.analysis)) {
      const Figure view = analysis_view_figure(*pending.on_screen, state);
      previewed.figures.emplace_back(state.analysis + " view", preview_of(fit_to_width(view, figure_output(state))));
    }
  });
  return previewed;
}

std::shared_ptr<const InferenceOutcome> InferenceWorker::run(uint64_t id, const InferenceRequest& request) {
  auto outcome = std::make_shared<InferenceOutcome>();
  outcome->request_id = outcome->view_id = id;
  outcome->request = request;
  progress_done_ = progress_total_ = 0;
  // A view that reports progress is a long job: when it first does, the panels (already built) go
  // to the window without it, and the whole outcome follows when the job ends.
  bool panels_published = false;
  const auto report = [this, &panels_published, &outcome](int done, int total) {
    progress_total_ = total;
    progress_done_ = done;
    if (panels_published || total <= 0) return;
    panels_published = true;
    auto panels = std::make_shared<InferenceOutcome>(*outcome);
    panels->analysis_view.reset();
    panels->analysis_running = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.push_back(std::move(panels));
    }
    if (wake_) wake_();
  };
  try {
    run_request(
        request, *cache_, [this, id] { return latest_id_.load() != id; }, *outcome, report);
  } catch (const Cancelled&) {
    progress_done_ = progress_total_ = 0;
    ++runs_stopped_;
    return nullptr;
  }
  progress_done_ = progress_total_ = 0;
  return outcome;
}

}  // namespace attnscope
