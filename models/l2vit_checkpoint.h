// Reading L2ViT checkpoints (the authors' keys, no other layout): the architecture from the keys and
// the file's arch metadata, and which weight set of a training checkpoint to load.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "models/l2vit.h"

namespace attnscope {

bool looks_like_l2vit(const Checkpoint& checkpoint);

// The entries of a training checkpoint in the order L2ViT prefers them: the released
// *-checkpoint-best-ema.pth hold `model` and `model_ema`, and the paper reports `model_ema`.
const std::vector<std::string>& l2vit_container_preference();

// The architecture from the keys; `meta` (attnscope_arch metadata or the .arch.json sidecar, or
// null) gives the heads of local blocks per stage, the window and the training input, which the
// keys do not show (defaults: the global blocks' temperature, else width / 32; window 7; 224).
// Throws CheckpointError naming the key that is missing or misshapen.
L2ViTArch infer_l2vit_arch(const Checkpoint& checkpoint, const nlohmann::json& meta, std::vector<std::string>& notes);

}  // namespace attnscope
