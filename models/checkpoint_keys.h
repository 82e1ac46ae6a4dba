// Reading a family's keys out of a checkpoint: presence, and a tensor whose rank is checked, with
// a refusal that names the key (every family's architecture inference starts here).
#pragma once

#include <string>

#include "core/checkpoint.h"

namespace attnscope {

inline bool has_tensor(const Checkpoint& checkpoint, const std::string& key) {
  return checkpoint.tensors.count(key) > 0;
}

inline const torch::Tensor& required_tensor(const Checkpoint& checkpoint, const std::string& key, int64_t dims) {
  auto it = checkpoint.tensors.find(key);
  if (it == checkpoint.tensors.end()) throw CheckpointError("missing tensor '" + key + "'");
  if (it->second.dim() != dims)
    throw CheckpointError("tensor '" + key + "' has " + std::to_string(it->second.dim()) + " dimensions, expected " +
                          std::to_string(dims));
  return it->second;
}

}  // namespace attnscope
