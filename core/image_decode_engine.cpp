// decode_image_pixels in the engine-only build: PNG and JPEG by libpng and libjpeg-turbo, which
// travel with it; the formats only OpenCV reads are refused with what to do.
#include "core/image_decode.h"

namespace attnscope {

RgbImage decode_image_pixels(const std::string& path, const ImageHeader& header) {
  if (header.format == "PNG") return decode_png(path, header);
  if (header.format == "JPEG") return decode_jpeg(path, header);
  throw ImageError("a " + header.format +
                   " file: the engine-only build (ATTNSCOPE_ENGINE_ONLY) decodes PNG and JPEG; convert it to "
                   "PNG, or use the full build, whose OpenCV reads it");
}

}  // namespace attnscope
