// The workbench's latency benchmark (`attnscope gui --bench N`): in N rounds it times one plain
// forward pass, then changes p as a slider would and times until the frame showing the new result
// has been drawn and finished by GL, with frames at 60 Hz meanwhile, as while the pointer moves over
// parts of the window that do not change (such frames are skipped, as the workbench skips them); it
// also records frame times while inference runs. N more rounds do the same with the pointer moving
// across the first map, so its tooltip and highlighted patch follow it and every frame differs (drawn
// as often as viewer/frame_pacing.h's SharedCoresPace lets a frame with nothing new be drawn). N
// more change p with the pointer at rest: the frames are then the ones the workbench draws with no
// input (two, then it sleeps until the result wakes it), as after a click on the slider or the end
// of a drag. Then N clicks on another query patch and N changes of the layer, each timed the same
// way: they reuse the forward (the captured q, k), and the report says whether each did. Last,
// once: the exact spectrum of every head is asked for (the matrix view with --ranks exact),
// cancelled as soon as the worker reports progress, and a click on another query follows; it times
// how long the worker took to stop and the click's latency after it.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <vector>

#include <imgui.h>

#include <opencv2/core.hpp>

#include "models/model_loader.h"
#include "session/app_state.h"

namespace attnscope {

class Workbench;

class GuiBenchmark {
 public:
  GuiBenchmark(const AppState& state, int changes);  // loads its own copy of the model for the baseline

  void between_frames(Workbench& bench);  // a round's baseline forward, outside any timed frame
  // The round's change, once the previous one is on screen; true when it made one.
  bool before_update(Workbench& bench);
  void after_update(Workbench& bench);
  // How the loop dealt with a frame: drawn (rendered and swapped), skipped as showing the pixels on
  // screen, or held back while a forward shares the cores (viewer/frame_pacing.h).
  enum class Frame { Drawn, Unchanged, HeldBack };
  void after_frame(Workbench& bench, double frame_ms, double cpu_ms, bool was_running, Frame frame);
  bool finished() const { return done_ >= 5 * changes_ + 1; }
  // While a change made with the pointer at rest waits for its result: the loop then paces its
  // frames as the workbench does with no input, not at 60 Hz.
  bool pointer_at_rest() const { return waiting_ && change() == Change::PAtRest; }
  // Where the pointer is in this frame, in the rounds that move it across the first map drawn.
  std::optional<ImVec2> pointer(const Workbench& bench) const;
  void report(std::ostream& out, const Workbench& bench) const;

 private:
  using Clock = std::chrono::steady_clock;
  // One plain forward on the panels' worker thread: with the OpenMP team its forwards use, as a
  // second thread's team would make both wait asleep between regions (models/cpu_threads.h).
  double baseline_forward_ms(Workbench& bench);

  int changes_ = 0, done_ = 0;
  bool baseline_taken_ = false, waiting_ = false;
  uint64_t awaited_id_ = 0;
  Clock::time_point changed_at_;
  AppState state_;
  std::optional<LoadedModel> model_;
  RgbImage prepared_;
  // Rounds [0, N): p changes with the pointer moving; [N, 2N): moving over a map; [2N, 3N): at
  // rest; [3N, 4N): query clicks; [4N, 5N): layer changes; 5N: the cancel.
  enum class Change { P, PHovering, PAtRest, Query, Layer, Cancel };
  Change change() const {
    return done_ < changes_       ? Change::P
           : done_ < 2 * changes_ ? Change::PHovering
           : done_ < 3 * changes_ ? Change::PAtRest
           : done_ < 4 * changes_ ? Change::Query
           : done_ < 5 * changes_ ? Change::Layer
                                  : Change::Cancel;
  }
  bool changes_p() const { return change() <= Change::PAtRest; }
  void click_another_query(Workbench& bench);
  // The cancel round's steps: the spectra asked for, cancel pressed, the click after it.
  enum class CancelStep { Spectra, Stopping, Click };
  CancelStep cancel_step_ = CancelStep::Spectra;
  Clock::time_point cancelled_at_;
  double stop_ms_ = -1.0, click_after_cancel_ms_ = -1.0;
  int tokens_ = 0;
  bool spectra_finished_first_ = false;  // too quick to cancel (the exact path was cheap)
  int stopped_before_cancel_ = 0;        // the worker's count of runs stopped mid-way, at the cancel
  bool stopped_mid_way_ = false;         // the spectra's run stopped, rather than finishing unseen
  // Per p change, with the pointer moving and at rest.
  struct PRounds {
    std::vector<double> baselines, latencies, ratios, worker_forwards, gui_side, frames_while_running;
  };
  PRounds p_rounds_[3];                                     // indexed by Change::P, PHovering, PAtRest
  PRounds& p_rounds() { return p_rounds_[int(change())]; }  // the current p round's
  int frames_this_run_ = 0;
  std::vector<double> click_latencies_, layer_latencies_;
  int reran_forward_ = 0;  // clicks and layer changes whose result ran a forward (should be none)
  std::vector<double> frames_running_, frames_running_cpu_, frames_idle_;  // drawn frames' times
  int frames_ = 0, frames_unchanged_ = 0, frames_held_back_ = 0;
};

}  // namespace attnscope
