#include "core/rgb_image.h"

#include <cstring>
#include <string>

namespace attnscope {

RgbImage::RgbImage(int rows_, int cols_) : rows(rows_), cols(cols_) {
  if (rows_ < 0 || cols_ < 0)
    throw ImageError("an image of " + std::to_string(cols_) + "x" + std::to_string(rows_) + " pixels");
  if (!empty()) pixels_.reset(new uint8_t[bytes()]());
}

RgbImage RgbImage::clone() const {
  RgbImage copy(rows, cols);
  if (!empty()) std::memcpy(copy.data(), data(), bytes());
  return copy;
}

RgbImage RgbImage::crop(int top, int left, int height, int width) const {
  if (top < 0 || left < 0 || height < 0 || width < 0 || top + height > rows || left + width > cols)
    throw ImageError("crop of " + std::to_string(width) + "x" + std::to_string(height) + " at (" +
                     std::to_string(left) + ", " + std::to_string(top) + ") outside a " + std::to_string(cols) + "x" +
                     std::to_string(rows) + " image");
  RgbImage block(height, width);
  for (int y = 0; y < height; ++y) std::memcpy(block.row(y), row(top + y) + size_t(left) * 3, block.row_bytes());
  return block;
}

bool RgbImage::same_pixels(const RgbImage& other) const {
  return rows == other.rows && cols == other.cols && (empty() || std::memcmp(data(), other.data(), bytes()) == 0);
}

}  // namespace attnscope
