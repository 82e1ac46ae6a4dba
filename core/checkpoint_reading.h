// What the checkpoint readers (safetensors, torch zip) share: one-line errors that name the file,
// LibTorch's and the allocator's exceptions turned into them, and opening only regular files.
#pragma once

#include <fstream>
#include <string>

#include "core/checkpoint.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors and torch.save data are little-endian; byte swapping is not implemented");

namespace attnscope {

// Said where a file is refused that a trusting user could still convert with Python.
constexpr const char* kCheckpointConvertHint = "if you trust the file, convert it with scripts/convert_checkpoint.py";

// Throws CheckpointError("PATH: WHAT").
[[noreturn]] void bad_checkpoint(const std::string& path, const std::string& what);

// Called inside a catch block: rethrows the exception in flight as one CheckpointError "PATH: CONTEXT:
// first line of the message" (LibTorch's, miniz's, the allocator's); a CheckpointError goes on as it is.
[[noreturn]] void rethrow_as_checkpoint_error(const std::string& path, const std::string& context);

// Runs `body`, turning whatever LibTorch, miniz or the allocator throw into one CheckpointError.
template <typename Body>
auto guarded_checkpoint_call(const std::string& path, const std::string& context, Body&& body) {
  try {
    return body();
  } catch (...) {
    rethrow_as_checkpoint_error(path, context);
  }
}

// The file opened for binary reading; a directory, FIFO or device (whose read would block) is refused.
std::ifstream open_checkpoint_file(const std::string& path);

}  // namespace attnscope
