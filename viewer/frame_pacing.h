// How the workbench waits for its next frame while no pointer moves: after anything happens it
// draws two more frames (ImGui settles hover and focus over a couple), then sleeps until an event
// or a finished result wakes it, or, while something runs, 0.25 s at most (its progress moves).
// The interactive loop and the benchmark's rounds with the pointer at rest both pace by it
// (viewer/main_loop.cpp); no GLFW here, so the sequence is tested on its own.
#pragma once

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

}  // namespace attnscope
