// How the workbench waits for its next frame while no pointer moves: after anything happens it
// draws two more frames (ImGui settles hover and focus over a couple), then sleeps until an event
// or a finished result wakes it, or, while something runs, 0.25 s at most (its progress moves).
// The interactive loop and the benchmark's rounds with the pointer at rest both pace by it
// (viewer/main_loop.cpp); no GLFW here, so the sequence is tested on its own.
#pragma once

#include <algorithm>

namespace attnscope {

class RestingPace {
 public:
  enum class Wait {
    SettlingFrame,   // the next frame at once (on a display, at its vsync)
    EventOrTimeout,  // sleep until an event or a result, kRunningTimeoutSeconds at most
    Event,           // sleep until an event: an idle workbench uses no CPU
  };
  static constexpr double kRunningTimeoutSeconds = 0.25;

  Wait next(bool running) {
    if (settle_frames_ > 0) {
      --settle_frames_;
      return Wait::SettlingFrame;
    }
    settle_frames_ = 2;  // whatever wakes the loop draws its frame, then two more
    return running ? Wait::EventOrTimeout : Wait::Event;
  }
  void something_happened() { settle_frames_ = 2; }

 private:
  int settle_frames_ = 3;  // the first frames after the window opens
};

// While a run computes and GL rasterises on the same CPU cores (a software renderer: Xvfb, a
// remote or virtual display), each drawn frame takes the forward's cores: at 1600 x 1000 under
// llvmpipe a frame costs 10-13 ms, so a tooltip following the pointer at 60 Hz made a DeiT-S forward
// half as slow again. Then a frame that brings nothing new from the worker (a tooltip, a hover
// highlight, a slider's knob) waits until rendering has had at most a fifth of the time since the
// last frame drawn, and 40 ms at least: a frame redrawn in parts renders in 1-3 ms, but ImGui's
// build and the swap still take a core from the forward's threads, which wait for each other (25
// such frames a second while the forward runs; at 60 a second, 3-4 frames per DeiT-S forward, its
// redraw took 5-10 ms longer). When the result is expected within one more such wait, the frame
// waits for the result, which brings its changes along; a frame with a new result is drawn at
// once. Times are in seconds, from any fixed origin.
class SharedCoresPace {
 public:
  static constexpr double kMostRenderingShare = 0.2;
  static constexpr double kShortestIntervalWhileRunning = 0.040;

  // Seconds until a frame with nothing new from the worker may be drawn at `now`; 0: at once.
  // `result_expected_at`: when the running request should finish, from the last run's time (at or
  // before `now`: unknown, or late, and then nothing waits for it).
  double wait_before_drawing(double now, double result_expected_at) const {
    if (!drawn_) return 0.0;
    const double interval = std::max(kShortestIntervalWhileRunning, last_cost_ * (1.0 / kMostRenderingShare - 1.0));
    const double allowed = last_end_ + interval;
    if (now < allowed) return allowed - now;
    if (result_expected_at > now && result_expected_at <= now + interval) return result_expected_at - now;
    return 0.0;
  }
  // With no run: seconds until a frame with nothing new may be drawn, at most 60 a second. A
  // display's vsync paces frames so; a software rasteriser (Xvfb, a remote desktop) has none, and a
  // pointer moving over a map, its tooltip following, sends events at 100 Hz or more.
  static constexpr double kShortestFrameInterval = 1.0 / 60.0;
  double wait_for_frame_interval(double now) const {
    return std::max(0.0, last_end_ - last_cost_ + kShortestFrameInterval - now);
  }
  // A frame was rendered and presented from `start` to `end`.
  void drawn(double start, double end) {
    last_cost_ = std::max(0.0, end - start);
    last_end_ = end;
    drawn_ = true;
  }

 private:
  double last_end_ = 0.0, last_cost_ = 0.0;
  bool drawn_ = false;
};

}  // namespace attnscope
