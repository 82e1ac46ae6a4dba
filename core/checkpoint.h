// Model weights from disk: safetensors and PyTorch zip checkpoints (.pth/.bin), read without
// executing any pickled code. Everything else in attnscope sees a flat name -> tensor map.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/types.h>

namespace attnscope {

// Any problem with a checkpoint file; the message is one line meant for the user.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Checkpoint {
  std::map<std::string, torch::Tensor> tensors;  // CPU tensors in their stored dtype
  std::map<std::string, std::string> metadata;   // safetensors "__metadata__" (empty for .pth)
  std::string format;                            // "safetensors" or "pytorch-zip"
  std::string container_key;                     // "model", "model_ema", "state_dict", or "" for a flat state_dict
  std::vector<std::string> containers;           // .pth: the top-level entries that hold a dict (other weight sets)
  // .pth: top-level entries beside the weights that pickle Python objects attnscope does not build,
  // as "cfg (module.Class)": never run, named so that a reader can say what the file holds.
  std::vector<std::string> unread_objects;
};

// Reads a checkpoint, choosing the reader by content (zip magic vs safetensors header), not by
// file extension. For a .pth whose top level is a dict of containers, `container` picks one of
// "model", "model_ema", "state_dict"; empty means the first present in that order.
Checkpoint load_checkpoint(const std::string& path, const std::string& container = "");

// True for a torch.jit.save archive (a zip with constants.pkl); false for anything else,
// unreadable files included (load_checkpoint then reports what is wrong).
bool is_torchscript_archive(const std::string& path);

Checkpoint load_safetensors(const std::string& path);
// The header alone: every tensor's name, dtype and shape on the meta device (nothing read or
// allocated of the data), with the same checks of the header as load_safetensors.
Checkpoint read_safetensors_shapes(const std::string& path);
// model.safetensors.index.json: every shard its weight_map names must be a file beside it (checked
// before any is read); the shards' tensors merged. Throws CheckpointError naming the index and shard.
Checkpoint load_sharded_safetensors(const std::string& index_path);
bool is_shard_index(const std::string& path);  // the name ends in .safetensors.index.json
// The same checks of the index and the shards, with each shard's header alone (read_safetensors_shapes).
Checkpoint read_sharded_safetensors_shapes(const std::string& index_path);
// `base`: where torch.save's archive starts in the file (saev's sae.pt has a JSON line first).
Checkpoint load_pytorch_zip(const std::string& path, const std::string& container = "", uint64_t base = 0);

// Writes F32/F16/BF16/I64 tensors (contiguous CPU copies are made as needed) atomically:
// a temporary file in the same directory, then rename.
void save_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace attnscope
