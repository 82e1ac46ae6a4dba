// The structure of a zip archive (torch.save and torch.jit.save files), checked before LibTorch's
// reader sees it. That reader allocates each record's declared size before reading a byte, and
// leaks its central directory when its constructor throws, so a damaged file must never reach it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace attnscope {

struct ZipRecord {
  std::string name;  // the full name in the archive, e.g. "archive/data.pkl"
  uint64_t header_offset = 0;
  uint64_t data_offset = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint16_t method = 0;  // 0: stored (what torch.save writes), 8: deflate
  uint32_t crc32 = 0;
};

// Records whose every byte lies inside the file, with no two overlapping, so the sizes of the
// stored ones add up to at most the file's size.
struct ZipDirectory {
  uint64_t file_size = 0;
  std::string folder;  // the archive's top folder with its slash: "archive/"
  std::vector<ZipRecord> records;

  // The record `name` inside the top folder ("data.pkl"), compared without case as LibTorch's
  // miniz does; nullptr when absent.
  const ZipRecord* find(const std::string& name) const;
};

// The most records and the largest deflated record an archive may have.
constexpr uint64_t kMaxZipRecords = 1 << 18;
// Deflate cannot shrink data by more than about 1032:1; a record claiming more is damaged.
constexpr uint64_t kMaxDeflateRatio = 1032;

// Reads and checks the end record (zip64 too), every central directory entry and local header, and
// the version record that LibTorch's reader reads in its constructor. Throws CheckpointError
// ("PATH: not a usable zip archive: ..."). `base`: where the archive starts in the file (saev's
// sae.pt writes a JSON line before torch.save's archive); offsets are the archive's own.
ZipDirectory read_zip_directory(const std::string& path, uint64_t base = 0);

// LibTorch's reader on a file that passed read_zip_directory (its directory is returned when asked).
std::unique_ptr<caffe2::serialize::PyTorchStreamReader> open_torch_zip(const std::string& path,
                                                                       ZipDirectory* directory = nullptr,
                                                                       uint64_t base = 0);

// The zip standard's CRC-32 (the one zlib computes).
uint32_t zip_crc32(const void* data, size_t size);

}  // namespace attnscope
