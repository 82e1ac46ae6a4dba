// Reading Swin and FLatten-Swin checkpoints: Microsoft's and FLatten's layout renamed to timm's
// keys, and the architecture (stages, heads, windows, focused blocks) from key names and shapes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "models/swin.h"

namespace attnscope {

// Whether the keys are a Swin's (in either layout).
bool looks_like_swin(const Checkpoint& checkpoint);

// Renames Microsoft's layout (merging at the end of stages, `head`, stored relative_position_index
// and attn_mask) to timm's in place, as timm's checkpoint_filter_fn does; returns "microsoft" or
// "timm".
std::string adopt_swin_layout(Checkpoint& checkpoint);

// The architecture from timm-layout keys; `meta` is the file's attnscope_arch metadata (or null)
// for what the keys cannot tell (the configured window, the training input size). Throws
// CheckpointError naming the key that is missing or misshapen.
SwinArch infer_swin_arch(const Checkpoint& checkpoint, const nlohmann::json& meta, const std::string& layout,
                         std::vector<std::string>& notes);

}  // namespace attnscope
