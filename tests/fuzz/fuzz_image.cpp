// Fuzz target: any bytes as an image file: the header reader, OpenCV's decoders behind it, the
// engine-only build's libpng and libjpeg-turbo decoders, the conversion to RGB and the resampler.
// The pixel limit is lower than the default and the resize squashes (timm's would upscale a
// 12 x 18185 strip to 36 x 54555 first) so that every input runs in well under a second even with
// ASan; the timm path's bounds have their own tests.
#include <algorithm>
#include <exception>

#include "core/image.h"
#include "core/image_decode.h"
#include "core/image_header.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attnscope;
  const std::string path = fuzz::input_file("image", data, size);
  try {
    const ImageHeader header = read_image_header(path);
    // The engine-only decoders get what passes the same --max-pixels guard load_image_rgb applies.
    if (header.width <= (int64_t(1) << 20) / std::max<int64_t>(header.height, 1)) decode_png_or_jpeg(path, header);
  } catch (const std::exception&) {
  }
  try {
    const RgbImage rgb = load_image_rgb(path, int64_t(1) << 20);
    prepare_image(rgb, ResizeMode::Fit, 32, 32);
  } catch (const std::exception&) {
  }
  return 0;
}
