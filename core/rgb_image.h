// The engine's image: 8-bit RGB pixels, rows top to bottom, 3 bytes a pixel and no padding. It
// needs nothing but the standard library, so the engine builds without OpenCV (CMake option
// ATTNSCOPE_ENGINE_ONLY); the workbench's drawing code converts with core/cv_image.h.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>

namespace attnscope {

class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Copies share the pixels, as cv::Mat's do (an inference result keeps its input for free);
// clone() copies them.
class RgbImage {
 public:
  RgbImage() = default;
  RgbImage(int rows, int cols);  // black; throws ImageError for a negative size
  int rows = 0, cols = 0;
  bool empty() const { return rows == 0 || cols == 0; }
  uint8_t* data() { return pixels_.get(); }
  const uint8_t* data() const { return pixels_.get(); }
  uint8_t* row(int y) { return pixels_.get() + size_t(y) * row_bytes(); }
  const uint8_t* row(int y) const { return pixels_.get() + size_t(y) * row_bytes(); }
  size_t row_bytes() const { return size_t(cols) * 3; }
  size_t bytes() const { return size_t(rows) * row_bytes(); }
  RgbImage clone() const;
  // The block of `height` rows and `width` columns whose top-left pixel is (top, left), copied.
  RgbImage crop(int top, int left, int height, int width) const;
  bool same_pixels(const RgbImage& other) const;

 private:
  std::shared_ptr<uint8_t[]> pixels_;
};

}  // namespace attnscope
