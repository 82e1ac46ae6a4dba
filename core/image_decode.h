// Decoding an image file's pixels into 8-bit RGB, once core/image.cpp has checked the file and its
// header. Two implementations of decode_image_pixels: OpenCV's imread for every format it reads
// (core/image_decode_opencv.cpp, the default build) and libpng/libjpeg-turbo for PNG and JPEG
// (core/image_decode_engine.cpp, the engine-only build, whose libraries travel to a GPU machine).
// Both give the same pixels: OpenCV decodes PNG and JPEG with these very libraries, and
// ImageDecode.* compares the two on every bundled image.
#pragma once

#include <string>

#include "core/image_header.h"
#include "core/rgb_image.h"

namespace attnscope {

// As PIL's Image.open(...).convert("RGB") for the files timm pipelines read: 16-bit samples keep
// their high byte, gray is repeated into the three channels, alpha is dropped (not blended), the
// EXIF orientation is ignored. Throws ImageError with the decoder's reason.
RgbImage decode_image_pixels(const std::string& path, const ImageHeader& header);

// libpng (palette, gray, 1-16 bits, alpha, interlaced) and libjpeg-turbo (gray, YCbCr, RGB; CMYK
// is refused), with the same conversions.
RgbImage decode_png(const std::string& path, const ImageHeader& header);
RgbImage decode_jpeg(const std::string& path, const ImageHeader& header);

// Whether a JPEG file ends before its end-of-image marker (a download cut short): libjpeg, in both
// builds, fills the missing rows with gray and says so only as a warning, where PIL (and so a timm
// pipeline) refuses the file ("image file is truncated"). Walks the marker segments to the first
// scan, then the entropy-coded data for the marker, 64 KB at a time; data after the marker is
// allowed, as PIL allows it. A file that is not a JPEG is not judged (false).
bool jpeg_ends_early(const std::string& path);

// What is wrong with a PNG's chunk structure, or "" when nothing: a chunk that runs past the end of
// the file or a file that ends before IEND (a download cut short), a chunk whose CRC does not match
// (damaged bytes). libpng refuses both too, but only after writing "libpng error: ..." to stderr
// from inside OpenCV, and OpenCV then calls the file "not a supported image format".
std::string png_chunk_problem(const std::string& path);

// decode_png or decode_jpeg as the header's format says; any other format is refused with what to
// do (the engine-only build's decode_image_pixels).
RgbImage decode_png_or_jpeg(const std::string& path, const ImageHeader& header);

}  // namespace attnscope
