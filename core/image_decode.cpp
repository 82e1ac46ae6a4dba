// PNG and JPEG through libpng and libjpeg-turbo, the libraries OpenCV's imread uses for them, with
// OpenCV's default settings (no gamma correction, libjpeg's default IDCT and fancy upsampling).
// Errors longjmp back to the setjmp in the same function: nothing with a destructor is created
// between the two, so no C++ object is skipped.
#include "core/image_decode.h"

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "core/excerpt.h"

namespace attnscope {
namespace {

struct FileCloser {
  void operator()(FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<FILE, FileCloser>;

File open_file(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) throw ImageError("cannot open " + path + ": " + std::strerror(errno));
  return file;
}

struct PngFailure {
  std::jmp_buf jump;
  char message[200] = {};
};

void png_error_handler(png_structp png, png_const_charp message) {
  auto* failure = static_cast<PngFailure*>(png_get_error_ptr(png));
  std::snprintf(failure->message, sizeof failure->message, "%s", message);
  std::longjmp(failure->jump, 1);
}

void png_warning_handler(png_structp, png_const_charp) {}  // as OpenCV: warnings are not failures

struct JpegFailure {
  jpeg_error_mgr manager;  // first, so libjpeg's pointer to it is a pointer to this
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
};

void jpeg_error_handler(j_common_ptr info) {
  auto* failure = reinterpret_cast<JpegFailure*>(info->err);
  info->err->format_message(info, failure->message);
  std::longjmp(failure->jump, 1);
}

void jpeg_silent_message(j_common_ptr) {}

}  // namespace

RgbImage decode_png(const std::string& path, const ImageHeader& header) {
  File file = open_file(path);
  RgbImage image;
  PngFailure failure;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &failure, png_error_handler, png_warning_handler);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    throw ImageError("PNG decoder: out of memory");
  }
  // Everything below that can fail jumps back here; only plain values are set after this point.
  png_bytep* volatile row_pointers = nullptr;
  if (setjmp(failure.jump)) {
    delete[] row_pointers;
    png_destroy_read_struct(&png, &info, nullptr);
    throw ImageError(std::string("PNG decoder: ") + failure.message);
  }
  png_set_user_limits(png, png_uint_32(header.width), png_uint_32(header.height));
  png_init_io(png, file.get());
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info), height = png_get_image_height(png, info);
  const int colour_type = png_get_color_type(png, info);
  // Palette and tRNS -> RGB(A), 1/2/4-bit gray -> 8 bits, 16 bits -> the high byte, gray -> RGB,
  // alpha dropped.
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  if (!(colour_type & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != size_t(width) * 3) png_error(png, "unexpected row layout after conversion");
  if (int64_t(width) != header.width || int64_t(height) != header.height) png_error(png, "size differs from header");
  // `image` outlives the setjmp frame in memory (its address is taken), so a jump after this
  // assignment still destroys it properly.
  image = RgbImage(int(height), int(width));
  row_pointers = new png_bytep[height];
  for (png_uint_32 y = 0; y < height; ++y) row_pointers[y] = image.row(int(y));
  png_read_image(png, row_pointers);
  png_read_end(png, nullptr);
  delete[] row_pointers;
  png_destroy_read_struct(&png, &info, nullptr);
  return image;
}

RgbImage decode_jpeg(const std::string& path, const ImageHeader& header) {
  File file = open_file(path);
  RgbImage image;
  JpegFailure failure;
  jpeg_decompress_struct info;
  info.err = jpeg_std_error(&failure.manager);
  failure.manager.error_exit = jpeg_error_handler;
  failure.manager.output_message = jpeg_silent_message;
  if (setjmp(failure.jump)) {
    jpeg_destroy_decompress(&info);
    throw ImageError(std::string("JPEG decoder: ") + failure.message);
  }
  jpeg_create_decompress(&info);
  jpeg_stdio_src(&info, file.get());
  jpeg_read_header(&info, TRUE);
  if (info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK) {
    std::snprintf(failure.message, sizeof failure.message,
                  "a CMYK JPEG; this build decodes gray and colour JPEGs only (convert it to RGB)");
    std::longjmp(failure.jump, 1);
  }
  const bool gray = info.num_components == 1;
  info.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&info);
  if (int64_t(info.output_width) != header.width || int64_t(info.output_height) != header.height) {
    std::snprintf(failure.message, sizeof failure.message, "size differs from the header");
    std::longjmp(failure.jump, 1);
  }
  image = RgbImage(int(info.output_height), int(info.output_width));
  while (info.output_scanline < info.output_height) {
    uint8_t* row = image.row(int(info.output_scanline));
    JSAMPROW rows[1] = {row};
    jpeg_read_scanlines(&info, rows, 1);
    if (gray)  // spread in place from the right: pixel x's gray byte sits at x, its RGB at 3x
      for (int x = int(info.output_width) - 1; x >= 0; --x) row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = row[x];
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return image;
}

bool jpeg_ends_early(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buffer(size_t(1) << 16);
  size_t filled = 0, at = 0;
  const auto next = [&]() -> int {  // the next byte, -1 at the end of the file
    if (at == filled) {
      in.read(buffer.data(), std::streamsize(buffer.size()));
      filled = size_t(in.gcount());
      at = 0;
      if (filled == 0) return -1;
    }
    return static_cast<unsigned char>(buffer[at++]);
  };
  if (next() != 0xFF || next() != 0xD8) return false;
  bool in_scan = false;  // after the first SOS: entropy-coded bytes between markers
  for (int byte = next(); byte >= 0; byte = next()) {
    if (byte != 0xFF) {
      if (!in_scan) return false;  // not a marker where one belongs: the decoder names that
      continue;
    }
    int marker = next();
    while (marker == 0xFF) marker = next();  // fill bytes
    if (marker < 0) return true;
    // A stuffed zero, a restart marker or TEM: no length, still the same scan.
    if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;
    if (marker == 0xD9) return false;
    const int high = next(), low = next();
    if (low < 0) return true;
    for (int skip = high * 256 + low - 2; skip > 0; --skip)
      if (next() < 0) return true;
    if (marker == 0xDA) in_scan = true;
  }
  return true;
}

std::string png_chunk_problem(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char signature[8];
  if (!in.read(signature, 8) || std::memcmp(signature, "\x89PNG\r\n\x1a\n", 8) != 0)
    return "";  // not a PNG: not judged here
  std::vector<unsigned char> data;
  for (uint64_t at = 8;;) {
    unsigned char head[8];
    in.read(reinterpret_cast<char*>(head), 8);
    if (in.gcount() == 0)
      return "a truncated PNG: the file ends at byte " + std::to_string(at) + " before its IEND chunk";
    if (in.gcount() < 8) return "a truncated PNG: the file ends inside a chunk header at byte " + std::to_string(at);
    const uint32_t length = uint32_t(head[0]) << 24 | uint32_t(head[1]) << 16 | uint32_t(head[2]) << 8 | head[3];
    const std::string type(reinterpret_cast<const char*>(head + 4), 4);
    if (length > 0x7FFFFFFFu)
      return "a corrupt PNG: chunk at byte " + std::to_string(at) + " declares a length over 2^31";
    uint32_t crc = uint32_t(crc32(0L, head + 4, 4));
    // The data in pieces of at most 1 MB: a declared length is not an allocation.
    for (uint32_t left = length; left > 0;) {
      data.resize(std::min<uint32_t>(left, 1u << 20));
      in.read(reinterpret_cast<char*>(data.data()), std::streamsize(data.size()));
      if (size_t(in.gcount()) < data.size())
        return "a truncated PNG: its " + excerpt(type) + " chunk at byte " + std::to_string(at) + " declares " +
               std::to_string(length) + " bytes and the file ends before them (a download cut short?)";
      crc = uint32_t(crc32(crc, data.data(), uInt(data.size())));
      left -= uint32_t(data.size());
    }
    unsigned char stored[4];
    if (!in.read(reinterpret_cast<char*>(stored), 4))
      return "a truncated PNG: the file ends before the CRC of its " + excerpt(type) + " chunk";
    const uint32_t expected =
        uint32_t(stored[0]) << 24 | uint32_t(stored[1]) << 16 | uint32_t(stored[2]) << 8 | stored[3];
    if (crc != expected)
      return "a corrupt PNG: its " + excerpt(type) + " chunk at byte " + std::to_string(at) +
             " fails its CRC check (damaged bytes; download or save it again)";
    if (type == "IEND") return "";
    at += 12 + uint64_t(length);
  }
}

RgbImage decode_png_or_jpeg(const std::string& path, const ImageHeader& header) {
  if (header.format == "PNG") return decode_png(path, header);
  if (header.format == "JPEG") return decode_jpeg(path, header);
  throw ImageError("a " + header.format +
                   " file: the engine-only build (ATTNSCOPE_ENGINE_ONLY) decodes PNG and JPEG; convert it to "
                   "PNG, or use the full build, whose OpenCV reads it");
}

}  // namespace attnscope
