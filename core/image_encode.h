// PNG encoding through libpng, with OpenCV's default settings for imencode(".png") (sub filter, zlib's
// fastest level, run-length strategy): the one encoder of every PNG attnscope writes, in both
// builds.
#pragma once

#include <string>

#include "core/rgb_image.h"

namespace attnscope {

// The PNG file's bytes of an 8-bit RGB image; throws ImageError for an empty image or when libpng
// fails (out of memory).
std::string encode_png(const RgbImage& rgb);

// encode_png written to `path` atomically (core/atomic_file.h).
void write_png(const std::string& path, const RgbImage& rgb);

}  // namespace attnscope
