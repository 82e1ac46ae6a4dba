// Builders of damaged and hostile files for the reliability tests: zip archives with any sizes
// and offsets, torch.save pickles, safetensors with any header and zero-byte tensors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

namespace attnscope::testing {

// A zip archive written by hand, so that its directory may say anything.
struct ZipEntry {
  std::string name;
  std::string data;
  uint16_t method = 0;                // 0 stored, 8 deflate (the data is then used as it is)
  int64_t claimed_uncompressed = -1;  // -1: data.size()
};
std::string zip_bytes(const std::vector<ZipEntry>& entries);

// The records of a torch.save archive "archive/..." (version, data.pkl, data/<key>...).
std::vector<ZipEntry> torch_archive(const std::string& pickle, const std::map<std::string, std::string>& storages);

// A pickle (protocol 2) of {name: FloatTensor of `numel` elements in storage `key` (declared
// `declared_numel` long)} for each tensor.
struct PickledTensor {
  std::string name, key;
  int64_t numel = 1, declared_numel = 1;
};
std::string state_dict_pickle(const std::vector<PickledTensor>& tensors);

// safetensors bytes of `tensors` (F32; a tensor may have no elements and any shape), and metadata.
std::string safetensors_file(const std::map<std::string, std::vector<int64_t>>& shapes,
                             const std::map<std::string, std::string>& metadata = {});

std::string read_file_bytes(const std::string& path);
void write_file_bytes(const std::string& path, const std::string& bytes);

// This process's resident memory in bytes (/proc/self/statm).
int64_t resident_bytes();

// Built with AddressSanitizer (scripts/test.sh --sanitize): code runs several times slower and
// freed memory stays resident in its quarantine, so time and memory bounds are scaled by this.
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSanitizerSlowdown = 5;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr double kSanitizerSlowdown = 5;
#else
constexpr double kSanitizerSlowdown = 1;
#endif
#else
constexpr double kSanitizerSlowdown = 1;
#endif

}  // namespace attnscope::testing
