// The engine-only build's glyph_sample_images: the glyph task draws with OpenCV, which that build
// leaves out.
#include <stdexcept>

#include "datasets/glyph_images.h"

namespace attnscope {

GlyphImages glyph_sample_images(uint64_t) {
  throw std::invalid_argument(
      "--glyph-seed draws its sample with OpenCV, which this engine-only build leaves out: give --image (and "
      "--object-mask), or run the default build");
}

}  // namespace attnscope
