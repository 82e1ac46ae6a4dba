#include "viewer/video_source.h"

#include "core/cv_image.h"
#include "core/excerpt.h"
#include "core/image.h"

#include <chrono>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>
#include <stdexcept>

namespace attnscope {

struct VideoCaptureHolder {
  cv::VideoCapture capture;
};

VideoSource::VideoSource(const std::string& source, int64_t max_pixels, std::function<void()> wake)
    : source_(source), max_pixels_(max_pixels), wake_(std::move(wake)), capture_(new VideoCaptureHolder) {
  const std::string camera_prefix = "camera:";
  if (source.rfind(camera_prefix, 0) == 0) {
    const std::string number = source.substr(camera_prefix.size());
    if (number.empty() || number.size() > 4 || number.find_first_not_of("0123456789") != std::string::npos)
      throw std::runtime_error("bad camera '" + excerpt(source) + "' (expected camera:N, N a number from 0)");
    capture_->capture.open(std::stoi(number));
  } else {
    capture_->capture.open(source);
    const double fps = capture_->capture.get(cv::CAP_PROP_FPS);
    frame_seconds_ = fps > 0 && fps < 1000 ? 1.0 / fps : 1.0 / 30.0;
  }
  if (!capture_->capture.isOpened())
    throw std::runtime_error(
        "cannot open video source " + excerpt(source) +
        (source.rfind(camera_prefix, 0) == 0 ? " (no such camera)" : " (not a video OpenCV reads)"));
  // The size the stream declares decides before a frame is decoded (a 3.6 MB AVI can declare
  // 16000 x 16000 frames).
  const auto width = int64_t(capture_->capture.get(cv::CAP_PROP_FRAME_WIDTH));
  const auto height = int64_t(capture_->capture.get(cv::CAP_PROP_FRAME_HEIGHT));
  if (const std::string problem = pixel_budget_problem(width, height, max_pixels_); !problem.empty())
    throw std::runtime_error("video " + excerpt(source) + " declares frames of " + problem);
  thread_ = std::thread([this] { read_loop(); });
}

VideoSource::~VideoSource() {
  stopping_ = true;
  thread_.join();
}

void VideoSource::read_loop() {
  // Nothing a decoder throws leaves this thread (an uncaught exception here ended the workbench):
  // reading stops, and error() says why.
  try {
    read_frames();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = "reading " + excerpt(source_) + " stopped: " + e.what();
  }
  finished_ = true;
  if (wake_) wake_();
}

std::string VideoSource::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void VideoSource::read_frames() {
  auto next = std::chrono::steady_clock::now();
  while (!stopping_) {
    cv::Mat bgr;
    if (!capture_->capture.read(bgr) || bgr.empty()) break;
    if (const std::string problem = pixel_budget_problem(bgr.cols, bgr.rows, max_pixels_); !problem.empty())
      throw std::runtime_error("a frame of " + problem);
    cv::Mat rgb;
    if (bgr.channels() == 1)
      cv::cvtColor(bgr, rgb, cv::COLOR_GRAY2RGB);
    else
      cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);  // OpenCV decodes to BGR
    auto frame = std::make_shared<const RgbImage>(to_rgb_image(rgb));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      newest_ = std::move(frame);
      ++newest_number_;
    }
    if (wake_) wake_();
    if (frame_seconds_ > 0) {
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(frame_seconds_));
      std::this_thread::sleep_until(next);
    }
  }
}

std::shared_ptr<const RgbImage> VideoSource::take_newer(uint64_t& seen) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (newest_number_ == seen) return nullptr;
  seen = newest_number_;
  return newest_;
}

}  // namespace attnscope
