// Image headers, format by format, as each format's specification lays them out. Every read is
// bounded by the file's size; a loop over segments or boxes always moves forward.
#include "core/image_header.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace attnscope {
namespace {

class HeaderReader {
 public:
  explicit HeaderReader(const std::string& path) : in_(path, std::ios::binary) {
    if (!in_) throw std::runtime_error("cannot open the file");
    in_.seekg(0, std::ios::end);
    size_ = static_cast<uint64_t>(in_.tellg());
  }

  uint64_t size() const { return size_; }

  // `count` bytes at `offset`, fewer at the end of the file. Small reads come from a window kept
  // in memory, so that walking a format byte by byte costs no system call per byte.
  std::string bytes(uint64_t offset, uint64_t count) {
    if (offset >= size_) return {};
    count = std::min(count, size_ - offset);
    if (count > kWindow) return read(offset, count);
    if (offset < window_offset_ || offset + count > window_offset_ + window_.size()) {
      window_offset_ = offset;
      window_ = read(offset, kWindow);
    }
    return window_.substr(offset - window_offset_, count);
  }
  // An unsigned number of `width` bytes at `offset`, big- or little-endian; throws past the end.
  uint64_t number(uint64_t offset, int width, bool big_endian) {
    const std::string b = bytes(offset, uint64_t(width));
    if (b.size() != size_t(width)) truncated();
    uint64_t value = 0;
    for (int i = 0; i < width; ++i) {
      const auto byte = static_cast<unsigned char>(b[size_t(big_endian ? i : width - 1 - i)]);
      value = (value << 8) | byte;
    }
    return value;
  }
  uint64_t be(uint64_t offset, int width) { return number(offset, width, true); }
  uint64_t le(uint64_t offset, int width) { return number(offset, width, false); }

  [[noreturn]] static void truncated() { throw std::runtime_error("the header is truncated"); }
  static constexpr uint64_t kWindow = 1 << 16;
  [[noreturn]] static void malformed(const std::string& format, const std::string& why) {
    throw std::runtime_error("malformed " + format + " header: " + why);
  }

 private:
  std::string read(uint64_t offset, uint64_t count) {
    count = std::min(count, size_ - offset);
    std::string out(count, '\0');
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(out.data(), static_cast<std::streamsize>(count));
    out.resize(static_cast<size_t>(in_.gcount()));
    return out;
  }

  std::ifstream in_;
  uint64_t size_ = 0;
  std::string window_;
  uint64_t window_offset_ = 0;
};

ImageHeader png(HeaderReader& r) {
  if (r.bytes(12, 4) != "IHDR") HeaderReader::malformed("PNG", "no IHDR chunk first");
  return {"PNG", int64_t(r.be(16, 4)), int64_t(r.be(20, 4))};
}

// Segments after SOI until a start-of-frame marker (SOF0..SOF15 without DHT, JPG and DAC).
ImageHeader jpeg(HeaderReader& r) {
  uint64_t at = 2;
  while (at < r.size()) {
    if (r.be(at, 1) != 0xFF) HeaderReader::malformed("JPEG", "no marker where one belongs");
    while (at < r.size() && r.be(at, 1) == 0xFF) ++at;  // fill bytes
    const uint64_t marker = r.be(at, 1);
    ++at;
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // no length
    if (marker == 0xD9 || marker == 0xDA) HeaderReader::malformed("JPEG", "no frame header before the image data");
    const uint64_t length = r.be(at, 2);
    if (length < 2) HeaderReader::malformed("JPEG", "a segment shorter than its length field");
    if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC)
      return {"JPEG", int64_t(r.be(at + 5, 2)), int64_t(r.be(at + 3, 2))};
    at += length;
  }
  HeaderReader::truncated();
}

ImageHeader bmp(HeaderReader& r) {
  const uint64_t info_size = r.le(14, 4);
  if (info_size == 12) return {"BMP", int64_t(r.le(18, 2)), int64_t(r.le(20, 2))};
  const auto width = int32_t(uint32_t(r.le(18, 4))), height = int32_t(uint32_t(r.le(22, 4)));
  // A negative height means rows top-down; its size is the same.
  return {"BMP", int64_t(width), height < 0 ? -int64_t(height) : int64_t(height)};
}

ImageHeader webp(HeaderReader& r) {
  const std::string chunk = r.bytes(12, 4);
  if (chunk == "VP8 ") {
    if (r.bytes(23, 3) != "\x9d\x01\x2a") HeaderReader::malformed("WebP", "no VP8 start code");
    return {"WebP", int64_t(r.le(26, 2) & 0x3FFF), int64_t(r.le(28, 2) & 0x3FFF)};
  }
  if (chunk == "VP8L") {
    if (r.be(20, 1) != 0x2F) HeaderReader::malformed("WebP", "no VP8L signature");
    const uint64_t bits = r.le(21, 4);
    return {"WebP", int64_t((bits & 0x3FFF) + 1), int64_t(((bits >> 14) & 0x3FFF) + 1)};
  }
  if (chunk == "VP8X") return {"WebP", int64_t(r.le(24, 3) + 1), int64_t(r.le(27, 3) + 1)};
  HeaderReader::malformed("WebP", "an unknown first chunk");
}

// The first image file directory's ImageWidth (256) and ImageLength (257), classic or BigTIFF.
ImageHeader tiff(HeaderReader& r) {
  const bool big_endian = r.bytes(0, 2) == "MM";
  const bool big_tiff = r.number(2, 2, big_endian) == 43;
  const int offset_width = big_tiff ? 8 : 4;
  const uint64_t directory = r.number(big_tiff ? 8 : 4, offset_width, big_endian);
  const uint64_t entries = r.number(directory, big_tiff ? 8 : 2, big_endian);
  const uint64_t entry_size = big_tiff ? 20 : 12, first = directory + (big_tiff ? 8 : 2);
  if (entries > (r.size() - std::min(r.size(), first)) / entry_size) HeaderReader::truncated();
  int64_t width = -1, height = -1;
  for (uint64_t i = 0; i < entries; ++i) {
    const uint64_t entry = first + i * entry_size;
    const uint64_t tag = r.number(entry, 2, big_endian), type = r.number(entry + 2, 2, big_endian);
    if (tag != 256 && tag != 257) continue;
    const uint64_t value_at = entry + (big_tiff ? 12 : 8);
    const int value_width = type == 3 ? 2 : type == 4 ? 4 : type == 16 ? 8 : 0;  // SHORT, LONG, LONG8
    if (value_width == 0) HeaderReader::malformed("TIFF", "an image size that is not an integer");
    (tag == 256 ? width : height) = int64_t(r.number(value_at, value_width, big_endian));
  }
  if (width < 0 || height < 0) HeaderReader::malformed("TIFF", "no ImageWidth or ImageLength");
  return {"TIFF", width, height};
}

// Whitespace-separated decimal tokens after `skip` bytes; '#' starts a comment to the line's end.
class TextTokens {
 public:
  TextTokens(HeaderReader& r, uint64_t skip) : text_(r.bytes(0, 65536)), at_(skip) {}
  std::string next() {
    while (at_ < text_.size()) {
      if (text_[at_] == '#') {
        while (at_ < text_.size() && text_[at_] != '\n') ++at_;
      } else if (std::isspace(static_cast<unsigned char>(text_[at_]))) {
        ++at_;
      } else {
        break;
      }
    }
    const size_t begin = at_;
    while (at_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
    return text_.substr(begin, at_ - begin);
  }
  int64_t number(const char* format) {
    const std::string token = next();
    if (token.empty() || token.size() > 12 || token.find_first_not_of("0123456789") != std::string::npos)
      HeaderReader::malformed(format, "a size that is not a number");
    return std::stoll(token);
  }

 private:
  std::string text_;
  size_t at_;
};

ImageHeader netpbm(HeaderReader& r) {
  const char kind = r.bytes(1, 1)[0];
  TextTokens tokens(r, 2);
  if (kind != '7') {
    const int64_t width = tokens.number("PNM");
    return {"PNM", width, tokens.number("PNM")};
  }
  int64_t width = -1, height = -1;  // PAM: "WIDTH w", "HEIGHT h", ... "ENDHDR"
  for (std::string token = tokens.next(); !token.empty() && token != "ENDHDR"; token = tokens.next()) {
    if (token == "WIDTH") width = tokens.number("PAM");
    if (token == "HEIGHT") height = tokens.number("PAM");
  }
  if (width < 0 || height < 0) HeaderReader::malformed("PAM", "no WIDTH or HEIGHT");
  return {"PAM", width, height};
}

ImageHeader pfm(HeaderReader& r) {
  TextTokens tokens(r, 2);
  const int64_t width = tokens.number("PFM");
  return {"PFM", width, tokens.number("PFM")};
}

// Radiance: "#?RADIANCE", header lines, an empty line, then e.g. "-Y 512 +X 768".
ImageHeader radiance(HeaderReader& r) {
  const std::string text = r.bytes(0, 65536);
  const size_t blank = text.find("\n\n");
  if (blank == std::string::npos) HeaderReader::truncated();
  TextTokens tokens(r, blank + 2);
  int64_t width = -1, height = -1;
  for (int i = 0; i < 2; ++i) {
    const std::string axis = tokens.next();
    if (axis.size() != 2 || (axis[0] != '-' && axis[0] != '+') || (axis[1] != 'X' && axis[1] != 'Y'))
      HeaderReader::malformed("Radiance HDR", "no resolution line");
    (axis[1] == 'X' ? width : height) = tokens.number("Radiance HDR");
  }
  if (width < 0 || height < 0) HeaderReader::malformed("Radiance HDR", "no resolution line");
  return {"Radiance HDR", width, height};
}

// OpenEXR: attributes "name\0type\0" + u32 size + value, up to an empty name; dataWindow is box2i.
ImageHeader openexr(HeaderReader& r) {
  const std::string text = r.bytes(8, 1 << 20);
  size_t at = 0;
  while (at < text.size() && text[at] != '\0') {
    const size_t name_end = text.find('\0', at);
    const size_t type_end = name_end == std::string::npos ? name_end : text.find('\0', name_end + 1);
    if (type_end == std::string::npos || type_end + 4 > text.size()) HeaderReader::truncated();
    const std::string name = text.substr(at, name_end - at);
    const uint64_t value_size = r.le(8 + type_end + 1, 4);
    const uint64_t value_at = type_end + 5;
    if (value_size > text.size() - value_at) HeaderReader::truncated();
    if (name == "dataWindow" && value_size == 16) {
      auto coordinate = [&](int i) { return int64_t(int32_t(uint32_t(r.le(8 + value_at + 4 * uint64_t(i), 4)))); };
      return {"OpenEXR", coordinate(2) - coordinate(0) + 1, coordinate(3) - coordinate(1) + 1};
    }
    at = value_at + value_size;
  }
  HeaderReader::malformed("OpenEXR", "no dataWindow");
}

// A JPEG 2000 codestream's SIZ segment: Xsiz, Ysiz, XOsiz, YOsiz after Lsiz and Rsiz.
ImageHeader j2k_codestream(HeaderReader& r, uint64_t at) {
  if (r.be(at, 4) != 0xFF4FFF51) HeaderReader::malformed("JPEG 2000", "no SIZ segment after SOC");
  const int64_t width = int64_t(r.be(at + 8, 4)) - int64_t(r.be(at + 16, 4));
  return {"JPEG 2000", width, int64_t(r.be(at + 12, 4)) - int64_t(r.be(at + 20, 4))};
}

// A JP2 file: boxes (u32 length, type; length 1: a u64 length follows; 0: to the end) down to
// jp2h/ihdr (height, width), else the codestream box.
ImageHeader jp2(HeaderReader& r, uint64_t at, uint64_t end) {
  while (at + 8 <= end) {
    uint64_t length = r.be(at, 4), header = 8;
    const std::string type = r.bytes(at + 4, 4);
    if (length == 1) {
      length = r.be(at + 8, 8);
      header = 16;
    } else if (length == 0) {
      length = end - at;
    }
    if (length < header || length > end - at) HeaderReader::malformed("JPEG 2000", "a box runs past its file");
    if (type == "jp2h") return jp2(r, at + header, at + length);
    if (type == "ihdr") return {"JPEG 2000", int64_t(r.be(at + header + 4, 4)), int64_t(r.be(at + header, 4))};
    if (type == "jp2c") return j2k_codestream(r, at + header);
    at += length;
  }
  HeaderReader::malformed("JPEG 2000", "no image header box");
}

}  // namespace

std::string image_format_of(const std::string& head) {
  auto starts = [&](const char* magic, size_t length) { return head.compare(0, length, magic, length) == 0; };
  if (starts("\x89PNG\r\n\x1a\n", 8)) return "PNG";
  if (starts("\xff\xd8", 2)) return "JPEG";
  if (starts("BM", 2)) return "BMP";
  if (starts("RIFF", 4) && head.size() >= 12 && head.compare(8, 4, "WEBP") == 0) return "WebP";
  if (starts("II*\0", 4) || starts("MM\0*", 4) || starts("II+\0", 4) || starts("MM\0+", 4)) return "TIFF";
  if (head.size() >= 3 && head[0] == 'P' && head[1] >= '1' && head[1] <= '7' &&
      std::isspace(static_cast<unsigned char>(head[2])))
    return "PNM";
  if ((starts("PF", 2) || starts("Pf", 2)) && head.size() >= 3 && std::isspace(static_cast<unsigned char>(head[2])))
    return "PFM";
  if (starts("\x59\xa6\x6a\x95", 4)) return "Sun raster";
  if (starts("#?", 2)) return "Radiance HDR";
  if (starts("\x76\x2f\x31\x01", 4)) return "OpenEXR";
  if (starts("\x00\x00\x00\x0cjP  \r\n\x87\n", 12)) return "JP2";
  if (starts("\xff\x4f\xff\x51", 4)) return "J2K";
  return "";
}

ImageHeader read_image_header(const std::string& path) {
  HeaderReader r(path);
  const std::string format = image_format_of(r.bytes(0, 16));
  ImageHeader header;
  if (format == "PNG")
    header = png(r);
  else if (format == "JPEG")
    header = jpeg(r);
  else if (format == "BMP")
    header = bmp(r);
  else if (format == "WebP")
    header = webp(r);
  else if (format == "TIFF")
    header = tiff(r);
  else if (format == "PNM")
    header = netpbm(r);
  else if (format == "PFM")
    header = pfm(r);
  else if (format == "Sun raster")
    header = {"Sun raster", int64_t(r.be(4, 4)), int64_t(r.be(8, 4))};
  else if (format == "Radiance HDR")
    header = radiance(r);
  else if (format == "OpenEXR")
    header = openexr(r);
  else if (format == "JP2")
    header = jp2(r, 0, r.size());
  else if (format == "J2K")
    header = j2k_codestream(r, 0);
  else
    throw std::runtime_error(
        "not a supported image format (PNG, JPEG, BMP, WebP, TIFF, PNM, PFM, Sun raster, "
        "Radiance HDR, OpenEXR, JPEG 2000)");
  if (header.width <= 0 || header.height <= 0)
    throw std::runtime_error("its " + header.format + " header gives a size of " + std::to_string(header.width) + "x" +
                             std::to_string(header.height));
  return header;
}

}  // namespace attnscope
