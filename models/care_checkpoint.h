// Reading CARE checkpoints (the authors' keys: stem.*, stages.S.downsample.*, stages.S.blocks.B.*,
// head.*, dist_head.*): the architecture from the keys, plus the attention head width per stage
// from the file's arch metadata (the keys cannot show it).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "models/care.h"

namespace attnscope {

bool looks_like_care(const Checkpoint& checkpoint);

// `meta`: the attnscope_arch metadata or .arch.json sidecar (null when absent): att_head_dim [per
// stage] (default: the authors' 1, 1, 16, 32), img_size (informative). Throws CheckpointError
// naming the key that is missing or does not fit.
CareArch infer_care_arch(const Checkpoint& checkpoint, const nlohmann::json& meta, std::vector<std::string>& notes);

}  // namespace attnscope
