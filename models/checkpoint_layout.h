// The key layouts a checkpoint comes in, which families rename to their own (timm's) keys and keep
// for what they say of themselves ("swin (microsoft)").
#pragma once

#include <string>
#include <vector>

#include "core/enum_names.h"

namespace attnscope {

// The key layout a checkpoint came in, before its family renamed it to its own (timm's) keys:
// Hugging Face's ViT, DeiT, CLIP, DINOv3 and SigLIP, OpenAI CLIP's visual tower, DINOv2's hub files,
// Meta's DINOv3 files, Microsoft's Swin,
// the original PVT v2, or an attnscope TorchScript export.
enum class CheckpointLayout {
  Timm,
  HfVit,
  HfDeit,
  HfClip,
  OpenAiClip,
  Dinov2,
  Microsoft,
  Original,
  TorchScript,
  HfDinov3,  // transformers' DINOv3ViTModel folder
  HfSiglip,  // transformers' SiglipModel / SiglipVisionModel folder
  Dinov3,    // Meta's DINOv3 .pth (facebookresearch/dinov3)
  OpenClip,  // an open_clip folder (open_clip_config.json)
};
template <>
struct EnumTable<CheckpointLayout> {
  static const std::vector<EnumEntry<CheckpointLayout>>& entries();
};
inline std::string to_string(CheckpointLayout layout) { return enum_name(layout); }
// "swin" or "swin (microsoft)": a family's name with the layout it came in, where not timm's.
std::string name_with_layout(const std::string& family, CheckpointLayout layout);

}  // namespace attnscope
