// Reading ViT/DeiT checkpoints in timm's layout (the Hugging Face, CLIP and DINOv2 layouts are
// renamed to it first by models/checkpoint_layouts): the architecture from key names and shapes,
// and what the layout or the user says where shapes cannot tell (heads, eps, activation).
#pragma once

#include "core/checkpoint.h"
#include "models/vit.h"

namespace attnscope {

struct ArchOverrides;
struct LoadReport;
struct LayoutFacts;

// Infers the architecture from timm-layout keys (see checkpoint_layouts.h for the others) and what
// their layout says; throws CheckpointError when the file is not a supported ViT/DeiT or its sizes
// are beyond models/arch_limits.
VitArch infer_arch(const Checkpoint& checkpoint, const ArchOverrides& overrides, LoadReport* report = nullptr,
                   const LayoutFacts* layout = nullptr);

}  // namespace attnscope
