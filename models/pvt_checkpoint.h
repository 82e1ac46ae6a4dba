// Reading PVT v2 and FLatten-PVT v2 checkpoints: the original (whai362, FLatten) layout renamed to
// timm's keys, and the architecture (stages, spatial reduction, -li, focused blocks) from the keys.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "models/pvt.h"

namespace attnscope {

bool looks_like_pvt(const Checkpoint& checkpoint);

// Renames the original layout (patch_embed{1-4}, block{1-4}.j, norm{1-4}, dwconv.dwconv) to timm's
// in place, as timm's _checkpoint_filter_fn does; returns "original" or "timm".
std::string adopt_pvt_layout(Checkpoint& checkpoint);

// The architecture from timm-layout keys; `meta` (the file's attnscope_arch metadata, or null)
// gives the heads per stage and the training input, which keys do not show (default: PVT v2's
// 1, 2, 5, 8 heads for four stages, 224 pixels). Throws CheckpointError naming the key.
PvtArch infer_pvt_arch(const Checkpoint& checkpoint, const nlohmann::json& meta, const std::string& layout,
                       std::vector<std::string>& notes);

}  // namespace attnscope
