#include "core/output_files.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace attnscope {

void OutputFiles::add_png(const std::string& name, const cv::Mat& rgb) {
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  std::vector<uint8_t> bytes;
  if (!cv::imencode(".png", bgr, bytes)) throw std::runtime_error("cannot encode PNG for " + name);
  add_bytes(name, std::string(bytes.begin(), bytes.end()));
}

}  // namespace attnscope
