// Errors longjmp back to the setjmp in encode_png: nothing with a destructor is created between the
// two, and the write callback never lets an exception into libpng's C frames.
#include "core/image_encode.h"

#include <csetjmp>
#include <cstdio>
#include <new>

#include <png.h>
#include <zlib.h>

#include "core/atomic_file.h"

namespace attnscope {

namespace {

struct PngWriter {
  std::jmp_buf jump;
  char message[200] = {};
  std::string* bytes = nullptr;
};

void encoder_error(png_structp png, png_const_charp message) {
  auto* writer = static_cast<PngWriter*>(png_get_error_ptr(png));
  std::snprintf(writer->message, sizeof writer->message, "%s", message);
  std::longjmp(writer->jump, 1);
}

void encoder_warning(png_structp, png_const_charp) {}

void append_bytes(png_structp png, png_bytep data, png_size_t length) {
  bool appended = true;
  try {
    static_cast<PngWriter*>(png_get_io_ptr(png))->bytes->append(reinterpret_cast<const char*>(data), length);
  } catch (const std::bad_alloc&) {
    appended = false;
  }
  if (!appended) png_error(png, "out of memory");
}

void flush_nothing(png_structp) {}

}  // namespace

std::string encode_png(const RgbImage& rgb) {
  if (rgb.empty()) throw ImageError("PNG encoder: an empty image");
  std::string bytes;
  PngWriter writer;
  writer.bytes = &bytes;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &writer, encoder_error, encoder_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    throw ImageError("PNG encoder: out of memory");
  }
  if (setjmp(writer.jump)) {
    png_destroy_write_struct(&png, &info);
    throw ImageError(std::string("PNG encoder: ") + writer.message);
  }
  png_set_write_fn(png, &writer, append_bytes, flush_nothing);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
  png_set_compression_level(png, Z_BEST_SPEED);
  png_set_compression_strategy(png, Z_RLE);
  png_set_IHDR(png, info, png_uint_32(rgb.cols), png_uint_32(rgb.rows), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < rgb.rows; ++y) png_write_row(png, rgb.row(y));
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return bytes;
}

void write_png(const std::string& path, const RgbImage& rgb) {
  const std::string bytes = encode_png(rgb);
  write_file_atomically(path, [&](std::ostream& out) { out.write(bytes.data(), std::streamsize(bytes.size())); });
}

}  // namespace attnscope
