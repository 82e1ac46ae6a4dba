// Reading FLatten-CSwin checkpoints (the authors' keys, no other layout): the architecture from key
// names and shapes, and what the keys cannot show (heads of softmax blocks, stripe widths, the
// training size) from the file's attnscope_arch metadata or .arch.json sidecar.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "models/cswin.h"

namespace attnscope {

// Whether the keys are a FLatten-CSwin's (stage1_conv_embed.*).
bool looks_like_cswin(const Checkpoint& checkpoint);

// The architecture from the keys; `meta` is the arch metadata (or null): heads, split_size,
// la_split_size, attn_type, focusing_factor, img_size. Throws CheckpointError naming the key that
// is missing or misshapen, or the metadata entry that contradicts the keys.
CSwinArch infer_cswin_arch(const Checkpoint& checkpoint, const nlohmann::json& meta, std::vector<std::string>& notes);

}  // namespace attnscope
