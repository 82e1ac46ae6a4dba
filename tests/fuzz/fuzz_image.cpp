// Fuzz target: any bytes as an image file: the header reader, OpenCV's decoders behind it, the
// conversion to RGB and the resampler. The pixel limit is lower than the default and the resize
// squashes (timm's would upscale a 12 x 18185 strip to 36 x 54555 first) so that every input runs
// in well under a second even with ASan; the timm path's bounds have their own tests.
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
    const cv::Mat rgb = load_image_rgb(path, int64_t(1) << 20);
    prepare_image(rgb, ResizeMode::Fit, 32, 32);
  } catch (const std::exception&) {
  }
  return 0;
}
