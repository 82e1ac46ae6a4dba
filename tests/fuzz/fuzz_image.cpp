// Fuzz target: any bytes as an image file: the header reader, OpenCV's decoders behind it, the
// conversion to RGB and timm's resize. The pixel limit is lower than the default so that every
// input decodes in well under a second.
#include <exception>

#include "core/image.h"
#include "core/image_header.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnscope;
  const std::string path = fuzz::input_file("image", data, size);
  try {
    read_image_header(path);
  } catch (const std::exception&) {
  }
  try {
    const cv::Mat rgb = load_image_rgb(path, int64_t(1) << 22);
    prepare_image(rgb, ResizeMode::Timm, 32, 32);
  } catch (const std::exception&) {
  }
  return 0;
}
