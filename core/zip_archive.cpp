// Zip structure checks; see zip_archive.h. Field offsets follow PKWARE's APPNOTE.TXT (4.3.12 to
// 4.3.16 for the central directory, local headers and the zip64 records).
#include "core/zip_archive.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <map>

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/versions.h>

#include "core/checkpoint.h"
#include "core/excerpt.h"

namespace attnscope {
namespace {

constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint64_t kLocalHeaderSize = 30, kCentralHeaderSize = 46, kEndSize = 22, kZip64EndSize = 56;
constexpr uint64_t kZip64LocatorSize = 20;
constexpr uint64_t kMaxCentralDirectoryBytes = uint64_t(64) << 20;

uint64_t read_le(const unsigned char* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

std::string lower(std::string text) {
  for (char& c : text) c = char(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

class ZipChecker {
 public:
  ZipChecker(const std::string& path, uint64_t base) : path_(path), in_(path, std::ios::binary), base_(base) {
    if (!in_) throw CheckpointError("cannot open " + path);
    in_.seekg(0, std::ios::end);
    const auto size = static_cast<uint64_t>(in_.tellg());
    if (base > size) throw CheckpointError(path + ": the archive would start past the end of the file");
    directory_.file_size = size - base;
  }

  ZipDirectory run() {
    if (directory_.file_size >= 8 && bytes(0, 8) == "PYTORCH1")
      fail("an archive of PyTorch's preview release, which nothing reads any more");
    const uint64_t end = find_end_record();
    const std::string record = bytes(end, kEndSize);
    const auto* e = reinterpret_cast<const unsigned char*>(record.data());
    uint64_t entries = read_le(e + 10, 2), directory_size = read_le(e + 12, 4), directory_offset = read_le(e + 16, 4);
    if (read_le(e + 4, 2) != 0 || read_le(e + 6, 2) != 0 || read_le(e + 8, 2) != entries) fail("a multi-disk archive");
    uint64_t directory_end = end;
    if (end >= kZip64LocatorSize && read_u32(end - kZip64LocatorSize) == kZip64LocatorSignature) {
      const std::string locator = bytes(end - kZip64LocatorSize, kZip64LocatorSize);
      const uint64_t zip64_end = read_le(reinterpret_cast<const unsigned char*>(locator.data()) + 8, 8);
      if (zip64_end > end - kZip64LocatorSize || end - kZip64LocatorSize - zip64_end < kZip64EndSize)
        fail("its zip64 end record lies outside the file");
      const std::string record64 = bytes(zip64_end, kZip64EndSize);
      const auto* z = reinterpret_cast<const unsigned char*>(record64.data());
      if (read_le(z, 4) != kZip64EndSignature) fail("its zip64 end record is missing");
      if (read_le(z + 16, 4) != 0 || read_le(z + 20, 4) != 0 || read_le(z + 24, 8) != read_le(z + 32, 8))
        fail("a multi-disk archive");
      entries = read_le(z + 32, 8);
      directory_size = read_le(z + 40, 8);
      directory_offset = read_le(z + 48, 8);
      directory_end = zip64_end;
    }
    if (entries == 0) fail("an empty zip archive");
    if (entries > kMaxZipRecords)
      fail(std::to_string(entries) + " records, more than the " + std::to_string(kMaxZipRecords) + " accepted");
    if (directory_offset > directory_end || directory_size > directory_end - directory_offset)
      fail("its central directory lies outside the file");
    if (directory_size > kMaxCentralDirectoryBytes) fail("its central directory is larger than 64 MB");
    read_central_directory(directory_offset, directory_size, entries);
    check_records(directory_offset);
    check_version();
    return std::move(directory_);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw CheckpointError(path_ + ": not a usable zip archive: " + why +
                          "; the file is damaged or not a PyTorch checkpoint (re-save it with torch.save)");
  }

  std::string bytes(uint64_t offset, uint64_t count) {
    if (offset > directory_.file_size || count > directory_.file_size - offset) fail("it is truncated");
    std::string out(count, '\0');
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(base_ + offset));
    if (!in_.read(out.data(), static_cast<std::streamsize>(count))) fail("read error");
    return out;
  }
  uint32_t read_u32(uint64_t offset) {
    const std::string b = bytes(offset, 4);
    return uint32_t(read_le(reinterpret_cast<const unsigned char*>(b.data()), 4));
  }

  // Like miniz: the last end-record signature within the comment's reach of the end of the file.
  uint64_t find_end_record() {
    if (directory_.file_size < kEndSize) fail("too short for a zip archive");
    const uint64_t reach = std::min<uint64_t>(directory_.file_size, kEndSize + 0xFFFF);
    const uint64_t start = directory_.file_size - reach;
    const std::string tail = bytes(start, reach);
    for (uint64_t i = reach - kEndSize + 1; i-- > 0;)
      if (read_le(reinterpret_cast<const unsigned char*>(tail.data()) + i, 4) == kEndSignature) return start + i;
    fail("no end of central directory record");
  }

  void read_central_directory(uint64_t offset, uint64_t size, uint64_t entries) {
    const std::string table = bytes(offset, size);
    const auto* p = reinterpret_cast<const unsigned char*>(table.data());
    uint64_t at = 0;
    std::map<std::string, std::string> names;  // lower case -> as written
    for (uint64_t i = 0; i < entries; ++i) {
      if (size - at < kCentralHeaderSize || read_le(p + at, 4) != kCentralHeaderSignature)
        fail("central directory entry " + std::to_string(i) + " is damaged");
      const unsigned char* h = p + at;
      const uint64_t name_length = read_le(h + 28, 2), extra_length = read_le(h + 30, 2);
      const uint64_t entry_size = kCentralHeaderSize + name_length + extra_length + read_le(h + 32, 2);
      if (size - at < entry_size) fail("central directory entry " + std::to_string(i) + " runs past the directory");
      ZipRecord record;
      record.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_length);
      const std::string shown = "record '" + excerpt(record.name) + "'";
      if (read_le(h + 8, 2) & 1) fail(shown + " is encrypted");
      record.method = uint16_t(read_le(h + 10, 2));
      record.crc32 = uint32_t(read_le(h + 16, 4));
      record.compressed_size = read_le(h + 20, 4);
      record.uncompressed_size = read_le(h + 24, 4);
      record.header_offset = read_le(h + 42, 4);
      read_zip64_extra(h + kCentralHeaderSize + name_length, extra_length, record, read_le(h + 34, 2));
      if (record.method != 0 && record.method != 8)
        fail(shown + " uses compression method " + std::to_string(record.method) +
             " (only stored and deflate exist in "
             "checkpoints)");
      if (!names.emplace(lower(record.name), record.name).second)
        fail("it names " + shown + " twice (letter case aside)");
      directory_.records.push_back(std::move(record));
      at += entry_size;
    }
  }

  // Sizes and offsets of 0xFFFFFFFF are in the zip64 extra field (id 1), in this order.
  void read_zip64_extra(const unsigned char* extra, uint64_t length, ZipRecord& record, uint64_t disk) {
    uint64_t* fields[] = {&record.uncompressed_size, &record.compressed_size, &record.header_offset};
    const bool wanted[] = {record.uncompressed_size == 0xFFFFFFFF, record.compressed_size == 0xFFFFFFFF,
                           record.header_offset == 0xFFFFFFFF};
    uint64_t at = 0;
    while (length - at >= 4) {
      const uint64_t id = read_le(extra + at, 2), field_length = read_le(extra + at + 2, 2);
      if (length - at - 4 < field_length) break;
      if (id == 1) {
        uint64_t used = 0;
        for (int f = 0; f < 3; ++f) {
          if (!wanted[f]) continue;
          if (field_length - used < 8) fail("record '" + excerpt(record.name) + "' has a short zip64 field");
          *fields[f] = read_le(extra + at + 4 + used, 8);
          used += 8;
        }
      }
      at += 4 + field_length;
    }
    if (disk != 0 && disk != 0xFFFF) fail("a multi-disk archive");
  }

  // Every record's local header and data inside the file, before the central directory, and no
  // two records sharing bytes: a small file cannot name the same gigabyte twice.
  void check_records(uint64_t directory_offset) {
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (ZipRecord& record : directory_.records) {
      const std::string shown = "record '" + excerpt(record.name) + "'";
      if (record.header_offset > directory_offset || directory_offset - record.header_offset < kLocalHeaderSize)
        fail(shown + " starts outside the file");
      const std::string header = bytes(record.header_offset, kLocalHeaderSize);
      const auto* h = reinterpret_cast<const unsigned char*>(header.data());
      if (read_le(h, 4) != kLocalHeaderSignature) fail(shown + " has no local header");
      record.data_offset = record.header_offset + kLocalHeaderSize + read_le(h + 26, 2) + read_le(h + 28, 2);
      if (record.data_offset > directory_offset || record.compressed_size > directory_offset - record.data_offset)
        fail(shown + " (" + std::to_string(record.compressed_size) + " bytes) runs past the end of its data");
      if (record.method == 0 && record.compressed_size != record.uncompressed_size)
        fail(shown + " is stored uncompressed but claims " + std::to_string(record.uncompressed_size) + " bytes in " +
             std::to_string(record.compressed_size));
      if (record.method == 8 && record.uncompressed_size / kMaxDeflateRatio > record.compressed_size + 1)
        fail(shown + " claims to inflate " + std::to_string(record.compressed_size) + " bytes to " +
             std::to_string(record.uncompressed_size) + ", more than deflate can");
      spans.emplace_back(record.header_offset, record.data_offset + record.compressed_size);
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      if (spans[i].first < spans[i - 1].second) fail("two records share the same bytes");
  }

  // What PyTorchStreamReader's constructor reads: the first name's folder and the version record.
  void check_version() {
    const std::string& first = directory_.records.front().name;
    const size_t slash = first.find('/');
    if (slash == std::string::npos) fail("its first record '" + excerpt(first) + "' is not inside a folder");
    directory_.folder = first.substr(0, slash + 1);
    const ZipRecord* version = directory_.find(".data/version");
    if (!version) version = directory_.find("version");
    if (!version) fail("it has no version record");
    if (version->method != 0 || version->uncompressed_size > 64) fail("its version record is not a short number");
    const std::string text = bytes(version->data_offset, version->compressed_size);
    if (zip_crc32(text.data(), text.size()) != version->crc32) fail("its version record fails its checksum");
    size_t at = 0;
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
    const size_t digits_end = text.find_first_not_of("0123456789", at);
    const size_t digits = (digits_end == std::string::npos ? text.size() : digits_end) - at;
    const uint64_t number = digits > 0 && digits < 6 ? std::stoull(text.substr(at, digits)) : 0;
    if (number < caffe2::serialize::kMinSupportedFileFormatVersion ||
        number > caffe2::serialize::kMaxSupportedFileFormatVersion)
      fail("its format version '" + excerpt(text, 20) + "' is not one this LibTorch reads (" +
           std::to_string(caffe2::serialize::kMinSupportedFileFormatVersion) + " to " +
           std::to_string(caffe2::serialize::kMaxSupportedFileFormatVersion) + ")");
  }

  const std::string& path_;
  std::ifstream in_;
  uint64_t base_ = 0;  // where the archive starts in the file (saev writes a JSON line first)
  ZipDirectory directory_;
};

// LibTorch's reader on the bytes of a file from `base` on.
class OffsetFileAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  OffsetFileAdapter(const std::string& path, uint64_t base, uint64_t size)
      : in_(path, std::ios::binary), base_(base), size_(size) {
    if (!in_) throw CheckpointError("cannot open " + path);
  }
  size_t size() const override { return size_t(size_); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= size_) return 0;
    n = size_t(std::min<uint64_t>(n, size_ - pos));
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(base_ + pos));
    in_.read(static_cast<char*>(buf), static_cast<std::streamsize>(n));
    return size_t(in_.gcount());
  }

 private:
  mutable std::ifstream in_;
  uint64_t base_, size_;
};

}  // namespace

const ZipRecord* ZipDirectory::find(const std::string& name) const {
  const std::string wanted = lower(folder + name);
  for (const ZipRecord& record : records)
    if (record.name.size() == wanted.size() && lower(record.name) == wanted) return &record;
  return nullptr;
}

ZipDirectory read_zip_directory(const std::string& path, uint64_t base) { return ZipChecker(path, base).run(); }

std::unique_ptr<caffe2::serialize::PyTorchStreamReader> open_torch_zip(const std::string& path, ZipDirectory* directory,
                                                                       uint64_t base) {
  ZipDirectory checked = read_zip_directory(path, base);
  auto reader = base == 0 ? std::make_unique<caffe2::serialize::PyTorchStreamReader>(path)
                          : std::make_unique<caffe2::serialize::PyTorchStreamReader>(
                                std::make_shared<OffsetFileAdapter>(path, base, checked.file_size));
  if (directory) *directory = std::move(checked);
  return reader;
}

uint32_t zip_crc32(const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

}  // namespace attnscope
