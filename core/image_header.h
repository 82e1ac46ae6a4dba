// An image's width and height read from its header alone, for every format OpenCV 4.6 decodes
// (PNG, JPEG, BMP, WebP, TIFF, PNM/PAM, PFM, Sun raster, Radiance HDR, OpenEXR, JPEG 2000), so
// that a tiny file declaring a huge image is refused before a single pixel is decoded.
#pragma once

#include <cstdint>
#include <string>

namespace attnscope {

struct ImageHeader {
  std::string format;  // "PNG", "JPEG", ...
  int64_t width = 0, height = 0;
  int64_t pixels() const { return width * height; }
};

// Reads the header of the image file at `path` (seeking where the format says: JPEG frames
// follow any number of segments, a TIFF directory can be anywhere); throws std::runtime_error
// saying what is wrong (an unknown format, a truncated or malformed header).
ImageHeader read_image_header(const std::string& path);

// The image format a file's first 16 bytes name ("PNG", "JPEG", "BMP", "WebP", "TIFF", "PNM", "PFM",
// "Sun raster", "Radiance HDR", "OpenEXR", "JP2", "J2K"), or "" for none: read_image_header's
// dispatch, and what names an image given where a checkpoint belongs.
std::string image_format_of(const std::string& head);

}  // namespace attnscope
