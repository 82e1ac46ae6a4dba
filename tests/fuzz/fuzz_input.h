// What every fuzz target shares: the libFuzzer entry point's signature, and a file holding the
// input, since attnscope's readers open paths (as the commands and the workbench do).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace attnscope::fuzz {

// Writes `size` bytes to this process's scratch file for `target` (in /dev/shm when it exists)
// and returns its path.
inline std::string input_file(const std::string& target, const void* data, size_t size) {
  static const std::filesystem::path folder =
      std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
  const std::string path = (folder / ("attnscope-fuzz-" + target + "-" + std::to_string(::getpid()))).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace attnscope::fuzz
