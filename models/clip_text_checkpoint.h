// CLIP's text tower from the files researchers have: a full OpenAI state_dict (torch.save), OpenAI's
// released TorchScript archive (its parameters) and a Hugging Face CLIPModel folder (model.safetensors
// with config.json), whose keys are renamed to OpenAI's. The architecture is read from the shapes
// (and config.json's text_config), bounded by models/arch_limits before the tower is built; weights
// in float16 (as released) are copied into the float32 tower.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "models/arch_config.h"
#include "models/clip_text.h"

namespace attnscope {

// The text tower's tensors of a checkpoint, taken out of it so that the visual layouts see the
// visual tower alone.
struct ClipTextSource {
  Checkpoint checkpoint;  // the text tower's tensors, named as the file names them; empty: none
  CheckpointLayout layout = CheckpointLayout::OpenAiClip;  // OpenAiClip or HfClip when the file is a CLIP
  // Why there is no text tower when `checkpoint` is empty: "this file has no text tower: 'KEY' missing".
  std::string absent;
};

// Moves the text tower's tensors out of `checkpoint`: in a full OpenAI CLIP state_dict (one with
// `visual.` keys) token_embedding, positional_embedding, transformer.*, ln_final, text_projection,
// logit_scale and the archives' 0-d context_length and vocab_size; in a Hugging Face CLIPModel
// (`vision_model.` keys) text_model.*, text_projection.weight and logit_scale. Other files are left
// as they are.
ClipTextSource take_clip_text_tensors(Checkpoint& checkpoint);

struct ClipTextLoad {
  ClipTextTower tower{nullptr};
  std::vector<std::string> notes;       // how the tower was read
  std::vector<std::string> warnings;    // what loads but is suspect (weights holding NaN or Inf)
  std::vector<ArchAssumption> assumed;  // what neither the keys nor config.json gave
};

// Reads the tower's architecture (Hugging Face: with the text_config of the config.json beside
// `path`), judges it against the architecture bounds, builds it and copies the weights (float16 or
// float32 on disk, float32 in the tower). `image_embed_dim` is the visual tower's embedding width
// that text_projection must match (0: not checked). Throws CheckpointError naming the key or
// config entry that is missing, out of bounds or contradicts another.
ClipTextLoad load_clip_text_tower(ClipTextSource source, const std::string& path, int64_t image_embed_dim);

// The architecture alone, from tensors in OpenAI's names (`file_keys`: the file's name of each where
// they were renamed, for refusals) and a Hugging Face text_config (null for OpenAI's layout).
ClipTextArch infer_clip_text_arch(const Checkpoint& checkpoint, CheckpointLayout layout,
                                  const nlohmann::json& text_config,
                                  const std::map<std::string, std::string>& file_keys, ClipTextLoad& load);

}  // namespace attnscope
