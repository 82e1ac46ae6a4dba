// NumPy .npy reading and writing (format described in numpy/lib/format.py), without NumPy.
// The header is a Python dict literal; a tiny parser reads exactly the three keys it may hold.
#include "core/npy.h"

#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include <torch/torch.h>

#include "core/atomic_file.h"
#include "core/excerpt.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.cpp reads and writes little-endian data in place; port it to big-endian first"
#endif

namespace attnscope {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kHeaderAlignment = 64;  // numpy aligns the data start to 64 bytes

struct NpyDtype {
  const char* descr;
  torch::ScalarType type;
};

// The first entry for each torch type is the spelling written; the others are only accepted.
constexpr NpyDtype kDtypes[] = {
    {"<f4", torch::kFloat32}, {"<f8", torch::kFloat64}, {"<f2", torch::kFloat16}, {"|u1", torch::kUInt8},
    {"<u1", torch::kUInt8},   {"|i1", torch::kInt8},    {"<i2", torch::kInt16},   {"<i4", torch::kInt32},
    {"<i8", torch::kInt64},   {"|b1", torch::kBool},
};

[[noreturn]] void bad_npy(const std::string& path, const std::string& what) {
  throw std::runtime_error("npy file " + path + ": " + what);
}

// What the header dict says about the array.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Recursive-descent reader for the header's dict literal, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 224, 224), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  NpyHeader parse() {
    NpyHeader header;
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (!consume('}')) {
      const std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        header.descr = parse_string();
        has_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = parse_bool();
        has_order = true;
      } else if (key == "shape") {
        header.shape = parse_shape();
        has_shape = true;
      } else {
        bad_npy(path_, "unexpected header key '" + excerpt(key) + "'");
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) bad_npy(path_, "trailing characters after the header dict");
    if (!has_descr || !has_order || !has_shape) {
      bad_npy(path_, "header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return header;
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) bad_npy(path_, std::string("malformed header: expected '") + c + "'");
  }
  std::string parse_string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      bad_npy(path_, "malformed header: expected a quoted string");
    }
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) bad_npy(path_, "malformed header: unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }
  bool parse_bool() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const size_t length = std::strlen(word);
      if (text_.substr(pos_, length) == word) {
        pos_ += length;
        return value;
      }
    }
    bad_npy(path_, "malformed header: fortran_order is not True or False");
  }
  std::vector<int64_t> parse_shape() {
    std::vector<int64_t> shape;
    expect('(');
    while (!consume(')')) {
      skip_space();
      if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        bad_npy(path_, "malformed header: shape is not a tuple of non-negative integers");
      }
      int64_t dim = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        const int digit = text_[pos_++] - '0';
        if (dim > (std::numeric_limits<int64_t>::max() - digit) / 10) {
          bad_npy(path_, "shape dimension too large");
        }
        dim = dim * 10 + digit;
      }
      consume('L');  // Python 2 wrote long integers as 3L
      shape.push_back(dim);
      if (!consume(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  std::string_view text_;
  const std::string& path_;
  size_t pos_ = 0;
};

std::optional<torch::ScalarType> dtype_from_descr(const std::string& descr) {
  for (const auto& entry : kDtypes) {
    if (descr == entry.descr) return entry.type;
  }
  return std::nullopt;
}

const char* descr_from_dtype(torch::ScalarType type) {
  for (const auto& entry : kDtypes) {
    if (entry.type == type) return entry.descr;
  }
  return nullptr;
}

uint32_t read_little_endian(const unsigned char* bytes, int count) {
  uint32_t value = 0;
  for (int i = count - 1; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

std::string shape_literal(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";  // a 1-tuple needs its comma in Python
  return text + ")";
}

}  // namespace

torch::Tensor read_npy(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) bad_npy(path, "is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_npy(path, std::string("cannot open: ") + std::strerror(errno));

  in.seekg(0, std::ios::end);
  const std::streamoff file_size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (file_size < 0) bad_npy(path, "cannot determine the file size");

  unsigned char preamble[kMagicSize + 2];
  if (!in.read(reinterpret_cast<char*>(preamble), sizeof(preamble)) || std::memcmp(preamble, kMagic, kMagicSize) != 0) {
    bad_npy(path, "not a .npy file (bad magic)");
  }
  const int major_version = preamble[kMagicSize];
  if (major_version < 1 || major_version > 3) {
    bad_npy(path, "unsupported format version " + std::to_string(major_version) + "." +
                      std::to_string(preamble[kMagicSize + 1]));
  }
  // Version 1.0 stores the header length in 2 bytes, 2.0 and 3.0 in 4.
  const int length_bytes = major_version == 1 ? 2 : 4;
  unsigned char length_field[4];
  if (!in.read(reinterpret_cast<char*>(length_field), length_bytes)) bad_npy(path, "truncated header");
  const uint32_t header_length = read_little_endian(length_field, length_bytes);
  const std::streamoff data_offset = static_cast<std::streamoff>(sizeof(preamble)) + length_bytes + header_length;
  if (data_offset > file_size) bad_npy(path, "truncated header");
  std::string header_text(header_length, '\0');
  if (!in.read(header_text.data(), header_length)) bad_npy(path, "truncated header");

  const NpyHeader header = HeaderParser(header_text, path).parse();
  if (header.fortran_order) bad_npy(path, "Fortran-order arrays are not supported");
  const auto dtype = dtype_from_descr(header.descr);
  if (!dtype) {
    bad_npy(path, "unsupported dtype '" + excerpt(header.descr) +
                      "' (expected <f4, <f8, <f2, |u1, |i1, <i2, <i4, <i8 or |b1)");
  }

  const int64_t item_size = static_cast<int64_t>(c10::elementSize(*dtype));
  int64_t data_bytes = item_size;
  for (int64_t dim : header.shape) {
    if (dim != 0 && data_bytes > std::numeric_limits<int64_t>::max() / dim) {
      bad_npy(path, "shape " + shape_literal(header.shape) + " is too large");
    }
    data_bytes *= dim;
  }
  if (file_size - data_offset != data_bytes) {
    bad_npy(path, "shape " + shape_literal(header.shape) + " of " + header.descr + " needs " +
                      std::to_string(data_bytes) + " data bytes but the file holds " +
                      std::to_string(file_size - data_offset));
  }

  torch::Tensor tensor = torch::empty(header.shape, torch::TensorOptions().dtype(*dtype));
  if (data_bytes > 0 && !in.read(static_cast<char*>(tensor.data_ptr()), static_cast<std::streamsize>(data_bytes))) {
    bad_npy(path, "read error in the data");
  }
  return tensor;
}

std::string npy_header(const std::vector<int64_t>& shape, torch::ScalarType dtype) {
  const char* descr = descr_from_dtype(dtype);
  if (descr == nullptr) throw std::runtime_error(std::string("npy: cannot write dtype ") + c10::toString(dtype));
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape_literal(shape) + ", }";
  // Pad with spaces and end with a newline so the data starts on an aligned offset. Version 1.0
  // has a 2-byte header length; only a header longer than that (thousands of dims) needs 2.0.
  auto padded_header_size = [&](size_t preamble_size) {
    const size_t unpadded = preamble_size + header.size() + 1;
    return header.size() + 1 + (kHeaderAlignment - unpadded % kHeaderAlignment) % kHeaderAlignment;
  };
  const bool needs_version_2 = padded_header_size(kMagicSize + 4) > 0xFFFF;
  header.resize(padded_header_size(kMagicSize + (needs_version_2 ? 6 : 4)) - 1, ' ');
  header += '\n';

  std::string bytes(kMagic, kMagicSize);
  bytes += static_cast<char>(needs_version_2 ? 2 : 1);
  bytes += '\0';
  const uint32_t header_length = static_cast<uint32_t>(header.size());
  for (int i = 0; i < (needs_version_2 ? 4 : 2); ++i) {
    bytes += static_cast<char>((header_length >> (8 * i)) & 0xFF);
  }
  bytes += header;
  return bytes;
}

std::string npy_bytes(const torch::Tensor& tensor) {
  if (!tensor.defined()) throw std::runtime_error("npy: cannot write an undefined tensor");
  if (descr_from_dtype(tensor.scalar_type()) == nullptr)
    throw std::runtime_error(std::string("npy: cannot write dtype ") + c10::toString(tensor.scalar_type()));
  const torch::Tensor data = tensor.detach().to(torch::kCPU).contiguous();
  std::string bytes = npy_header(std::vector<int64_t>(data.sizes().begin(), data.sizes().end()), data.scalar_type());
  const size_t data_bytes = static_cast<size_t>(data.numel()) * data.element_size();
  if (data_bytes > 0) bytes.append(static_cast<const char*>(data.data_ptr()), data_bytes);
  return bytes;
}

void write_npy(const std::string& path, const torch::Tensor& tensor) {
  std::string bytes;
  try {
    bytes = npy_bytes(tensor);
  } catch (const std::runtime_error& e) {
    bad_npy(path, std::string(e.what()).substr(5));  // "npy: " dropped; bad_npy() names the file
  }
  write_file_atomically(
      path, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

}  // namespace attnscope
