// A generated glyph sample as the engine's images, for `analyze --glyph-seed`: the default build
// draws it (datasets/glyph_task.cpp); the engine-only build, which has no OpenCV to draw with,
// refuses (datasets/glyph_images_engine.cpp).
#pragma once

#include <cstdint>

#include "core/rgb_image.h"

namespace attnscope {

struct GlyphImages {
  RgbImage rgb;
  RgbImage mask;  // white on the target (its plate and digit), black elsewhere
};

// Sample `seed` of the glyph task (make_glyph_sample's defaults).
GlyphImages glyph_sample_images(uint64_t seed);

}  // namespace attnscope
