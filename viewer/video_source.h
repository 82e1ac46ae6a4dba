// Live input for the workbench: a camera or a video file read by OpenCV on its own thread, which
// keeps only the newest frame (the inference worker then drops whatever it cannot keep up with).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/rgb_image.h"

namespace attnscope {

class VideoSource {
 public:
  // `source`: a file path, or "camera:N". Throws std::runtime_error when it cannot be opened, or
  // when the frame size it declares is over `max_pixels` (--max-pixels, as for images).
  // `wake` is called from the reader thread when a new frame is there.
  VideoSource(const std::string& source, int64_t max_pixels, std::function<void()> wake);
  ~VideoSource();
  VideoSource(const VideoSource&) = delete;
  VideoSource& operator=(const VideoSource&) = delete;

  // The newest RGB frame if it is newer than `seen` (updating it), else null.
  std::shared_ptr<const RgbImage> take_newer(uint64_t& seen);
  const std::string& source() const { return source_; }
  bool finished() const { return finished_; }
  // Why reading stopped before the end (a frame over the budget, a decoder that failed or ran out
  // of memory); empty when it did not. Read once finished().
  std::string error() const;

 private:
  void read_loop();
  void read_frames();
  std::string source_;
  int64_t max_pixels_;
  std::function<void()> wake_;
  std::string error_;  // under mutex_
  mutable std::mutex mutex_;
  std::shared_ptr<const RgbImage> newest_;
  uint64_t newest_number_ = 0;
  std::atomic<bool> stopping_{false}, finished_{false};
  double frame_seconds_ = 0.0;  // a file plays at its own rate; a camera paces itself
  std::unique_ptr<struct VideoCaptureHolder> capture_;
  std::thread thread_;
};

}  // namespace attnscope
