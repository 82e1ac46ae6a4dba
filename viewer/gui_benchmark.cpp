#include "viewer/gui_benchmark.h"

#include <algorithm>
#include <cmath>

#include "models/inference.h"
#include "models/token_linear.h"
#include "viewer/workbench.h"

namespace attnscope {

namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, size_t(fraction * double(values.size())))];
}

}  // namespace

GuiBenchmark::GuiBenchmark(const AppState& state, int changes) : changes_(changes), state_(state) {
  model_.emplace(load_model(state.model, state.arch_overrides(), resolve_device(state.device)));
  prepared_ = prepare_model_input(load_image_rgb(state.image, state.max_pixels), state.input_settings(), *model_);
}

double GuiBenchmark::baseline_forward_ms(Workbench& bench) {
  AttentionSettings settings = state_.attention;
  settings.p = done_ % 2 ? 3.0 : 4.0;  // the value this round's change sets
  double milliseconds = 0.0;
  bench.run_on_panels_worker([&] { milliseconds = run_inference(*model_, prepared_, settings).milliseconds; });
  return milliseconds;
}

void GuiBenchmark::between_frames(Workbench& bench) {
  if (baseline_taken_ || waiting_ || finished() || !bench.settled() || !bench.outcome) return;
  if (!changes_p()) {  // clicks and layer changes are timed without a baseline forward
    baseline_taken_ = true;
    return;
  }
  PRounds& rounds = p_rounds();
  if (rounds.baselines.empty()) baseline_forward_ms(bench);  // warm-up
  rounds.baselines.push_back(baseline_forward_ms(bench));
  baseline_taken_ = true;
}

bool GuiBenchmark::before_update(Workbench& bench) {
  if (!baseline_taken_ || waiting_ || finished()) return false;
  const InferenceOutcome& shown = *bench.outcome;
  if (changes_p()) {
    bench.state.attention.p = done_ % 2 ? 3.0 : 4.0;  // alternating values: every change needs a forward
  } else if (change() == Change::Query) {
    click_another_query(bench);
  } else if (change() == Change::Cancel) {
    bench.state.analysis = "spectrum";
    bench.state.ranks = RankMode::Exact;
    tokens_ = shown.layout.total_tokens();
  } else {
    bench.state.layer = shown.layer == 0 ? shown.depth - 1 : shown.layer - 1;
  }
  changed_at_ = Clock::now();
  waiting_ = true;
  frames_this_run_ = 0;
  return true;
}

// A click on a patch of the shown layer's grid, a different one every round.
void GuiBenchmark::click_another_query(Workbench& bench) {
  const TokenLayout& grid = bench.outcome->layout;
  const int row = (grid.grid_h / 4 + 7 * done_) % std::max(1, grid.grid_h);
  const int col = (grid.grid_w / 3 + 5 * done_) % std::max(1, grid.grid_w);
  bench.state.query = QuerySpec::patch(row, col);
}

std::optional<ImVec2> GuiBenchmark::pointer(const Workbench& bench) const {
  if (change() != Change::PHovering || bench.drawn.views.empty()) return std::nullopt;
  // Across the map's middle row, 7 px a frame, so the highlighted patch and the tooltip's text
  // change as they do under a hand.
  const DrawnView& map = bench.drawn.views.front();
  const float span = std::max(1.0f, map.width - 2.0f);
  return ImVec2(map.x + 1.0f + std::fmod(7.0f * float(frames_), span), map.y + 0.5f * map.height);
}

void GuiBenchmark::after_update(Workbench& bench) {
  if (waiting_ && !awaited_id_) awaited_id_ = bench.worker.submitted_id;
}

void GuiBenchmark::after_frame(Workbench& bench, double frame_ms, double cpu_ms, bool was_running, Frame frame) {
  ++frames_;
  frames_unchanged_ += frame == Frame::Unchanged;
  frames_held_back_ += frame == Frame::HeldBack;
  const bool drawn = frame == Frame::Drawn;
  if (was_running && waiting_ && drawn) ++frames_this_run_;
  if (drawn && was_running && change() != Change::PAtRest) {  // the frame times with the pointer moving
    frames_running_.push_back(frame_ms);
    frames_running_cpu_.push_back(cpu_ms);
  } else if (drawn && !was_running) {
    frames_idle_.push_back(frame_ms);
  }
  if (waiting_ && change() == Change::Cancel && cancel_step_ != CancelStep::Click) {
    // The request's panels arrive before its spectra (a long view): only the whole outcome counts.
    const bool spectra_shown =
        bench.outcome && bench.outcome->request_id == awaited_id_ && !bench.outcome->analysis_running;
    if (cancel_step_ == CancelStep::Spectra &&
        (spectra_shown || (bench.worker.busy && bench.worker.progress.second > 0))) {
      // The full SVDs are under way (or were done before a frame saw them): cancel, as the button does.
      spectra_finished_first_ = spectra_shown;
      stopped_before_cancel_ = bench.worker.runs_stopped;
      if (!spectra_shown) bench.cancel_run();
      cancelled_at_ = Clock::now();
      cancel_step_ = CancelStep::Stopping;
    } else if (cancel_step_ == CancelStep::Stopping && !bench.worker.busy) {
      stop_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - cancelled_at_).count();
      stopped_mid_way_ = bench.worker.runs_stopped > stopped_before_cancel_;
      bench.state.analysis = state_.analysis;
      bench.state.ranks = state_.ranks;
      click_another_query(bench);
      changed_at_ = Clock::now();
      awaited_id_ = 0;  // the click's request, submitted by the next frame's update
      cancel_step_ = CancelStep::Click;
    }
    return;
  }
  if (!waiting_ || !bench.outcome || bench.outcome->request_id != awaited_id_) return;
  const double latency = std::chrono::duration<double, std::milli>(Clock::now() - changed_at_).count();
  if (change() == Change::Cancel) {
    click_after_cancel_ms_ = latency;
    waiting_ = false;
    ++done_;
    return;
  }
  if (changes_p()) {
    PRounds& rounds = p_rounds();
    rounds.latencies.push_back(latency);
    rounds.ratios.push_back(latency / rounds.baselines.back());
    rounds.worker_forwards.push_back(bench.outcome->panels.front().forward_ms);
    rounds.gui_side.push_back(latency - bench.outcome->total_ms);
    rounds.frames_while_running.push_back(frames_this_run_);
  } else {
    (change() == Change::Query ? click_latencies_ : layer_latencies_).push_back(latency);
    if (!bench.outcome->forward_reused) ++reran_forward_;
  }
  waiting_ = false;
  baseline_taken_ = false;
  awaited_id_ = 0;
  ++done_;
}

void GuiBenchmark::report(std::ostream& out, const Workbench& bench) const {
  const InferenceOutcome& outcome = *bench.outcome;
  out << "gui benchmark: " << changes_
      << " rounds each of a p change three ways (the pointer moving where nothing changes, across a map, at rest), a "
         "query click and a layer change, "
      << outcome.panels.front().description << " on " << outcome.model_family << " (" << outcome.depth << " blocks, "
      << outcome.heads << " heads, " << outcome.layout.grid_h << "x" << outcome.layout.grid_w << " grid), "
      << outcome.panels.size() << " panel(s), device " << outcome.device << ", window " << bench.options.width << "x"
      << bench.options.height << "\n  " << linear_backend_line();
  const auto p_rounds = [&](const PRounds& rounds, const char* heading) {
    if (rounds.latencies.empty()) return;
    // The slowest change beside its own forward and its round's plain one (latency / ratio): how
    // much of it was the machine's.
    const size_t slowest =
        size_t(std::max_element(rounds.latencies.begin(), rounds.latencies.end()) - rounds.latencies.begin());
    const auto under_100_ms =
        std::count_if(rounds.latencies.begin(), rounds.latencies.end(), [](double latency) { return latency < 100.0; });
    out << "  " << heading << "\n"
        << "    one forward pass (plain, one per round, median):    " << median(rounds.baselines) << " ms\n"
        << "    the worker's forward for the change (median):       " << median(rounds.worker_forwards) << " ms\n"
        << "    slider change -> updated pixels (median):           " << median(rounds.latencies) << " ms\n"
        << "    slider change -> updated pixels (max):              " << rounds.latencies[slowest]
        << " ms (that change's forward in the worker " << rounds.worker_forwards[slowest]
        << " ms, its round's plain forward " << rounds.latencies[slowest] / rounds.ratios[slowest] << " ms); "
        << under_100_ms << " of " << rounds.latencies.size() << " under 100 ms\n"
        << "    ratio to one forward (median over rounds):          " << median(rounds.ratios) << " x (target <= 1.2)\n"
        << "    of the latency, after the worker's result (median): " << median(rounds.gui_side)
        << " ms (wake, upload, render, glFinish)\n"
        << "    frames drawn while the forward ran (median):        " << median(rounds.frames_while_running) << "\n";
  };
  p_rounds(p_rounds_[int(Change::P)],
           "p changed with the pointer moving where nothing changes (frames at 60 Hz, skipped when they would "
           "show what is on screen):");
  p_rounds(p_rounds_[int(Change::PHovering)],
           "p changed with the pointer moving across a map (its tooltip and highlighted patch follow it: every "
           "frame differs; at 60 Hz, or while the forward runs as often as rendering may share the cores):");
  p_rounds(p_rounds_[int(Change::PAtRest)],
           "p changed with the pointer at rest (the frames the workbench draws with no input: two, then it "
           "sleeps until the result wakes it; a click on the slider, a typed value, a drag's end):");
  out << "  frames skipped as showing the pixels already on screen: " << frames_unchanged_ << " of " << frames_
      << " (same draw lists, same textures); held back while a forward shared the cores: " << frames_held_back_ << "\n"
      << "  frame time while inference runs, pointer moving: median " << median(frames_running_) << " ms, p95 "
      << percentile(frames_running_, 0.95) << " ms over " << frames_running_.size()
      << " frames (target <= 16 ms); CPU part (ImGui, uploads) median " << median(frames_running_cpu_)
      << " ms, the rest GL rendering to glFinish\n"
      << "  frame time idle: median " << median(frames_idle_) << " ms over " << frames_idle_.size() << " frames\n"
      << "  click on another query -> updated pixels: median " << median(click_latencies_) << " ms, max "
      << percentile(click_latencies_, 1.0) << " ms over " << click_latencies_.size() << " (target <= 100 ms)\n"
      << "  layer change -> updated pixels: median " << median(layer_latencies_) << " ms, max "
      << percentile(layer_latencies_, 1.0) << " ms over " << layer_latencies_.size() << " (target <= 300 ms)\n"
      << "  clicks and layer changes that ran a forward: " << reran_forward_ << " (the captured q, k serve them)\n";
  if (spectra_finished_first_)
    out << "  cancelled spectrum: none; every head's exact spectrum at " << tokens_
        << " tokens was done before a frame saw it running (a cheap exact path)\n";
  else
    out << "  cancelled spectrum (every head's full SVD at " << tokens_ << " tokens): the worker "
        << (stopped_mid_way_ ? "stopped mid-way " : "finished the spectra (not stopped) ") << stop_ms_
        << " ms after cancel; the next click -> updated pixels " << click_after_cancel_ms_ << " ms\n";
}

}  // namespace attnscope
