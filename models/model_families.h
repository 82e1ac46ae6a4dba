// The model families beyond ViT, recognised by their keys: a checkpoint of one is renamed to its
// family's timm layout and built from its keys. Adding a family adds one entry here and its own
// files (models/swin*, models/pvt*, ...); nothing else changes.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "models/backbone.h"

namespace attnscope {

// What the file says about its architecture beyond its keys: safetensors metadata
// "attnscope_arch" (JSON), else a sidecar FILE.arch.json beside the weights; null when neither.
nlohmann::json architecture_metadata(const Checkpoint& checkpoint, const std::string& weights_file);

// The entry of a training checkpoint that the family of `checkpoint` loads when the file holds
// several weight sets (L2ViT: `model_ema`, what the paper reports), or empty: the loader's order.
std::string preferred_container(const Checkpoint& checkpoint);

// The model of a hierarchical family when the keys are one's (renaming them to its timm layout),
// else null. `notes` says how the file was read. Throws CheckpointError for a file of a family
// attnscope recognises but does not run, naming the family and what to do.
std::shared_ptr<Backbone> build_family_backbone(Checkpoint& checkpoint, const nlohmann::json& meta,
                                                std::vector<std::string>& notes);

}  // namespace attnscope
