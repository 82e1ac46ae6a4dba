// decode_image_pixels in the engine-only build: PNG and JPEG by libpng and libjpeg-turbo, which
// travel with it; the formats only OpenCV reads are refused with what to do.
#include "core/image_decode.h"

namespace attnscope {

RgbImage decode_image_pixels(const std::string& path, const ImageHeader& header) {
  return decode_png_or_jpeg(path, header);
}

}  // namespace attnscope
