// Reading ViT/DeiT checkpoints in timm's layout (the Hugging Face, CLIP and DINOv2 layouts are
// renamed to it first by models/checkpoint_layouts): the architecture from key names and shapes,
// and what the layout or the user says where shapes cannot tell (heads, eps, activation).
#pragma once

#include <map>
#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "models/vit.h"

namespace attnscope {

struct LoadReport;
struct LayoutFacts;

// Infers the architecture from timm-layout keys (see checkpoint_layouts.h for the others), what
// their layout says and `meta` (gather_arch_config's values: heads, eps, act; `sources` says where
// each came from); throws CheckpointError when the file is not a supported ViT/DeiT or its sizes
// are beyond models/arch_limits. What it assumes goes to report->assumed.
VitArch infer_arch(const Checkpoint& checkpoint, const nlohmann::json& meta, LoadReport* report = nullptr,
                   const LayoutFacts* layout = nullptr, const std::map<std::string, std::string>* sources = nullptr);

}  // namespace attnscope
